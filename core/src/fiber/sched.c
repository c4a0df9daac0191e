/*
** sched.c -- the scheduler: its run loop, fiber ids, and the inbox through which
** other threads post to it.
**
** The loop runs the ready fibers in FIFO order, a batch at a time (the fibers
** made ready while a batch runs wait for the next one), and between batches it
** expires the sleeps and timeouts that are due and takes in what other threads
** posted.  Only when nothing is runnable does it wait in the kernel: on an
** eventfd, until the next deadline of its ordered set.  A poster writes the
** eventfd only when the scheduler said it sleeps, so a busy scheduler costs its
** posters no syscall.
**
** An id is the scheduler's serial (never reused in the process) over a count of
** its fibers, so ids are never reused and any thread can tell from an id which
** scheduler to hand a wake to.
**
** fork(): only the forking thread survives in the child, and a lock another
** thread held stays locked there.  The registry's lock is the one lock of the
** engine that a child's new scheduler needs, so the fork handlers hold it across
** fork(), together with the lock of the forking thread's own scheduler (which
** the suspended run takes once more on its way out).  In the child, every
** scheduler made before the fork refuses work (PX_EFORKED): their threads are
** gone.  The forking thread's scheduler stops at its next switch: the forking
** fiber is no fiber any more in the child (it may run a new scheduler), and once
** it returns px_sched_run returns PX_EFORKED without running anything else.
*/
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/compiler.h"
#include "base/deadline.h"
#include "fiber/fiber.h"
#include "base/fork.h"
#include "base/trace.h"
#include "base/names.h"

_Thread_local px_sched *px__sched_tl;

/* -- the registry of live schedulers: only cross-thread wakes look here ---- */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static px_sched *reg_head;
static uint64_t reg_serial;
static pthread_once_t fork_watching = PTHREAD_ONCE_INIT;
static int fork_depth;   /* see fork_prepare */

/*
** The fork handlers run on the forking thread, one fork at a time.  Should a
** fork interrupt their installation, glibc's pthread_once runs it again in the
** child, which then has them twice: the depth makes the second pair do nothing.
** Lock order: the registry, then a scheduler's lock (as px__sched_post_by_id).
*/
static void fork_prepare(void)
{
    if (fork_depth++ > 0)
        return;
    pthread_mutex_lock(&reg_lock);
    if (px__sched_tl != NULL)
        pthread_mutex_lock(&px__sched_tl->lock);
}

static void fork_parent(void)
{
    if (--fork_depth > 0)
        return;
    if (px__sched_tl != NULL)
        pthread_mutex_unlock(&px__sched_tl->lock);
    pthread_mutex_unlock(&reg_lock);
}

/* The forking fiber, if any, leaves its scheduler: see the top of the file. */
static void fork_child(void)
{
    if (--fork_depth > 0)
        return;
    px_sched *s = px__sched_tl;
    if (s != NULL) {
        pthread_mutex_unlock(&s->lock);
        s->forked = 1;
        px__sched_tl = NULL;
        px__clock_virtual = NULL;
    }
    pthread_mutex_unlock(&reg_lock);
}

