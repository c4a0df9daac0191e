/*
** pool.c -- the blocking pool: px_run_blocking runs a function on a thread of
** a process-wide pool while the calling fiber parks (see parataxis.h, "The
** blocking pool").
**
** One lock guards the pool: its FIFO of queued jobs, its idle threads and
** every job's state.  A job is on the heap, never on a fiber's stack: once
** abandoned it outlives the call.  It belongs to the calling fiber as a hold
** (fiber/waitq.h), so that when the fiber ends or is discarded before it
** collected the job -- a hosted fiber whose host never called again, a
** scheduler freed with the fiber parked -- ended() gives the job up, and its
** release still runs exactly once.
**
** A job's life, each step under the lock:
**
**   QUEUED   on the FIFO.  An interrupted park dequeues it (the park's dereg):
**            DROPPED, fn never runs.
**   RUNNING  a pool thread took it and runs fn.  An interrupted fiber either
**            gives it up (PX_BLOCKING_ABANDON: `gone`, the thread releases
**            the result) or waits on in a shielded park, which no scope ends.
**   DONE     fn returned; the thread wakes the fiber (px_wake: any thread),
**            which collects the result and frees the job.  A stray wake finds
**            the job not DONE, and the fiber parks again.
**
** Who frees a job: the fiber when it collects (DONE) or when its park
** dequeued it (DROPPED); the pool thread when the job was `gone` as fn
** returned; ended() when the fiber ends holding a job DONE or DROPPED (or
** QUEUED: it dequeues it).
**
** Idle threads wait on a condition variable of their own, in a LIFO, so the
** most recently idle one takes the next job and the others time out and exit.
** A submit wakes exactly one idle thread, or starts a new one under the cap
** (or leaves its job to the one thread that spins, see spin()): a burst of N
** jobs never leaves jobs queued behind threads that were signalled but had
** not yet woken.
*/
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "base/clock.h"
#include "base/deadline.h"
#include "base/fork.h"
#include "base/list.h"
#include "fiber/fiber.h"
#include "fiber/waitq.h"
#include "io/pool.h"

/* Sized for bursts of DNS lookups, the pool's main customer: a lookup holds a
** thread for a whole round trip to a resolver (a second or more when one times
** out), so the cap is the number of lookups under way at once -- libuv's 4 is
** a known bottleneck there.  An idle thread costs a few pages and each exits
** after px__pool_idle_ns, so 64 of them are cheap; far more would be the
** thread explosion users of other pools complain about. */
#define DEFAULT_MAX 64

int64_t px__pool_idle_ns = PX_SEC(5);

enum job_state { QUEUED, RUNNING, DONE, DROPPED };

typedef struct job {
    px__list link;              /* in the FIFO while QUEUED */
    px__hold hold;              /* the fiber's, until it collects or gives up */
    void *(*fn)(void *arg);
    void *arg;
    void (*release)(void *arg, void *result);
    void *result;
    uint64_t fiber;             /* whom the thread wakes */
    unsigned flags;
    int state;                  /* enum job_state, under the lock */
    int gone;                   /* the fiber gave it up: the thread releases it */
    int shielded;               /* the fiber waits for fn whatever its scopes say */
    int blocked;                /* the fiber waits on `done` (it could not park) */
    atomic_int cancelled;       /* px_blocking_cancelled */
} job;

typedef struct worker {
    pthread_cond_t cv;
    struct worker *next;        /* in the idle LIFO */
    int woken;                  /* a submit took it off the LIFO for a job */
} worker;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t done;        /* a job of a blocked fiber ended */
    pthread_condattr_t mono;    /* CLOCK_MONOTONIC, for the idle waits */
    int ready;                  /* the fields below are set up */
    px__list queue;
    worker *idle;
    size_t threads;             /* started and not exited */
    size_t spinning;            /* threads that look for a job before they sleep */
    size_t max;
    int max_set;                /* px_blocking_set_max was called */
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Jobs on the FIFO: what a spinning thread watches, without the lock. */
static atomic_size_t queued;

/* Set once the pool exists: its fork generation, for the child's refusal. */
static atomic_int made;
static unsigned made_gen;

static _Thread_local job *current;   /* the job this pool thread runs */

/* 1 in the child of a fork when the pool was made before it: its threads are
** gone and its lock may be held for ever. */
static int forked(void)
{
    return atomic_load_explicit(&made, memory_order_acquire) &&
           made_gen != px__fork_generation();
}

