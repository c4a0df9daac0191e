/*
** executors -- where handlers run: the default worker (not the caller's thread);
** a px_queue (only inside px_queue_drain, on the draining thread, its fd readable
** exactly while handlers wait, a drain budget leaves it readable); a user executor
** whose post fails (the handler runs inline, once); one that keeps its posts and
** runs them in flush (each once, in batches); one that cannot run what it
** accepted and calls it with PX_ECANCELED (the handler's one call, aborted, and
** a periodic timer's final one); cancel winning while an expired handler waits
** in a px_queue; px_queue_free running what remains.
*/
#include <poll.h>
#include <stdatomic.h>

#include "../spec.h"

static int fd_readable(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int rc = poll(&p, 1, 0);
    CHECK(rc >= 0);
    return rc == 1 && (p.revents & POLLIN);
}

/* Waits (bounded) until `n` handlers are queued in `pq`. */
static void await_size(px_queue *pq, size_t n)
{
    int64_t end = px_now() + PX_TEST_TIMEOUT_NS;
    while (px_queue_size(pq) < n) {
        CHECK(px_now() < end);
        CHECK(px_queue_wait(pq, PX_MSEC(100)) >= 0);
        if (px_queue_size(pq) < n)
            sleep_ns(PX_USEC(200));   /* handlers wait, but not all of them yet */
    }
}

SPEC(default_worker)
{
    call_rec c = { 0 };
    int base = ev_count(&calls_made);
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    CHECK(px_timerq_add(q, 0, record_call, &c) != 0);
    EV_WAIT(&calls_made, base + 1);
    CHECK(!pthread_equal(c.thread, pthread_self()));
    px_timerq_free(q);
    CHECK_EQ(c.calls, 1);
}

SPEC(drainable_queue)
{
    enum { N = 5 };
    call_rec c[N] = { { 0 } };
    px_queue *pq = px_queue_new();
    CHECK(pq != NULL);
    int fd = px_queue_fd(pq);
    CHECK(fd >= 0);
    CHECK(!fd_readable(fd));
    CHECK_EQ(px_queue_wait(pq, 0), 0);
    px_executor ex = px_queue_executor(pq);
    px_timerq_opts o = { .executor = &ex, .timer_slack_ns = 0 };
    px_timerq *q = px_timerq_new(&o);
    CHECK(q != NULL);
    for (int i = 0; i < N; i++)
        CHECK(px_timerq_add(q, PX_USEC(100 * i), record_call, &c[i]) != 0);
    await_size(pq, N);
    CHECK(fd_readable(fd));
    CHECK_EQ(px_queue_wait(pq, 0), 1);
    for (int i = 0; i < N; i++)
        CHECK_EQ(c[i].calls, 0);            /* nothing runs outside a drain */
    CHECK_EQ(px_queue_drain(pq, 2), 2);
    CHECK(fd_readable(fd));                 /* the budget left three behind */
    CHECK_EQ(px_queue_size(pq), 3);
    CHECK_EQ(px_queue_drain(pq, 0), 3);
    CHECK(!fd_readable(fd));
    CHECK_EQ(px_queue_drain(pq, 0), 0);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(c[i].calls, 1);
        CHECK_EQ(c[i].status, 0);
        CHECK(pthread_equal(c[i].thread, pthread_self()));
    }

    /* Cancel wins while the expired handler waits in the queue. */
    call_rec late = { 0 };
    uint64_t id = px_timerq_add(q, 0, record_call, &late);
    CHECK(id != 0);
    await_size(pq, 1);
    CHECK_EQ(px_timerq_cancel(q, id), 1);
    CHECK_EQ(px_timerq_cancel(q, id), 0);
    CHECK_EQ(late.calls, 0);
    CHECK_EQ(px_queue_drain(pq, 0), 1);
    CHECK_EQ(late.calls, 1);
    CHECK_EQ(late.status, PX_ECANCELED);
    CHECK(pthread_equal(late.thread, pthread_self()));

    /* Handlers already posted outlive the timer queue; px_queue_free runs them. */
    call_rec left[3] = { { 0 } };
    for (int i = 0; i < 3; i++)
        CHECK(px_timerq_add(q, 0, record_call, &left[i]) != 0);
    await_size(pq, 3);
    px_timerq_free(q);
    CHECK(px_queue_post(pq, record_call, &left[2], 7) == 0);   /* a direct post, too */
    CHECK_EQ(left[0].calls + left[1].calls + left[2].calls, 0);
    px_queue_free(pq);
    CHECK_EQ(left[0].calls, 1);
    CHECK_EQ(left[1].calls, 1);
    CHECK_EQ(left[2].calls, 2);
    CHECK_EQ(left[2].status, 7);
    CHECK(left[0].status == 0 || left[0].status == PX_ECANCELED);

    CHECK_EQ(px_queue_post(NULL, record_call, NULL, 0), PX_EINVAL);
    CHECK_EQ(px_queue_drain(NULL, 0), PX_EINVAL);
    CHECK_EQ(px_queue_fd(NULL), PX_EINVAL);
    CHECK_EQ(px_queue_wait(NULL, 0), PX_EINVAL);
    px_queue_free(NULL);
}