static void fork_watch(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

int px__sched_forked(const px_sched *s)
{
    return s->fork_gen != px__fork_generation();
}

/* What a call on `s` answers before it starts: PX_EINVAL for NULL, PX_EFORKED
** for a scheduler of the parent of a fork, 0 to go on. */
static int refusal(const px_sched *s)
{
    if (s == NULL)
        return PX_EINVAL;
    return px__sched_forked(s) ? PX_EFORKED : 0;
}

/* Gives `s` its serial and registers it; 0, or PX_ENOMEM when the process is
** out of serials. */
static int reg_add(px_sched *s)
{
    pthread_once(&fork_watching, fork_watch);
    pthread_mutex_lock(&reg_lock);
    int ok = reg_serial + 1 < (UINT64_C(1) << (64 - PX__FIBER_ID_SHIFT));
    if (ok) {
        s->serial = ++reg_serial;
        s->reg_next = reg_head;
        reg_head = s;
    }
    pthread_mutex_unlock(&reg_lock);
    return ok ? 0 : PX_ENOMEM;
}

void px__sched_each(void (*fn)(px_sched *s, void *ctx), void *ctx)
{
    pthread_once(&fork_watching, fork_watch);   /* before the lock is ever taken */
    pthread_mutex_lock(&reg_lock);
    for (px_sched *s = reg_head; s; s = s->reg_next)
        fn(s, ctx);
    pthread_mutex_unlock(&reg_lock);
}

static void reg_remove(px_sched *s)
{
    pthread_mutex_lock(&reg_lock);
    for (px_sched **p = &reg_head; *p; p = &(*p)->reg_next)
        if (*p == s) {
            *p = s->reg_next;
            break;
        }
    pthread_mutex_unlock(&reg_lock);
}

int px__sched_post_by_id(int kind, uint64_t id)
{
    int posted = 0;
    pthread_once(&fork_watching, fork_watch);   /* before the lock is ever taken */
    pthread_mutex_lock(&reg_lock);
    for (px_sched *s = reg_head; s; s = s->reg_next)
        if (s->serial == PX__FIBER_ID_SERIAL(id)) {
            px__item it = { .kind = kind, .id = id };
            posted = px__sched_inbox_post(s, &it) == 0;
            break;
        }
    pthread_mutex_unlock(&reg_lock);
    return posted;
}

/* -- ids: open addressing with linear probing, backward-shift deletion ---- */

static size_t id_hash(uint64_t id, size_t mask)
{
    uint64_t h = id * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h ^ (h >> 29)) & mask;
}

static int tab_grow(px_sched *s)
{
    size_t cap = s->tab_cap ? s->tab_cap * 2 : 64;
    px_fiber **tab = calloc(cap, sizeof *tab);
    if (tab == NULL)
        return PX_ENOMEM;
    for (size_t i = 0; i < s->tab_cap; i++) {
        px_fiber *f = s->tab[i];
        if (f == NULL)
            continue;
        size_t j = id_hash(f->id, cap - 1);
        while (tab[j])
            j = (j + 1) & (cap - 1);
        tab[j] = f;
    }
    free(s->tab);
    s->tab = tab;
    s->tab_cap = cap;
    return 0;
}

int px__sched_id_add(px_sched *s, px_fiber *f)
{
    if ((s->tab_len + 1) * 2 > s->tab_cap && tab_grow(s) != 0)
        return PX_ENOMEM;
    if (s->next_n >= (UINT64_C(1) << PX__FIBER_ID_SHIFT))
        return PX_ENOMEM;   /* 2^40 fibers made by one scheduler: out of ids */
    f->id = (s->serial << PX__FIBER_ID_SHIFT) | s->next_n++;
    size_t mask = s->tab_cap - 1, j = id_hash(f->id, mask);
    while (s->tab[j])
        j = (j + 1) & mask;
    s->tab[j] = f;
    s->tab_len++;
    return 0;
}

static size_t id_find(px_sched *s, uint64_t id)
{
    if (s->tab_cap == 0)
        return SIZE_MAX;
    size_t mask = s->tab_cap - 1;
    for (size_t j = id_hash(id, mask); s->tab[j]; j = (j + 1) & mask)
        if (s->tab[j]->id == id)
            return j;
    return SIZE_MAX;
}

px_fiber *px__sched_lookup(px_sched *s, uint64_t id)
{
    size_t j = id_find(s, id);
    return j == SIZE_MAX ? NULL : s->tab[j];
}

void px__sched_id_remove(px_sched *s, uint64_t id)
{
    size_t i = id_find(s, id);
    if (i == SIZE_MAX)
        return;
    size_t mask = s->tab_cap - 1;
    /* Close the gap: move back each later entry of the run that may not stay
    ** behind it (its home slot is not in (i, j]). */
    for (size_t j = (i + 1) & mask; s->tab[j]; j = (j + 1) & mask) {
        size_t home = id_hash(s->tab[j]->id, mask);
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            s->tab[i] = s->tab[j];
            i = j;
        }
    }
    s->tab[i] = NULL;
    s->tab_len--;
}

/* -- the ready queue ------------------------------------------------------ */

void px__sched_ready_push(px_sched *s, px_fiber *f)
{
    f->state = PX__FIBER_READY;
    f->next = NULL;
    f->prev = s->ready_tail;
    if (s->ready_tail)
        s->ready_tail->next = f;
    else
        s->ready = f;
    s->ready_tail = f;
}

