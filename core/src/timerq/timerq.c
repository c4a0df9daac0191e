/*
** timerq.c -- the timer queue: one worker thread, exactly-once handlers.
**
** A timer is a 48-byte record.  Its life is a small state machine:
**
**   ARMED ---- expires ----> DUE ---- handler starts ----> RUNNING --> (free,
**     |                       |                               |      or ARMED
**     | cancel                | cancel (CAS)                  |      again if
**     v                       v                               |      periodic)
**   ABORTED <-----------------+       periodic cancel (CAS) --+--> RUNNING_CANCELLED
**     |                                                              |
**     +--- handler called with PX_ECANCELED, record freed            +--> ABORTED
**
** A cancel takes no lock: it moves the state by compare-and-swap, and so do the
** worker's moves that race it (ARMED -> DUE at expiry, DUE -> RUNNING as a
** handler starts, a periodic timer's RUNNING -> ARMED).  Whoever wins decides
** the status of the one call: that is the exactly-once contract.  Every other
** transition, and every change to the set and the lists, happens under the
** queue's lock.  A record a cancel made ABORTED stays in the set until the
** worker takes it out in a batch (the ring, below).
**
** The worker sleeps until the set's next moment or until a change that matters:
** an earlier deadline, an abort to deliver, shutdown.  It is never told what to
** do; it wakes, looks and sleeps again, so a spurious wake costs one look.
**
** A record is 48 bytes: the set's node (whose spare word holds the generation
** and the state), the handler and its argument.  A periodic timer's handler,
** argument and period live in a small block the argument then points to, so that
** one-shot timers, the common kind, do not pay for a period.  Records live in
** the queue's arena (arena.h), which gives each an index and finds its queue
** from its address.  An id is the record's generation (bumped at every reuse; a
** record whose 28-bit generation would wrap is retired, 48 bytes per 268 million
** reuses) over its index, so ids are never reused.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "parataxis.h"
#include "base/clock.h"
#include "base/compiler.h"
#include "base/deadline.h"
#include "base/fork.h"
#include "base/list.h"
#include "base/names.h"
#include "timerq/arena.h"
#include "timerq/timerq.h"
#include "timerset.h"

enum rec_state {
    REC_FREE,
    REC_ARMED,               /* in the set, waiting for its deadline */
    REC_DUE,                 /* expired, handed to the worker or an executor, not started */
    REC_ABORTED,             /* cancelled: owed one call with PX_ECANCELED */
    REC_RUNNING,             /* its handler was called with status 0 */
    REC_RUNNING_CANCELLED,   /* a periodic tick runs and the timer was cancelled meanwhile */
};

/*
** The record.  node.tag is the generation, then TAG_PERIODIC, then the state in
** the low three bits.  The generation and the flag change only while the record
** is free; the state is what the worker and a canceller race on, by CAS on the
** whole word.
*/
typedef struct px__trec {
    px__tnode node;           /* in the set while ARMED; else in q->aborted or q->inflight */
    px_handler_fn fn;        /* NULL for a periodic timer */
    void *arg;               /* for a periodic timer, its struct periodic */
} px__trec;

typedef struct periodic {
    px_handler_fn fn;
    void *arg;
    int64_t period;
} periodic;

#define TAG_STATE     7u
#define TAG_PERIODIC  8u
#define TAG_GEN_SHIFT 4
#define GEN_MAX       (UINT32_MAX >> TAG_GEN_SHIFT)

#define BATCH       256                            /* handlers per lock round */
#define RING        1024                           /* cancelled records awaiting their unlink */
#define LINE        64                             /* a cache line: see struct px_timerq */
#define AWAKE       INT64_MIN                      /* q->wake_at while the worker needs no wake */
#define ABORT_LINGER PX_USEC(50)                   /* default of q->abort_linger */