/* A timer queue whose handler calls go to `pq` (px_timerq_new copies the
** executor). */
static px_timerq *timerq_into(px_queue *pq)
{
    px_executor ex = px_queue_executor(pq);
    px_timerq_opts o = { .executor = &ex };
    px_timerq *q = px_timerq_new(&o);
    CHECK(q != NULL);
    return q;
}

/* The queue's descriptor (what a binding's fileno() gives an event loop) is
** readable exactly while a call waits to be drained: not before the timer is
** due, from its post until the drain that runs it, and not after. */
SPEC(fileno_is_readable_exactly_while_calls_are_owed)
{
    px_queue *pq = px_queue_new();
    CHECK(pq != NULL);
    int fd = px_queue_fd(pq);
    CHECK(fd >= 0);
    px_timerq *q = timerq_into(pq);
    CHECK(!fd_readable(fd));
    for (int round = 0; round < 2; round++) {
        call_rec c = { 0 };
        CHECK(px_timerq_add(q, round ? PX_MSEC(20) : 0, record_call, &c) != 0);
        CHECK_EQ(px_queue_wait(pq, PX_TEST_TIMEOUT_NS), 1);
        CHECK(fd_readable(fd));
        CHECK(fd_readable(fd));             /* asking does not clear it */
        CHECK_EQ(c.calls, 0);
        CHECK_EQ(px_queue_drain(pq, 0), 1);
        CHECK_EQ(c.calls, 1);
        CHECK_EQ(c.status, 0);
        CHECK(!fd_readable(fd));
    }
    px_timerq_free(q);
    CHECK(!fd_readable(fd));
    px_queue_free(pq);
}

/* A wait without a bound (a negative timeout, or one too long for the clock)
** returns once a call is due, not before: what a binding's q:run() or
** HandlerQueue.wait() without a timeout gives. */
SPEC(run_without_a_bound_with_no_timeout_waits_until_a_call_is_due)
{
    px_queue *pq = px_queue_new();
    CHECK(pq != NULL);
    px_timerq *q = timerq_into(pq);
    const int64_t forever[] = { -1, INT64_MIN, INT64_MAX };
    for (size_t i = 0; i < sizeof forever / sizeof forever[0]; i++) {
        call_rec c = { 0 };
        int64_t t0 = px_now();
        CHECK(px_timerq_add(q, PX_MSEC(50), record_call, &c) != 0);
        CHECK_EQ(px_queue_wait(pq, forever[i]), 1);
        CHECK_EQ(px_queue_drain(pq, 0), 1);
        CHECK_GE(px_now() - t0, PX_MSEC(50));
        CHECK_EQ(c.calls, 1);
        CHECK_EQ(c.status, 0);
    }
    px_timerq_free(q);
    px_queue_free(pq);
}

/* The same wait with a periodic timer: it returns at the next tick, and the
** cancel's final call is the next call to come. */
SPEC(run_without_a_bound_waits_for_a_periodic_timers_next_tick)
{
    px_queue *pq = px_queue_new();
    CHECK(pq != NULL);
    px_timerq *q = timerq_into(pq);
    call_rec c = { 0 };
    int64_t t0 = px_now();
    uint64_t id = px_timerq_add_periodic(q, PX_MSEC(30), PX_MSEC(30), record_call, &c);
    CHECK(id != 0);
    CHECK_EQ(px_queue_wait(pq, -1), 1);
    CHECK_EQ(px_queue_drain(pq, 0), 1);
    CHECK_GE(px_now() - t0, PX_MSEC(30));
    CHECK_EQ(c.calls, 1);
    CHECK_EQ(c.status, 0);
    CHECK_EQ(px_timerq_cancel(q, id), 1);
    CHECK_EQ(px_queue_wait(pq, -1), 1);
    CHECK_EQ(px_queue_drain(pq, 0), 1);       /* the final aborted call */
    CHECK_EQ(c.calls, 2);
    CHECK_EQ(c.status, PX_ECANCELED);
    px_timerq_free(q);
    px_queue_free(pq);
}

/* An executor that always refuses: the queue must run the handler itself. */
static atomic_int posts;

static int refuse(void *ctx, px_handler_fn fn, void *arg, int status)
{
    (void)ctx; (void)fn; (void)arg; (void)status;
    atomic_fetch_add(&posts, 1);
    return PX_ENOMEM;
}

SPEC(failing_executor)
{
    call_rec fired = { 0 }, aborted = { 0 };
    px_executor ex = { refuse, NULL, NULL };
    px_timerq_opts o = { .executor = &ex, .timer_slack_ns = -1 };
    px_timerq *q = px_timerq_new(&o);
    CHECK(q != NULL);
    int base = ev_count(&calls_made);
    CHECK(px_timerq_add(q, 0, record_call, &fired) != 0);
    EV_WAIT(&calls_made, base + 1);
    uint64_t id = px_timerq_add(q, PX_SEC(10), record_call, &aborted);
    CHECK(id != 0);
    CHECK_EQ(px_timerq_cancel(q, id), 1);
    EV_WAIT(&calls_made, base + 2);
    px_timerq_free(q);
    CHECK_EQ(fired.calls, 1);
    CHECK_EQ(fired.status, 0);
    CHECK(!pthread_equal(fired.thread, pthread_self()));   /* inline, on the worker */
    CHECK_EQ(aborted.calls, 1);
    CHECK_EQ(aborted.status, PX_ECANCELED);
    CHECK_GE(atomic_load(&posts), 1);
    CHECK_EQ(ev_count(&calls_made), base + 2);
}