/* Takes ready fiber f out of its list: the batch or the queue, both singly
** linked from their heads (the loop pops the batch without a look at prev),
** so a fiber's prev is right unless it is a head. */
void px__sched_ready_remove(px_sched *s, px_fiber *f)
{
    px_fiber *prev = s->batch == f || s->ready == f ? NULL : f->prev;
    if (prev)
        prev->next = f->next;
    else if (s->batch == f)
        s->batch = f->next;
    else
        s->ready = f->next;
    if (f->next)
        f->next->prev = prev;
    else if (s->ready_tail == f)
        s->ready_tail = prev;
}

/* May `from` hand the next turn on?  A chain is counted by the fibers it
** hands to, so the loop counts nothing: from->handed says whether `from` got
** its turn so (a stale flag only shortens a chain).  The last to hand off
** goes on counting too: its flag is spent, but it may hand off again in the
** same turn (joins that a fired scope ends at once), and were each to start
** a chain of its own, or to start one after the bound refused it, a chain
** would never end.  (A fiber that gets a turn again after someone else
** handed off either was handed it, or took it from the batch.) */
static int hand_off_allowed(px_sched *s, px_fiber *from)
{
    unsigned chain = from->handed || from == s->handed_by ? s->handoffs + 1 : 1;
    from->handed = 0;
    s->handed_by = from;   /* only compared: it may be freed meanwhile */
    if (chain > PX__SCHED_HANDOFF_MAX)
        return 0;
    s->handoffs = chain;
    return 1;
}

/* The turn after this one: `to` goes first in the batch. */
static void batch_push_front(px_sched *s, px_fiber *to)
{
    to->state = PX__FIBER_READY;
    to->handed = 1;
    to->next = s->batch;
    if (s->batch)
        s->batch->prev = to;
    s->batch = to;
}

void px__sched_hand_off(px_sched *s, px_fiber *from, px_fiber *to)
{
    if (s->batch == NULL && s->ready == to)
        return;   /* it runs next anyway: the next batch starts with it */
    if (hand_off_allowed(s, from)) {
        px__sched_ready_remove(s, to);
        batch_push_front(s, to);
    }
}

void px__sched_ready_push_after(px_sched *s, px_fiber *from, px_fiber *to)
{
    if (hand_off_allowed(s, from))
        batch_push_front(s, to);
    else
        px__sched_ready_push(s, to);
}

void px__sched_switch_to(px_fiber *f)
{
    px__context_switch(&f->ctx, &f->s->ctx);
}

/* -- the inbox ------------------------------------------------------------ */

/* Wakes the scheduler if it sleeps and nobody did yet; the lock is held. */
static void signal_locked(px_sched *s)
{
    if (s->sleeping && !s->signalled) {
        uint64_t one = 1;
        s->signalled = 1;
        ssize_t w = write(s->efd, &one, sizeof one);
        (void)w;   /* a full counter is readable anyway */
    }
}

int px__sched_inbox_post(px_sched *s, const px__item *proto)
{
    if (px__sched_forked(s))
        return PX_EFORKED;   /* its lock may be held by a thread the child lacks */
    px__item *it = malloc(sizeof *it);
    if (it == NULL)
        return PX_ENOMEM;
    *it = *proto;
    it->next = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->inbox_tail)
        s->inbox_tail->next = it;
    else
        s->inbox = it;
    s->inbox_tail = it;
    atomic_store_explicit(&s->inbox_ready, 1, memory_order_release);
    signal_locked(s);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int px_sched_post(px_sched *s, px_fiber_fn fn, void *arg)
{
    if (s == NULL || fn == NULL)
        return PX_EINVAL;
    px__item it = { .kind = PX__FIBER_ITEM_SPAWN, .fn = fn, .arg = arg };
    return px__sched_inbox_post(s, &it);
}

int px_sched_wake(px_sched *s)
{
    int r = refusal(s);
    if (r != 0)
        return r;
    uint64_t one = 1;
    ssize_t w = write(s->efd, &one, sizeof one);   /* no lock: a signal handler may call */
    (void)w;   /* a full counter is readable anyway */
    return 0;
}

static void *handler_fiber(void *arg)
{
    px__item *it = arg;
    px_handler_fn fn = it->hfn;
    void *harg = it->arg;
    int status = it->status;
    free(it);
    fn(harg, status);
    return NULL;
}