struct px_timerq {
    pthread_mutex_t lock;
    pthread_cond_t wake;         /* the worker sleeps on it */
    px__tset set;
    px__arena arena;             /* the records */
    px__list aborted;            /* ABORTED records whose call the worker owes */
    px__list inflight;           /* records handed to a handler, not yet settled */
    int64_t wake_at;             /* when the sleeping worker wakes by itself, or AWAKE */
    px_executor exec;            /* exec.post == NULL: handlers run on the worker */
    int64_t slack_ns;
    int64_t abort_linger;        /* how long an owed abort may wait unsignalled */
    int stopping;                /* px_timerq_free was called */
    int detached;                /* ... from the worker, which then releases the queue */
    int worker_done;             /* the worker has left its loop */
    int wake_owed;               /* signal the worker once the lock is released */
    int wake_soon;               /* the sleeping worker wakes within abort_linger by itself */
    int aborts_seen;             /* the worker delivered aborts since it last slept */
    pthread_t worker;
    atomic_size_t refs;          /* the owner's, plus one per handler posted to an executor */
    unsigned fork_gen;
    /* Records a cancel without the lock made ABORTED and left in the set (see
    ** ring_put): the cancels claim slots at `ring_tail`, the worker (or a cancel
    ** finding the ring full) takes them from `ring_head` under the lock.  What
    ** the cancels write and what the worker writes are on cache lines of their
    ** own, so that neither side takes the other's lines away at every call. */
    _Alignas(LINE) _Atomic size_t ring_tail;
    _Alignas(LINE) _Atomic size_t ring_head;
    size_t ring_gone;            /* records in the ring that are out of the set already */
    _Alignas(LINE) _Atomic int deaf;   /* the worker sleeps and will not look at the ring */
    _Alignas(LINE) _Atomic(px__trec *) ring[RING];
};

_Static_assert(sizeof(px__trec) == PX__ARENA_REC_BYTES, "a timer record fills its arena slot");

/* -- records -------------------------------------------------------------- */

static px__trec *rec_of(px__tnode *n)
{
    return PX__CONTAINER_OF(n, px__trec, node);
}

/* The record on a list (q->aborted, q->inflight) by its node's link. */
static px__trec *rec_on(px__list *l)
{
    return PX__CONTAINER_OF(l, px__trec, node.link);
}

static uint32_t rec_tag(const px__trec *r)
{
    return atomic_load_explicit(&r->node.tag, memory_order_relaxed);
}

static unsigned rec_state(const px__trec *r)
{
    return rec_tag(r) & TAG_STATE;
}

/* Sets the state where nobody races: the lock is held and the record is not
** with a handler. */
static void rec_set_state(px__trec *r, unsigned state)
{
    atomic_store_explicit(&r->node.tag, (rec_tag(r) & ~TAG_STATE) | state, memory_order_relaxed);
}

/* Moves the state from `from` to `to` if nobody moved it first; 1 if it did. */
static int rec_swap_state(px__trec *r, unsigned from, unsigned to)
{
    uint32_t tag = rec_tag(r);
    if ((tag & TAG_STATE) != from)
        return 0;
    return atomic_compare_exchange_strong(&r->node.tag, &tag, (tag & ~TAG_STATE) | to);
}

static int rec_periodic(const px__trec *r)
{
    return (rec_tag(r) & TAG_PERIODIC) != 0;
}

static uint64_t rec_id(const px__trec *r)
{
    return (uint64_t)(rec_tag(r) >> TAG_GEN_SHIFT) << 32 | px__arena_index(r);
}

static void wake_now(px_timerq *q);

/* Hands out the free record of lowest index (arena.h says why), else a
** never-used one, whose generation starts at 1. */
static px__trec *rec_alloc(px_timerq *q)
{
    px__trec *r = px__arena_reuse(&q->arena);
    if (r == NULL && (r = px__arena_fresh(&q->arena, q)) != NULL) {
        /* A store, not an init: a cancel may read the tag meanwhile. */
        atomic_store_explicit(&r->node.tag, 1u << TAG_GEN_SHIFT | REC_FREE, memory_order_relaxed);
        if (q->arena.prefault_bytes != 0)   /* the worker faults them in */
            wake_now(q);
    }
    return r;
}

static void rec_free(px_timerq *q, px__trec *r)
{
    uint32_t gen = rec_tag(r) >> TAG_GEN_SHIFT;
    if (rec_periodic(r))
        free(r->arg);
    r->fn = NULL;
    r->arg = NULL;
    atomic_store_explicit(&r->node.tag, (gen + 1) << TAG_GEN_SHIFT | REC_FREE,
                          memory_order_relaxed);
    if (gen != GEN_MAX)              /* a wrapped generation is retired for good */
        px__arena_put(&q->arena, r);
}