static size_t env_max(void)
{
    const char *e = getenv("PARATAXIS_BLOCKING_THREADS");
    if (e == NULL || *e == '\0')
        return DEFAULT_MAX;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(e, &end, 10);
    if (errno != 0 || *end != '\0' || n == 0 || *e == '-')
        return DEFAULT_MAX;
    return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

/* Under the lock: sets the pool up (no thread yet). */
static void setup(void)
{
    if (pool.ready)
        return;
    pthread_condattr_init(&pool.mono);
    pthread_condattr_setclock(&pool.mono, CLOCK_MONOTONIC);
    pthread_cond_init(&pool.done, NULL);
    px__list_init(&pool.queue);
    if (!pool.max_set)
        pool.max = env_max();
    px__fork_watch();
    made_gen = px__fork_generation();
    atomic_store_explicit(&made, 1, memory_order_release);
    pool.ready = 1;
}

/* Under the lock: wakes one idle thread; 0 when none is idle. */
static int wake_idle(void)
{
    worker *w = pool.idle;
    if (w == NULL)
        return 0;
    pool.idle = w->next;
    w->woken = 1;
    pthread_cond_signal(&w->cv);
    return 1;
}

/* Under the lock: takes the FIFO's first job, now RUNNING, or NULL. */
static job *take(void)
{
    if (px__list_empty(&pool.queue) || pool.threads > pool.max)
        return NULL;
    job *j = PX__CONTAINER_OF(pool.queue.next, job, link);
    px__list_unlink(&j->link);
    atomic_fetch_sub_explicit(&queued, 1, memory_order_relaxed);
    j->state = RUNNING;
    return j;
}

/*
** How long a thread that ran out of jobs looks for the next one before it
** sleeps.  A job's fiber, woken, often submits its next job a few
** microseconds later; a thread asleep by then is woken by the kernel from
** an idle CPU, which costs tens of microseconds in a virtual machine.  One
** thread at a time spins, so at most one CPU's time is spent so.
*/
#define SPIN_NS PX_USEC(50)

/* Under the lock (released meanwhile): looks for a job for SPIN_NS; 1 when
** one may be there.  Only one thread spins at a time; a submit that finds it
** spinning and no other job queued leaves its job to it. */
static int spin(void)
{
    if (pool.spinning > 0)
        return 0;
    pool.spinning++;
    pthread_mutex_unlock(&pool.lock);
    int64_t end = px_now() + SPIN_NS;
    /* sched_yield: on a busy CPU, the thread that will submit runs first. */
    while (atomic_load_explicit(&queued, memory_order_relaxed) == 0 && px_now() < end)
        sched_yield();
    pthread_mutex_lock(&pool.lock);
    pool.spinning--;
    return !px__list_empty(&pool.queue);
}

/* Under the lock: waits idle for a job; 0 when the wait timed out (the
** thread leaves the LIFO and should exit). */
static int wait_idle(worker *w)
{
    w->woken = 0;
    w->next = pool.idle;
    pool.idle = w;
    /* An absolute time on CLOCK_MONOTONIC, the clock of pool.mono. */
    struct timespec ts = px__clock_timespec(px__deadline_after(px_now(), px__pool_idle_ns));
    while (!w->woken) {
        if (pthread_cond_timedwait(&w->cv, &pool.lock, &ts) == ETIMEDOUT && !w->woken) {
            worker **p = &pool.idle;
            while (*p != w)
                p = &(*p)->next;
            *p = w->next;
            return 0;
        }
    }
    return 1;
}

/* Outside the lock: what the end of a job owes -- its release when its fiber
** gave it up, else the wake of its fiber (whose call frees it). */
static void finish(job *j)
{
    pthread_mutex_lock(&pool.lock);
    j->state = DONE;
    int gone = j->gone;
    uint64_t id = j->fiber;
    if (j->blocked)
        pthread_cond_broadcast(&pool.done);
    pthread_mutex_unlock(&pool.lock);
    if (gone) {
        if (j->release)
            j->release(j->arg, j->result);
        free(j);
    } else {
        px_wake(id);   /* j may be freed from here on */
    }
}

static void *worker_main(void *arg)
{
    (void)arg;
    worker w;
    pthread_cond_init(&w.cv, &pool.mono);
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        job *j = take();
        if (j == NULL) {
            if (pool.threads > pool.max)
                break;
            if (spin())
                continue;
            if (!wait_idle(&w))
                break;
            continue;
        }
        pthread_mutex_unlock(&pool.lock);
        current = j;
        j->result = j->fn(j->arg);
        current = NULL;
        finish(j);
        pthread_mutex_lock(&pool.lock);
    }
    pool.threads--;
    pthread_mutex_unlock(&pool.lock);
    pthread_cond_destroy(&w.cv);
    return NULL;
}