/* An executor that keeps its posts and runs them in flush, on the worker: every
** call kept must run once, before the worker moves on to its next batch. */
typedef struct held {
    struct { px_handler_fn fn; void *arg; int status; } call[256];
    int n, flushes, most;
} held;

static int keep(void *ctx, px_handler_fn fn, void *arg, int status)
{
    held *h = ctx;
    CHECK(h->n < 256);                       /* a batch is at most 256 posts */
    h->call[h->n].fn = fn;
    h->call[h->n].arg = arg;
    h->call[h->n].status = status;
    h->n++;
    return 0;
}

static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;

static void run_kept(void *ctx)
{
    held *h = ctx;
    h->flushes++;
    if (h->n > h->most)
        h->most = h->n;
    for (int i = 0; i < h->n; i++)
        h->call[i].fn(h->call[i].arg, h->call[i].status);
    h->n = 0;
}

SPEC(flushing_executor)
{
    enum { N = 1000 };
    static call_rec c[N];
    static held h;
    px_executor ex = { keep, &h, run_kept };
    px_timerq_opts o = { .executor = &ex };
    px_timerq *q = px_timerq_new(&o);
    CHECK(q != NULL);
    int base = ev_count(&calls_made);
    int64_t due = px_now() + PX_MSEC(20);
    for (int i = 0; i < N; i++)               /* all due at once: large batches */
        CHECK(px_timerq_add_at(q, due, record_call, &c[i]) != 0);
    EV_WAIT(&calls_made, base + N);
    px_timerq_free(q);
    CHECK_EQ(h.n, 0);
    CHECK_GE(h.flushes, N / 256);
    CHECK_GE(h.most, 2);                      /* some flush carried a batch */
    for (int i = 0; i < N; i++) {
        CHECK_EQ(c[i].calls, 1);
        CHECK_EQ(c[i].status, 0);
    }
}

/* An executor that keeps its posts and then cannot run them as asked (a
** Python executor shut down or a future cancelled): it calls each with
** PX_ECANCELED, which makes that call the handler's aborted one. */
static int keep_locked(void *ctx, px_handler_fn fn, void *arg, int status)
{
    held *h = ctx;
    pthread_mutex_lock(&keep_lock);
    int rc = keep(h, fn, arg, status);
    pthread_mutex_unlock(&keep_lock);
    return rc;
}

static int kept(held *h)
{
    pthread_mutex_lock(&keep_lock);
    int n = h->n;
    pthread_mutex_unlock(&keep_lock);
    return n;
}

SPEC(executor_aborts_what_it_cannot_run)
{
    static held h;
    call_rec once = { 0 }, ticks = { 0 };
    px_executor ex = { keep_locked, &h, NULL };
    px_timerq_opts o = { .executor = &ex };
    px_timerq *q = px_timerq_new(&o);
    CHECK(q != NULL);
    uint64_t id = px_timerq_add(q, 0, record_call, &once);
    uint64_t pid = px_timerq_add_periodic(q, 0, PX_MSEC(1), record_call, &ticks);
    CHECK(id != 0 && pid != 0);
    int64_t end = px_now() + PX_TEST_TIMEOUT_NS;
    while (kept(&h) < 2) {
        CHECK(px_now() < end);
        sleep_ns(PX_USEC(200));
    }
    pthread_mutex_lock(&keep_lock);
    for (int i = 0; i < h.n; i++)
        h.call[i].fn(h.call[i].arg, PX_ECANCELED);
    h.n = 0;
    pthread_mutex_unlock(&keep_lock);
    CHECK_EQ(once.calls, 1);
    CHECK_EQ(once.status, PX_ECANCELED);
    CHECK_EQ(ticks.calls, 1);                 /* the final call: not re-armed */
    CHECK_EQ(ticks.status, PX_ECANCELED);
    CHECK_EQ(px_timerq_cancel(q, id), 0);
    CHECK_EQ(px_timerq_cancel(q, pid), 0);
    CHECK_EQ(px_timerq_pending(q), 0);
    px_timerq_free(q);
    CHECK_EQ(kept(&h), 0);
    CHECK_EQ(once.calls, 1);
    CHECK_EQ(ticks.calls, 1);
}

static void setup(void)
{
    ev_init(&calls_made);
}

SPECS_AROUND(setup, NULL, default_worker, drainable_queue, failing_executor, flushing_executor,
             executor_aborts_what_it_cannot_run, fileno_is_readable_exactly_while_calls_are_owed,
             run_without_a_bound_with_no_timeout_waits_until_a_call_is_due,
             run_without_a_bound_waits_for_a_periodic_timers_next_tick)