/* -- waking the worker ---------------------------------------------------- */

/* A deadline was added: wake the worker only if it sleeps past it. */
static void wake_for_deadline(px_timerq *q, int64_t deadline)
{
    if (deadline < q->wake_at) {
        q->wake_at = AWAKE;
        q->wake_owed = 1;
    }
}

/* An abort is owed: wake the worker unless it is awake or wakes by itself
** within q->abort_linger.  A cancel that had to signal costs a syscall (~1 us) and
** makes the worker contend for the lock, so a burst of cancels would pay it about
** once per cancel; instead, a worker that delivered aborts sleeps at most
** abort_linger before looking again, and the cancels meanwhile leave it be.  The
** aborted handlers still run once each, at most abort_linger (plus slack) late. */
static void wake_for_abort(px_timerq *q)
{
    if (q->wake_at != AWAKE && !q->wake_soon) {
        q->wake_at = AWAKE;
        q->wake_owed = 1;
    }
}

/* A call is owed now: wake the worker unless it is awake already. */
static void wake_now(px_timerq *q)
{
    if (q->wake_at != AWAKE) {
        q->wake_at = AWAKE;
        q->wake_owed = 1;
    }
}

static void queue_lock(px_timerq *q)
{
    pthread_mutex_lock(&q->lock);
}

/* Signals the worker if a wake is owed, then releases the lock.  Signalled
** under the lock: once the lock is released, a worker that frees its own queue
** from a handler may destroy the queue, condition variable included (TSan saw
** exactly that in free_semantics).  The worker may then wake only to wait for
** the lock, but wakes are rare: only a new earliest deadline or an abort the
** worker would not find by itself within abort_linger owes one. */
static void queue_unlock(px_timerq *q)
{
    if (q->wake_owed) {
        q->wake_owed = 0;
        pthread_cond_signal(&q->wake);
    }
    pthread_mutex_unlock(&q->lock);
}

/* Takes a record a cancel made ABORTED out of the set, unless expiry or
** abort_all took it out first (ring_owns counted it), and queues its call
** (lock held). */
static void ring_unlink(px_timerq *q, px__trec *r)
{
    if (px__tset_contains(&r->node))
        px__tset_remove(&q->set, &r->node);
    else
        q->ring_gone--;
    px__list_push(&q->aborted, &r->node.link);
}

/*
** Takes the records the cancels put in the ring out of the set and queues their
** calls (lock held), up to the first slot claimed but not filled yet: its cancel
** is about to fill it, and the worker looks again within abort_linger.  The
** records' neighbours in the set are fetched for the whole batch first, so that
** their cache misses overlap: unlinked one at a time by each cancel, they were
** two misses more per cancel in random order.
*/
static void ring_take(px_timerq *q)
{
    size_t head = atomic_load_explicit(&q->ring_head, memory_order_relaxed);
    size_t tail = atomic_load_explicit(&q->ring_tail, memory_order_acquire), end = head;
    for (; end != tail; end++) {
        px__trec *r = atomic_load_explicit(&q->ring[end % RING], memory_order_acquire);
        if (r == NULL)
            break;
        PX__PREFETCH_WRITE(r->node.link.prev);
        PX__PREFETCH_WRITE(r->node.link.next);
    }
    for (; head != end; head++)
        ring_unlink(q, atomic_exchange_explicit(&q->ring[head % RING], NULL, memory_order_relaxed));
    atomic_store_explicit(&q->ring_head, head, memory_order_release);
}

/* Records in the ring whose cancel has claimed a slot (lock held). */
static size_t ring_len(px_timerq *q)
{
    return atomic_load(&q->ring_tail) - atomic_load_explicit(&q->ring_head, memory_order_relaxed);
}

/* A record the set handed out (expiry, abort_all's px__tset_take_all) that a
** cancel without the lock made ABORTED first: the ring owns it now, and
** ring_take will queue its call. */
static void ring_owns(px_timerq *q)
{
    q->ring_gone++;
}