/* A handler call px_sched_free found not started (a fiber that never ran, or
** an item never taken in): its one call, aborted -- not in the child of a fork
** made in one of the run's fibers, where the call belongs to the parent. */
static void abort_call(px_sched *s, px__item *it)
{
    if (!s->forked)
        it->hfn(it->arg, PX_ECANCELED);
    free(it);
}

void px__sched_unstarted(px_sched *s, px_fiber_fn fn, void *arg)
{
    if (fn == handler_fiber)
        abort_call(s, arg);
    /* a posted function is dropped, its arg untouched (see px_sched_free) */
}

static int exec_post(void *ctx, px_handler_fn fn, void *arg, int status)
{
    if (ctx == NULL || fn == NULL)
        return PX_EINVAL;
    px__item it = { .kind = PX__FIBER_ITEM_HANDLER, .hfn = fn, .arg = arg, .status = status };
    return px__sched_inbox_post(ctx, &it);
}

px_executor px_sched_executor(px_sched *s)
{
    px_executor e = { exec_post, s, NULL };
    return e;
}

int px_sched_hold(px_sched *s)
{
    int r = refusal(s);
    if (r != 0)
        return r;
    pthread_mutex_lock(&s->lock);
    s->holds++;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int px_sched_unhold(px_sched *s)
{
    int r = refusal(s);
    if (r != 0)
        return r;
    pthread_mutex_lock(&s->lock);
    if (s->holds == 0)
        r = PX_EINVAL;
    else if (--s->holds == 0)
        signal_locked(s);   /* it may be waiting only because of the hold */
    pthread_mutex_unlock(&s->lock);
    return r;
}

/* Takes in one posted item. */
static void take_item(px_sched *s, px__item *it)
{
    px_fiber *f;
    switch (it->kind) {
    case PX__FIBER_ITEM_SPAWN:
        f = px__fiber_new(s, it->fn, it->arg, 0);
        if (f)
            f->released = 1;    /* nobody holds a handle: detached */
        else
            it->fn(it->arg);    /* no stack: run it here rather than lose it */
        free(it);
        return;
    case PX__FIBER_ITEM_HANDLER:
        f = px__fiber_new(s, handler_fiber, it, 0);
        if (f) {
            f->released = 1;    /* handler_fiber frees the item */
        } else {
            it->hfn(it->arg, it->status);
            free(it);
        }
        return;
    case PX__FIBER_ITEM_WAKE:
        px__fiber_wake(s, it->id);
        break;
    case PX__FIBER_ITEM_CANCEL:
        px__scope_cancel_parked(s, it->id);
        break;
    case PX__FIBER_ITEM_CALL:
        it->hfn(it->arg, 0);
        break;
    }
    free(it);
}

/* Sets s->clock_ms, the time parks are stamped with, from `now`. */
static void look_at_clock(px_sched *s, int64_t now)
{
    s->clock_ms = (uint32_t)((uint64_t)(now - s->clock_t0) / 1000000u);
}

static void drain_inbox(px_sched *s)
{
    look_at_clock(s, px_now());   /* seldom: a look costs nothing here */
    pthread_mutex_lock(&s->lock);
    px__item *it = s->inbox;
    s->inbox = s->inbox_tail = NULL;
    atomic_store_explicit(&s->inbox_ready, 0, memory_order_relaxed);
    pthread_mutex_unlock(&s->lock);
    while (it) {
        px__item *next = it->next;
        take_item(s, it);
        it = next;
    }
}

/* -- the loop ------------------------------------------------------------- */

static void expire(px_sched *s)
{
    int64_t now = px_now();
    look_at_clock(s, now);
    px__tnode *n = px__tset_expire(&s->tset, now, 0);
    while (n) {
        px__tnode *next = px__tset_after(n);
        px_fiber *f = PX__CONTAINER_OF(n, px_fiber, timer);
        px__fiber_expired(s, f, now);
        n = next;
    }
}

static void run_hosted(px_sched *s, px_fiber *f);

/* One turn of C fiber f on stack st, until it switches back. */
static inline void run_on(px_sched *s, px_fiber *f, const px__stack *st)
{
    px__stack_running(f->id, st);
    px__context_switch(&s->ctx, &f->ctx);
    px__stack_running(0, NULL);
    if (!px__stack_intact(st))
        px__stack_overflowed(f->id);
}

/* A fiber on a shared stack: its bytes go there first, and once it left,
** its buffer is made to fit what it left there, before any other fiber can
** need that stack (shared.c).  When it cannot be, the fiber goes on at once:
** what it called returns PX_ENOMEM. */
static PX__NOINLINE void run_shared(px_sched *s, px_fiber *f)
{
    const px__stack *st = px__shared_enter(f);
    for (;;) {
        run_on(s, f, st);
        if (f->state == PX__FIBER_DONE || px__shared_keep(f) == 0)
            return;
        px__fiber_refuse(s, f, PX_ENOMEM);
    }
}

static void run_one(px_sched *s, px_fiber *f)
{
    s->cur = f;
    f->state = PX__FIBER_RUNNING;
    if (f->hosted)
        run_hosted(s, f);
    else if (PX__LIKELY(f->sh == NULL)) {
        if (!PX__LIKELY(f->ctx.sp != NULL))
            px__fiber_first_turn(s, f);
        run_on(s, f, &f->stack);
    }
    else
        run_shared(s, f);
    s->cur = NULL;
    if (f->state == PX__FIBER_DONE)
        px__fiber_reap(s, f);
}

static void run_hosted(px_sched *s, px_fiber *f)
{
    if (f->dereg_due)
        px__fiber_park_finish(f);     /* interrupted while it was away: dereg first */
    px__sched_turn_over(s, f, f->ops.resume(f->host_ctx));
}

void px__sched_turn_over(px_sched *s, px_fiber *f, int status)
{
    if (status == PX_HOST_DONE)
        px__fiber_end(s, f);
    else if (f->state == PX__FIBER_RUNNING)
        px__sched_ready_push(s, f);   /* returned without parking: a yield */
}

/* Waits in the kernel until `until` or a post; the lock is held on entry and
** released on return.  Returns PX_EINTR when a signal ended the wait. */
static int wait_kernel(px_sched *s, int64_t until)
{
    int virtual_clock = s->opts.clock == PX_CLOCK_VIRTUAL;
    int64_t real = virtual_clock ? px__clock_real() : 0;
    s->sleeping = 1;
    pthread_mutex_unlock(&s->lock);
    struct pollfd pfd = { .fd = s->efd, .events = POLLIN };
    static const struct timespec zero = { 0, 0 };
    struct timespec ts;
    const struct timespec *tsp = NULL;
    if (until != INT64_MAX) {
        ts = px__deadline_timespec(until, px_now());
        tsp = &ts;
    }
    s->in_hook = 1;
    if (s->opts.on_wait) {
        s->opts.on_wait(s->opts.on_wait_ctx, 1);
        /* The hook may wake (px_wake, px_fd_notify_closing): on this thread
        ** that readies the fiber at once, with no post to end the wait. */
        if (s->ready)
            tsp = &zero;
    }
    int n = s->poll.epfd >= 0 ? px__poll_wait(s, tsp) : ppoll(&pfd, 1, tsp, NULL);
    int err = errno;
    if (s->opts.on_wait)
        s->opts.on_wait(s->opts.on_wait_ctx, 0);
    s->in_hook = 0;
    errno = err;
    int r = n < 0 && errno == EINTR ? PX_EINTR : 0;
    if (n > 0 && s->poll.epfd < 0) {
        uint64_t v;
        ssize_t got = read(s->efd, &v, sizeof v);
        (void)got;   /* EAGAIN: another look emptied it */
    }
    /* It waited for the outside: time went by -- up to the last deadline there
    ** is, which a jump may have reached already (a sleep for ever). */
    if (virtual_clock)
        s->vnow = px__deadline_finite(px__deadline_after(s->vnow, px__clock_real() - real));
    look_at_clock(s, px_now());
    pthread_mutex_lock(&s->lock);
    s->sleeping = 0;
    s->signalled = 0;
    pthread_mutex_unlock(&s->lock);
    return r;
}

/* Nothing is ready: decides between waiting, ending and a deadlock.  Returns
** PX_EINTR (not done) when a signal ended a wait of a pulled run: its host
** handles the signal and pulls again. */
static int idle(px_sched *s, int *done)
{
    pthread_mutex_lock(&s->lock);
    if (s->inbox) {
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
    if (s->holds == 0 && s->live == 0) {
        pthread_mutex_unlock(&s->lock);
        *done = 1;
        return 0;
    }
    /* In px_run an open token scope is a hold: a thread may still cancel it. */
    if (s->holds == 0 && s->tset.count == 0 && s->outside == 0 &&
        !(s->opts.token_scopes_hold && s->token_scopes != 0)) {
        pthread_mutex_unlock(&s->lock);
        *done = 1;
        return px__deadlock_report(s);
    }
    /* A virtual clock jumps when nothing but time can wake a fiber. */
    if (s->opts.clock == PX_CLOCK_VIRTUAL && s->holds == 0 && s->outside == 0 &&
        s->tset.count != 0) {
        int64_t next = px__tset_next(&s->tset);
        if (next > s->vnow)
            s->vnow = next;
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
    int r = wait_kernel(s, px__tset_next(&s->tset));
    return s->pulling ? r : 0;
}

/*
** The run loop, resumable: runs the ready fibers a batch at a time, in FIFO
** order (the fibers made ready while a batch runs wait for the next one), and
** between batches expires what is due and takes in what was posted.  The rest
** of the batch lives in `s`, so that the loop can stop at a pulled fiber's
** turn (returns 1, s->cur is that fiber) and go on from there when its host
** pulls again.  Otherwise it returns once the run is over: 0, PX_EDEADLK or
** PX_EFORKED -- or PX_EINTR, see idle().
*/
static int turn(px_sched *s)
{
    for (;;) {
        while (s->batch && !s->forked) {
            px_fiber *f = s->batch;
            s->batch = f->next;
            if (f->hosted && f->ops.resume == NULL) {
                s->cur = f;
                f->state = PX__FIBER_RUNNING;
                if (f->dereg_due)
                    px__fiber_park_finish(f);
                return 1;
            }
            run_one(s, f);
        }
        if (s->forked)
            return PX_EFORKED;   /* the child of a fork made on this thread */
        if (s->tset.count)
            expire(s);
        /* Fibers wait on fds: one look per batch, however busy the run. */
        if (atomic_load_explicit(&s->poll.waiting, memory_order_relaxed) && s->ready)
            px__poll_now(s);
        if (!s->ready && !atomic_load_explicit(&s->inbox_ready, memory_order_acquire)) {
            int done = 0, r = idle(s, &done);
            if (done || r == PX_EINTR)
                return r;
        }
        if (atomic_load_explicit(&s->inbox_ready, memory_order_acquire))
            drain_inbox(s);
        s->batch = s->ready;
        s->ready = s->ready_tail = NULL;
    }
}

/* -- life ----------------------------------------------------------------- */

/* 1 when px_sched_new must refuse `opts`.  A default stack no address space
** holds would leave every spawn, and every posted function, without a fiber. */
static int opts_refused(const px_sched_opts *opts)
{
    return opts && ((opts->stack_size != 0 && !px__stack_mappable(opts->stack_size)) ||
                    opts->shared_stacks > PX_SHARED_STACKS_MAX ||
                    (opts->clock != PX_CLOCK_REAL && opts->clock != PX_CLOCK_VIRTUAL));
}

px_sched *px_sched_new(const px_sched_opts *opts)
{
    px__trace_init();
    px__dump_read_env();
    if (opts_refused(opts))
        return NULL;
    px_sched *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    if (opts && opts->shared_stacks != 0 &&
        (s->shared = calloc(opts->shared_stacks, sizeof *s->shared)) == NULL) {
        free(s);
        return NULL;
    }
    s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->efd < 0) {
        free(s->shared);
        free(s);
        return NULL;
    }
    px__fork_watch();
    s->fork_gen = px__fork_generation();
    /* Ready before it is registered: px_fd_notify_closing walks the registry
    ** from any thread and takes each scheduler's poll lock. */
    pthread_mutex_init(&s->lock, NULL);
    px__poll_init(&s->poll);
    if (reg_add(s) != 0) {
        px__poll_destroy(&s->poll);
        pthread_mutex_destroy(&s->lock);
        close(s->efd);
        free(s->shared);
        free(s);
        return NULL;
    }
    px__list_init(&s->all);
    s->clock_t0 = s->vnow = px__clock_real();
    px__tset_init(&s->tset, s->vnow);
    s->slack_ns = PX_USEC(1);
    s->next_n = 1;
    atomic_init(&s->inbox_ready, 0);
    if (opts) {
        s->opts = *opts;
        if (opts->timer_slack_ns != 0)
            s->slack_ns = px__deadline_tolerance(opts->timer_slack_ns);
    }
    return s;
}

/* Binds `s` to the calling thread for a run; 0 or the error of px_sched_run. */
static int run_begin(px_sched *s, int pulling)
{
    if (px__sched_tl != NULL)
        return PX_EBUSY;
    int r = 0;
    pthread_mutex_lock(&s->lock);
    if (s->running)
        r = PX_EBUSY;
    else if (s->bound && !pthread_equal(s->thread, pthread_self()))
        r = PX_ETHREAD;
    else {
        s->running = 1;
        s->pulling = pulling;
        s->bound = 1;            /* only a run that starts binds: a refused */
        s->thread = pthread_self();   /* call must not move s to its thread */
    }
    pthread_mutex_unlock(&s->lock);
    if (r == 0 && s->pool == NULL) {
        /* Made here, not in px_sched_new: the pool sets up this thread's
        ** alternate signal stack for the overflow message. */
        s->pool = px__stack_pool_new(s->opts.stack_size);
        if (s->pool == NULL) {
            pthread_mutex_lock(&s->lock);
            s->running = s->pulling = 0;
            pthread_mutex_unlock(&s->lock);
            r = PX_ENOMEM;
        }
    }
    return r;
}

/* The thread's side of a run: its timer slack and scheduler. */
static void run_enter(px_sched *s)
{
    px__trace_init();
    s->old_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (s->slack_ns > 0)
        prctl(PR_SET_TIMERSLACK, (unsigned long)s->slack_ns, 0, 0, 0);
    px__context_init_thread(&s->ctx);
    px__sched_tl = s;
    if (s->opts.clock == PX_CLOCK_VIRTUAL)
        px__clock_virtual = &s->vnow;
}

/* Ends the run that run_begin began; returns r. */
static int run_leave(px_sched *s, int r)
{
    px__sched_tl = NULL;
    px__clock_virtual = NULL;
    if (s->slack_ns > 0 && s->old_slack > 0)
        prctl(PR_SET_TIMERSLACK, (unsigned long)s->old_slack, 0, 0, 0);
    pthread_mutex_lock(&s->lock);
    s->running = 0;
    s->pulling = 0;
    pthread_mutex_unlock(&s->lock);
    return r;
}

int px_sched_run(px_sched *s)
{
    int r = refusal(s);
    if (r == 0 && s->pulled)
        r = PX_EINVAL;   /* its pulled fibers have no resume to call */
    if (r == 0)
        r = run_begin(s, 0);
    if (r != 0)
        return r;
    run_enter(s);
    return run_leave(s, turn(s));   /* no pulled fiber: turn() never stops at one */
}

int px_sched_next(px_sched *s, int status, void **host_ctx)
{
    int r = refusal(s);
    if (r == 0 && host_ctx == NULL)
        r = PX_EINVAL;
    if (r != 0)
        return r;
    *host_ctx = NULL;
    if (!s->pulling) {
        if ((r = run_begin(s, 1)) != 0)
            return r;
        s->pulled = 1;
        run_enter(s);
    } else if (px__sched_tl != s) {
        return PX_ETHREAD;   /* pulled on its thread only */
    } else if (s->in_hook) {
        return PX_EBUSY;     /* from on_wait or on_deadlock: the loop is mid-wait */
    } else if (s->cur != NULL && (!s->cur->hosted || s->cur->ops.resume != NULL)) {
        return PX_EBUSY;     /* a C fiber's or a resumed host's turn: not the puller's */
    } else if (s->cur != NULL) {
        px_fiber *f = s->cur;   /* the turn that ends: an end's destructors run as f */
        px__sched_turn_over(s, f, status);
        s->cur = NULL;
        if (f->state == PX__FIBER_DONE)
            px__fiber_reap(s, f);
    }
    r = turn(s);
    if (r == 1)
        *host_ctx = s->cur->host_ctx;
    else if (r != PX_EINTR)
        run_leave(s, r);
    return r;
}

/* s was bound by a run on another thread than the caller's. */
static int bound_elsewhere(px_sched *s)
{
    pthread_mutex_lock(&s->lock);
    int other = s->bound && !pthread_equal(s->thread, pthread_self());
    pthread_mutex_unlock(&s->lock);
    return other;
}

int px_sched_cancel(px_sched *s)
{
    int r = refusal(s);
    if (r == 0 && bound_elsewhere(s))
        r = PX_ETHREAD;
    if (r != 0)
        return r;
    s->cancelled = 1;
    for (px__list *l = s->all.next; l != &s->all; l = l->next) {
        px_fiber *f = px__fiber_of_all(l);
        if (f->state == PX__FIBER_PARKED && !(f->park.flags & PX__FIBER_PARK_SHIELD))
            px__fiber_unpark(s, f, PX_ECANCELED);
    }
    return 0;
}

void px_sched_free(px_sched *s)
{
    if (s == NULL)
        return;
    px__names_forget(s);   /* given up: its name goes with it */
    if (s->pulling && px__sched_tl == s) {
        s->cur = NULL;   /* a pulled run given up between two pulls */
        run_leave(s, 0);
    }
    reg_remove(s);   /* from now on no wake by id reaches it */
    if (px__sched_forked(s) && (!s->forked || s->running))
        return;   /* a parent's: its lock, its stacks and its handlers are not ours */
    /* What the free calls (destructors, handlers) runs off any fiber, also when
    ** a fiber of this thread's run frees s: that run steps aside meanwhile. */
    px_sched *outer = px__sched_tl;
    const int64_t *outer_clock = px__clock_virtual;
    px__sched_tl = NULL;
    px__clock_virtual = NULL;
    while (!px__list_empty(&s->all))
        px__fiber_discard(s, px__fiber_of_all(s->all.next));
    while (s->free_recs) {
        px_fiber *f = s->free_recs;
        s->free_recs = f->next;
        free(f);
    }
    /* Each call may post again (to any scheduler): take the inbox until empty. */
    while (s->inbox) {
        px__item *it = s->inbox;
        s->inbox = s->inbox_tail = NULL;
        for (px__item *next; it; it = next) {
            next = it->next;
            if (it->kind == PX__FIBER_ITEM_HANDLER) {
                abort_call(s, it);   /* a handler is owed its one call */
                continue;
            }
            if (it->kind == PX__FIBER_ITEM_CALL)
                it->hfn(it->arg, PX_ECANCELED);   /* so is a call: it lets go */
            free(it);
        }
    }
    px__sched_tl = outer;
    px__clock_virtual = outer_clock;
    px__extra_free_all(s);
    px__tset_destroy(&s->tset);
    px__shared_free(s);
    px__stack_pool_free(s->pool);
    free(s->tab);
    px__poll_destroy(&s->poll);
    close(s->efd);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

struct run_main {
    px_fiber_fn fn;
    void *arg, *result;
};

static void *run_main_fiber(void *arg)
{
    struct run_main *m = arg;
    px__fiber_here()->fn = m->fn;   /* what a dump says the fiber runs */
    m->result = m->fn(m->arg);
    return NULL;
}

int px_run(px_fiber_fn main, void *arg, void **result)
{
    return px_run_with(NULL, main, arg, result);
}

int px_run_with(const px_sched_opts *opts, px_fiber_fn main, void *arg, void **result)
{
    if (result)
        *result = NULL;
    if (main == NULL)
        return PX_EINVAL;
    if (opts_refused(opts))
        return PX_EINVAL;
    if (px__sched_tl != NULL)
        return PX_EBUSY;
    px_sched *s = px_sched_new(opts);
    if (s == NULL)
        return PX_ENOMEM;
    /* Nobody can hold this scheduler for a thread that will cancel a token:
    ** a fiber with a cancel scope open waits for that thread instead. */
    s->opts.token_scopes_hold = 1;
    struct run_main m = { main, arg, NULL };
    int r = px_sched_post(s, run_main_fiber, &m);
    if (r == 0)
        r = px_sched_run(s);
    px_sched_free(s);
    if (r == 0 && result)
        *result = m.result;
    return r;
}