/* Starts one more thread (the count is taken already, under the lock); 0 or
** PX_ENOMEM, with the count given back. */
static int start_thread(void)
{
    pthread_attr_t a;
    pthread_t t;
    int r = pthread_attr_init(&a);
    if (r == 0) {
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&t, &a, worker_main, NULL);
        pthread_attr_destroy(&a);
    }
    if (r == 0)
        return 0;
    pthread_mutex_lock(&pool.lock);
    pool.threads--;
    pthread_mutex_unlock(&pool.lock);
    return PX_ENOMEM;
}

/* Queues j and sees that a thread will take it; 0 or PX_ENOMEM (nothing
** queued: no thread could be started and none runs). */
static int submit(job *j)
{
    pthread_mutex_lock(&pool.lock);
    setup();
    px__list_push(&pool.queue, &j->link);
    /* A spinning thread takes one job: the others of a burst wake or start
    ** threads of their own. */
    size_t n = atomic_fetch_add_explicit(&queued, 1, memory_order_relaxed) + 1;
    int start = 0;
    if (n > pool.spinning && !wake_idle() && pool.threads < pool.max) {
        pool.threads++;
        start = 1;
    }
    pthread_mutex_unlock(&pool.lock);
    if (!start || start_thread() == 0)
        return 0;
    /* No thread: the job waits for one that runs, if any does. */
    pthread_mutex_lock(&pool.lock);
    int alone = pool.threads == 0 && j->state == QUEUED;
    if (alone) {
        px__list_unlink(&j->link);
        atomic_fetch_sub_explicit(&queued, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&pool.lock);
    return alone ? PX_ENOMEM : 0;
}

/* The park's dereg: an interrupted park takes its job off the FIFO if no
** thread took it yet. */
static void dequeue(void *ctx)
{
    job *j = ctx;
    pthread_mutex_lock(&pool.lock);
    if (j->state == QUEUED) {
        px__list_unlink(&j->link);
        atomic_fetch_sub_explicit(&queued, 1, memory_order_relaxed);
        j->state = DROPPED;
    }
    pthread_mutex_unlock(&pool.lock);
}

/* The fiber ended, or was discarded, holding the job: it gives the job up. */
static void ended(px__hold *h, uint64_t id, int discarding)
{
    (void)id;
    (void)discarding;
    job *j = PX__CONTAINER_OF(h, job, hold);
    pthread_mutex_lock(&pool.lock);
    atomic_store(&j->cancelled, 1);
    if (j->state == QUEUED) {
        px__list_unlink(&j->link);
        atomic_fetch_sub_explicit(&queued, 1, memory_order_relaxed);
        j->state = DROPPED;
    }
    int now = j->state != RUNNING;
    j->gone = 1;
    pthread_mutex_unlock(&pool.lock);
    if (now) {
        if (j->release)
            j->release(j->arg, j->state == DONE ? j->result : NULL);
        free(j);
    }
}

static int park(job *j)
{
    static const px_park_info info = {
        .reason = "blocking job", .dereg = dequeue, .kind = "blocking job",
        .flags = PX_PARK_OUTSIDE };
    px_park_info pi = info;
    pi.ctx = j;
    pi.object = j;
    return j->shielded ? px__fiber_park_shielded(&pi) : px_park_with(&pi);
}

/* The job the calling fiber f holds for (fn, arg), recorded by a hosted
** fiber's PX_EYIELD, or NULL. */
static job *recorded(px_fiber *f, void *(*fn)(void *), const void *arg, int any_arg)
{
    for (px__hold *h = px__waitq_holds(f); h; h = h->next) {
        if (h->ended != ended)
            continue;
        job *j = PX__CONTAINER_OF(h, job, hold);
        if (j->fn == fn && (any_arg || j->arg == arg))
            return j;
    }
    return NULL;
}

void *px__pool_recorded(void *(*fn)(void *arg))
{
    px_fiber *f = px__waitq_self();
    job *j = f ? recorded(f, fn, NULL, 1) : NULL;
    return j ? j->arg : NULL;
}

/* The job's fiber lets go of it; frees it unless a thread still runs it. */
static void let_go(job *j, int release_it)
{
    px__waitq_hold_drop(&j->hold);
    if (release_it && j->release)
        j->release(j->arg, NULL);
    free(j);
}

/* After park `r` of job j: 1 when the call is over with *out its return, 0
** when the fiber parks again. */
static int settle(job *j, int r, void **result, int *out)
{
    pthread_mutex_lock(&pool.lock);
    if (j->state == DONE) {
        pthread_mutex_unlock(&pool.lock);
        if (result)
            *result = j->result;
        let_go(j, 0);
        *out = 0;
        return 1;
    }
    if (j->state == DROPPED) {   /* dequeued by the park's dereg: never ran */
        pthread_mutex_unlock(&pool.lock);
        let_go(j, r != PX_ENOMEM);
        *out = r;
        return 1;
    }
    if (r == 0) {                /* a stray wake */
        pthread_mutex_unlock(&pool.lock);
        return 0;
    }
    /* Interrupted (or no memory to park) while fn runs. */
    atomic_store(&j->cancelled, 1);
    if (r == PX_ENOMEM) {
        /* A fiber on a shared stack that cannot park: it waits holding its
        ** thread, the one way left to keep its word. */
        j->blocked = 1;
        while (j->state != DONE)
            pthread_cond_wait(&pool.done, &pool.lock);
        pthread_mutex_unlock(&pool.lock);
        if (result)
            *result = j->result;
        let_go(j, 0);
        *out = 0;
        return 1;
    }
    if (j->flags & PX_BLOCKING_ABANDON) {
        px__waitq_hold_drop(&j->hold);   /* before the thread may free j */
        j->gone = 1;             /* the thread releases it when fn returns */
        pthread_mutex_unlock(&pool.lock);
        *out = r;
        return 1;
    }
    j->shielded = 1;
    pthread_mutex_unlock(&pool.lock);
    return 0;
}

int px_run_blocking(void *(*fn)(void *arg), void *arg,
                    void (*release)(void *arg, void *result), unsigned flags, void **result)
{
    if (result)
        *result = NULL;
    if (fn == NULL || (flags & ~PX_BLOCKING_ABANDON) != 0)
        return PX_EINVAL;
    px_fiber *f = px__waitq_self();
    if (f == NULL)
        return PX_ENOFIBER;
    if (forked())
        return PX_EFORKED;
    int r, out;
    job *j = recorded(f, fn, arg, 0);
    if (j != NULL) {             /* a hosted fiber's call again after PX_EYIELD */
        r = px_park_result();
        if (settle(j, r, result, &out))
            return out;
    } else {
        /* A scope that fired already: the job is as one dequeued unstarted.
        ** Submitted, an idle thread could take it before park() looks. */
        if ((r = px__scope_check(f)) != 0) {
            if (release != NULL)
                release(arg, NULL);
            return r;
        }
        if ((j = calloc(1, sizeof *j)) == NULL)
            return PX_ENOMEM;
        j->fn = fn;
        j->arg = arg;
        j->release = release;
        j->flags = flags;
        j->fiber = px_self();
        j->state = QUEUED;
        atomic_init(&j->cancelled, 0);
        if ((r = submit(j)) != 0) {
            free(j);
            return r;
        }
        px__waitq_hold_take(&j->hold, f, ended);
    }
    for (;;) {
        r = park(j);
        if (r == PX_EYIELD)
            return r;            /* recorded: the fiber holds j */
        if (settle(j, r, result, &out))
            return out;
    }
}

size_t px__pool_threads(void)
{
    pthread_mutex_lock(&pool.lock);
    size_t n = pool.threads;
    pthread_mutex_unlock(&pool.lock);
    return n;
}

int px_blocking_cancelled(void)
{
    job *j = current;
    return j != NULL && atomic_load(&j->cancelled);
}

int px_blocking_set_max(size_t n)
{
    if (n == 0)
        return PX_EINVAL;
    if (forked())
        return PX_EFORKED;
    pthread_mutex_lock(&pool.lock);
    pool.max = n;
    pool.max_set = 1;
    size_t start = 0;
    if (pool.ready) {
        /* Fewer: idle threads above the cap exit now, busy ones after their
        ** job.  More: threads for the jobs that wait for one. */
        while (pool.threads > pool.max && wake_idle())
            ;
        size_t waiting = 0;
        for (px__list *l = pool.queue.next; l != &pool.queue; l = l->next)
            waiting++;
        while (waiting > start && pool.threads < pool.max) {
            pool.threads++;
            start++;
        }
    }
    pthread_mutex_unlock(&pool.lock);
    while (start-- > 0)
        start_thread();
    return 0;
}