/*
** Puts `r`, which this thread just moved from ARMED to ABORTED, in the ring,
** without the lock when there is room.  The record stays in the set until
** ring_take, and nothing can undo ABORTED: whoever meets it there (expiry,
** abort_all) leaves its call to the ring.  A full ring is taken under the
** lock, and `r` unlinked there too rather than queued: the ring may stay full
** while a cancel that claimed its oldest slot has not filled it yet, and
** waiting for that cancel could spin for as long as it is kept off the CPU.
*/
static void ring_put(px_timerq *q, px__trec *r)
{
    size_t tail = atomic_load_explicit(&q->ring_tail, memory_order_relaxed);
    do {
        if (tail - atomic_load_explicit(&q->ring_head, memory_order_acquire) >= RING) {
            queue_lock(q);
            ring_take(q);
            ring_unlink(q, r);
            wake_for_abort(q);
            queue_unlock(q);
            return;
        }
    } while (!atomic_compare_exchange_weak(&q->ring_tail, &tail, tail + 1));
    atomic_store_explicit(&q->ring[tail % RING], r, memory_order_release);
    /* Paired with sleep_until: the worker says it is deaf, then looks at the
    ** ring; we claimed a slot, then look at deaf.  One of the two sees the other. */
    if (atomic_load(&q->deaf)) {
        queue_lock(q);
        wake_for_abort(q);
        queue_unlock(q);
    }
}

/* Cancels a record handed to a handler that has not started: DUE -> ABORTED; or a
** periodic one whose tick runs: RUNNING -> RUNNING_CANCELLED.  Returns 1 if won. */
static int abort_inflight(px__trec *r)
{
    return rec_swap_state(r, REC_DUE, REC_ABORTED) ||
           (rec_periodic(r) && rec_swap_state(r, REC_RUNNING, REC_RUNNING_CANCELLED));
}

/* -- arming --------------------------------------------------------------- */

static int queue_usable(const px_timerq *q)
{
    return q != NULL && q->fork_gen == px__fork_generation();
}

/* Arms a record for fn(arg); `flag` is TAG_PERIODIC when fn is NULL and arg is a
** periodic timer's block, else 0. */
static uint64_t arm(px_timerq *q, int64_t deadline, px_handler_fn fn, void *arg, uint32_t flag)
{
    uint64_t id = 0;
    queue_lock(q);
    px__trec *r = q->stopping ? NULL : rec_alloc(q);
    if (r != NULL) {
        r->fn = fn;
        r->arg = arg;
        r->node.deadline = deadline;
        uint32_t tag = rec_tag(r) & ~(TAG_STATE | TAG_PERIODIC);
        atomic_store_explicit(&r->node.tag, tag | flag | REC_ARMED, memory_order_relaxed);
        px__tset_insert(&q->set, &r->node);
        wake_for_deadline(q, deadline);
        id = rec_id(r);
    }
    queue_unlock(q);
    return id;
}

/* The deadline of an add `delay_ns` from now (saturating: a huge delay never
** comes due), or -1, which the add refuses, when the delay is negative. */
static int64_t add_deadline(int64_t delay_ns)
{
    return delay_ns < 0 ? -1 : px__deadline_after(px__clock_real(), delay_ns);
}

uint64_t px_timerq_add_at(px_timerq *q, int64_t deadline, px_handler_fn fn, void *arg)
{
    if (!queue_usable(q) || fn == NULL || deadline < 0)
        return 0;
    return arm(q, deadline, fn, arg, 0);
}

uint64_t px_timerq_add(px_timerq *q, int64_t delay_ns, px_handler_fn fn, void *arg)
{
    return px_timerq_add_at(q, add_deadline(delay_ns), fn, arg);
}

uint64_t px_timerq_add_periodic(px_timerq *q, int64_t first_ns, int64_t period_ns,
                                px_handler_fn fn, void *arg)
{
    int64_t deadline = add_deadline(first_ns);
    if (!queue_usable(q) || fn == NULL || deadline < 0 || period_ns <= 0)
        return 0;
    periodic *p = malloc(sizeof *p);
    if (p == NULL)
        return 0;
    *p = (periodic){ fn, arg, period_ns };
    uint64_t id = arm(q, deadline, NULL, p, TAG_PERIODIC);
    if (id == 0)
        free(p);
    return id;
}

/* -- cancelling ----------------------------------------------------------- */

/*
** A cancel takes no lock: a cancel in random order pays one cache miss, on the
** record's state, which it moves by compare-and-swap -- ARMED -> ABORTED, DUE ->
** ABORTED, a periodic RUNNING -> RUNNING_CANCELLED -- against the worker's
** moves of the same word.  The generation is in that word, so a record freed
** and handed out again meanwhile fails the swap.
*/
int px_timerq_cancel(px_timerq *q, uint64_t id)
{
    if (q == NULL)
        return PX_EINVAL;
    if (!queue_usable(q))
        return PX_EFORKED;
    px__trec *r = px__arena_find(&q->arena, (uint32_t)id);
    if (r == NULL)
        return 0;
    uint32_t tag = rec_tag(r);
    for (;;) {
        unsigned state = tag & TAG_STATE, to;
        if (tag >> TAG_GEN_SHIFT != (uint32_t)(id >> 32))
            return 0;
        if (state == REC_ARMED || state == REC_DUE)
            to = REC_ABORTED;
        else if (state == REC_RUNNING && (tag & TAG_PERIODIC))
            to = REC_RUNNING_CANCELLED;
        else
            return 0;
        if (atomic_compare_exchange_weak(&r->node.tag, &tag, (tag & ~TAG_STATE) | to)) {
            if (state == REC_ARMED)
                ring_put(q, r);
            return 1;
        }
    }
}

/* Cancels everything not started; the caller holds the lock. */
static size_t abort_all(px_timerq *q)
{
    size_t n = 0;
    px__tnode *node, *next;
    ring_take(q);
    for (node = px__tset_take_all(&q->set); node != NULL; node = next) {
        next = px__tset_after(node);
        if (rec_swap_state(rec_of(node), REC_ARMED, REC_ABORTED)) {
            px__list_push(&q->aborted, &node->link);
            n++;
        } else {
            ring_owns(q);
        }
    }
    for (px__list *l = q->inflight.next; l != &q->inflight; l = l->next)
        n += (size_t)abort_inflight(rec_on(l));
    if (n)
        wake_for_abort(q);
    return n;
}

size_t px_timerq_cancel_all(px_timerq *q)
{
    if (!queue_usable(q))
        return 0;
    queue_lock(q);
    size_t n = abort_all(q);
    queue_unlock(q);
    return n;
}

int px__timerq_forked(const px_timerq *q)
{
    return q->fork_gen != px__fork_generation();
}

int px__timerq_refusal(px_timerq *q)
{
    if (!queue_usable(q))
        return PX_ECLOSED;
    queue_lock(q);
    int stopping = q->stopping;
    queue_unlock(q);
    return stopping ? PX_ECLOSED : PX_ENOMEM;
}

size_t px_timerq_pending(px_timerq *q)
{
    if (!queue_usable(q))
        return 0;
    queue_lock(q);
    /* Records cancelled but still in the set are not pending.  A cancel under
    ** way in another thread may have left the count of them a moment behind. */
    size_t len = ring_len(q), n = q->set.count;
    size_t aborted = len > q->ring_gone ? len - q->ring_gone : 0;
    n = aborted > n ? 0 : n - aborted;
    queue_unlock(q);
    return n;
}

/* -- delivering ----------------------------------------------------------- */

/* Makes the one call of a record handed out: status 0 if it starts before any
** cancel, PX_ECANCELED if a cancel won. */
static void rec_call(px__trec *r)
{
    int status = rec_swap_state(r, REC_DUE, REC_RUNNING) ? 0 : PX_ECANCELED;
    if (rec_periodic(r)) {
        periodic *p = r->arg;
        p->fn(p->arg, status);
    } else {
        r->fn(r->arg, status);
    }
}

/*
** After a record's call returned (lock held): frees it, re-arms a periodic
** timer, or queues its final PX_ECANCELED call.  Returns 1 when that final call
** must be made by the caller right away because the worker has exited.
*/
static int settle(px_timerq *q, px__trec *r)
{
    px__list_unlink(&r->node.link);
    unsigned state = rec_state(r);
    int periodic_tick = rec_periodic(r) && (state == REC_RUNNING || state == REC_RUNNING_CANCELLED);
    if (periodic_tick && state == REC_RUNNING && !q->stopping &&
        rec_swap_state(r, REC_RUNNING, REC_ARMED)) {   /* a cancel may have come first */
        int64_t period = ((periodic *)r->arg)->period;
        r->node.deadline = px__deadline_next_tick(r->node.deadline, period, px__clock_real());
        px__tset_insert(&q->set, &r->node);
        wake_for_deadline(q, r->node.deadline);
        return 0;
    }
    if (periodic_tick) {
        rec_set_state(r, REC_ABORTED);
        if (q->worker_done) {
            px__list_push(&q->inflight, &r->node.link);
            return 1;
        }
        px__list_push(&q->aborted, &r->node.link);
        wake_now(q);
        return 0;
    }
    rec_free(q, r);
    return 0;
}

/* Releases the memory of a queue, not its lock or condition variable. */
static void queue_release(px_timerq *q)
{
    px__tset_destroy(&q->set);
    px__arena_destroy(&q->arena);
    free(q);
}

/* Out of line: the last unref is rare, and inlined into the worker's loop it
** would crowd the delivery path's registers. */
static PX__NOINLINE void queue_destroy(px_timerq *q)
{
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->wake);
    queue_release(q);
}

static void queue_unref(px_timerq *q)
{
    if (atomic_fetch_sub(&q->refs, 1) == 1)
        queue_destroy(q);
}

/* What an executor runs for a record posted to it.  A non-zero status is the
** executor saying it cannot run the call as asked (shut down, cancelled): the
** call is then made now, as an abort, unless a cancel already won. */
static void posted_call(void *arg, int status)
{
    px__trec *r = arg;
    px_timerq *q = px__arena_owner(r);
    int again;
    if (status != 0)
        rec_swap_state(r, REC_DUE, REC_ABORTED);
    do {
        rec_call(r);
        queue_lock(q);
        again = settle(q, r);
        queue_unlock(q);
    } while (again);
    queue_unref(q);
}

/* Moves up to BATCH owed calls into q->inflight and `batch` (lock held). */
static size_t take_batch(px_timerq *q, px__trec **batch)
{
    size_t n = 0;
    ring_take(q);
    while (n < BATCH && !px__list_empty(&q->aborted)) {
        px__list *l = q->aborted.next;
        px__list_unlink(l);
        px__list_push(&q->inflight, l);
        batch[n++] = rec_on(l);
    }
    if (n)
        q->aborts_seen = 1;
    px__tnode *next;
    px__tnode *node = n < BATCH ? px__tset_expire(&q->set, px__clock_real(), BATCH - n) : NULL;
    for (; node != NULL; node = next) {
        next = px__tset_after(node);
        if (!rec_swap_state(rec_of(node), REC_ARMED, REC_DUE)) {
            ring_owns(q);
            continue;
        }
        px__list_push(&q->inflight, &node->link);
        batch[n++] = rec_of(node);
    }
    if (q->exec.post != NULL)
        atomic_fetch_add(&q->refs, n);
    return n;
}

/* Makes or posts the calls of a batch; called without the lock, returns with it
** held: the lock round that settles a batch also takes the next one. */
static void deliver(px_timerq *q, px__trec **batch, size_t n)
{
    if (q->exec.post == NULL) {
        for (size_t i = 0; i < n; i++)
            rec_call(batch[i]);
        queue_lock(q);
        for (size_t i = 0; i < n; i++)
            settle(q, batch[i]);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (q->exec.post(q->exec.ctx, posted_call, batch[i], 0) != 0)
            posted_call(batch[i], 0);
    if (q->exec.flush != NULL)
        q->exec.flush(q->exec.ctx);
    queue_lock(q);
}

/* Sleeps until `deadline`, or for at most abort_linger after delivering aborts,
** since more tend to follow (see wake_for_abort), or while a cancel fills the
** ring slot it claimed. */
static void sleep_until(px_timerq *q, int64_t deadline)
{
    if (!q->aborts_seen) {
        /* Paired with ring_put: say we are deaf, then look at the ring. */
        atomic_store(&q->deaf, 1);
        q->aborts_seen = ring_len(q) != 0;
    }
    if (q->aborts_seen) {
        atomic_store_explicit(&q->deaf, 0, memory_order_relaxed);
        int64_t soon = px__deadline_after(px__clock_real(), q->abort_linger);
        if (soon < deadline)
            deadline = soon;
        q->wake_soon = 1;
        q->aborts_seen = 0;
    }
    q->wake_at = deadline;
    if (deadline == INT64_MAX) {
        pthread_cond_wait(&q->wake, &q->lock);
    } else {
        struct timespec ts = px__clock_timespec(deadline);
        pthread_cond_timedwait(&q->wake, &q->lock, &ts);
    }
    q->wake_at = AWAKE;
    q->wake_soon = 0;
    atomic_store_explicit(&q->deaf, 0, memory_order_relaxed);
}

static void *worker_main(void *arg)
{
    px_timerq *q = arg;
    px__trec *batch[BATCH];
    if (q->slack_ns > 0)
        prctl(PR_SET_TIMERSLACK, (unsigned long)q->slack_ns, 0, 0, 0);
    queue_lock(q);
    for (;;) {
        size_t n = take_batch(q, batch);
        if (n) {
            queue_unlock(q);
            deliver(q, batch, n);
            continue;
        }
        if (q->stopping && ring_len(q) == 0)
            break;
        px__arena_prefault pf;
        if (px__arena_prefault_take(&q->arena, &pf)) {
            /* Off the adders' path and without the lock (arena.c says why).
            ** Due calls and owed aborts wait meanwhile, a few hundred
            ** microseconds, at most seven times in a queue's life. */
            queue_unlock(q);
            px__arena_prefault_run(&pf);
            queue_lock(q);
            continue;
        }
        sleep_until(q, px__tset_next(&q->set));
    }
    q->worker_done = 1;
    int detached = q->detached;
    queue_unlock(q);
    if (detached) {
        pthread_detach(pthread_self());
        queue_unref(q);
    }
    return NULL;
}

/* -- the queue ------------------------------------------------------------ */

px_timerq *px_timerq_new(const px_timerq_opts *opts)
{
    px_timerq *q = aligned_alloc(LINE, sizeof *q);   /* sizeof is a multiple of LINE */
    if (q == NULL)
        return NULL;
    memset(q, 0, sizeof *q);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int failed = pthread_cond_init(&q->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (failed) {
        free(q);
        return NULL;
    }
    pthread_mutex_init(&q->lock, NULL);
    px__tset_init(&q->set, px__clock_real());
    px__arena_init(&q->arena);
    px__list_init(&q->aborted);
    px__list_init(&q->inflight);
    q->wake_at = AWAKE;
    q->slack_ns = PX_USEC(1);
    q->abort_linger = ABORT_LINGER;
    if (opts != NULL) {
        if (opts->executor != NULL)
            q->exec = *opts->executor;
        if (opts->timer_slack_ns != 0)
            q->slack_ns = px__deadline_tolerance(opts->timer_slack_ns);
        if (opts->abort_linger_ns > 0)
            q->abort_linger = px__deadline_tolerance(opts->abort_linger_ns);
    }
    atomic_init(&q->refs, 1);
    px__fork_watch();
    q->fork_gen = px__fork_generation();
    if (pthread_create(&q->worker, NULL, worker_main, q) != 0) {
        queue_destroy(q);
        return NULL;
    }
    return q;
}

void px_timerq_free(px_timerq *q)
{
    if (q == NULL)
        return;
    px__names_forget(q);   /* given up: its name goes with it */
    if (!queue_usable(q)) {
        /* The child of a fork: no worker, the lock may be held for ever, and the
        ** handlers belong to the parent.  Release the memory only. */
        if (atomic_load(&q->refs) == 1)
            queue_release(q);
        return;
    }
    int on_worker = pthread_equal(pthread_self(), q->worker);
    queue_lock(q);
    q->stopping = 1;
    q->detached = on_worker;
    abort_all(q);
    wake_now(q);
    queue_unlock(q);
    if (on_worker)
        return;
    pthread_join(q->worker, NULL);
    queue_unref(q);
}
