/*
** durations -- every duration and deadline parameter of the API at 0, 1,
** INT64_MAX and INT64_MIN.  The rule: a negative duration is bad input (or, for
** a deadline or a px_queue_wait timeout, what the header says: already due,
** wait for ever); a huge one saturates to "never" -- accepted, never early,
** and without signed overflow (the sanitizer build stops at the first).
**
** "Never fires" is shown by ordering, not by waiting and hoping: the queue runs
** due handlers in deadline order, so once a 20 ms timer added later has fired,
** a huge one has not come due.
*/
#include <sched.h>
#include <stdatomic.h>

#include "../spec.h"

static px_latch called;
static atomic_int n_ok, n_cancelled;

/* A call is counted and sets the latch in one step, under the latch's lock:
** a reader there (cancel_came) sees both or neither, so it neither waits for a
** set that already happened nor resets the latch while a set is under way. */
static void on_timer(void *arg, int status)
{
    (void)arg;
    pthread_mutex_lock(&called.m);
    if (status == 0)
        atomic_fetch_add(&n_ok, 1);
    else if (status == PX_ECANCELED)
        atomic_fetch_add(&n_cancelled, 1);
    called.count++;
    pthread_cond_broadcast(&called.c);
    pthread_mutex_unlock(&called.m);
}

/* Whether the cancelled call came; if not, *count is the latch's count then
** (that call will take it past). */
static int cancel_came(int *count)
{
    pthread_mutex_lock(&called.m);
    int came = atomic_load(&n_cancelled) != 0;
    *count = called.count;
    pthread_mutex_unlock(&called.m);
    return came;
}

static void reset(void)
{
    ev_destroy(&called);
    ev_init(&called);
    atomic_store(&n_ok, 0);
    atomic_store(&n_cancelled, 0);
}

/* Waits until a timer added now with 20 ms has fired: every earlier one did. */
static void pass_20ms(px_timerq *q)
{
    int before = ev_count(&called);
    int64_t t0 = px_now();
    CHECK(px_timerq_add(q, PX_MSEC(20), on_timer, NULL) != 0);
    EV_WAIT(&called, before + 1);
    CHECK_GE(px_now() - t0, PX_MSEC(20));
}

/* A timer that must never fire: accepted, pending, then cancelled once. */
static void check_never(px_timerq *q, uint64_t id)
{
    CHECK(id != 0);
    int ok = atomic_load(&n_ok);
    pass_20ms(q);
    CHECK_EQ(atomic_load(&n_ok), ok + 1);   /* only the 20 ms one */
    CHECK_EQ(px_timerq_pending(q), 1);
    int before = ev_count(&called);
    CHECK_EQ(px_timerq_cancel(q, id), 1);
    EV_WAIT(&called, before + 1);
    CHECK_EQ(atomic_load(&n_cancelled), 1);
    reset();
}

/* A timer that must fire, not before `min_ns` from `t0`. */
static void check_fires(uint64_t id, int64_t t0, int64_t min_ns)
{
    CHECK(id != 0);
    EV_WAIT(&called, 1);
    CHECK_GE(px_now() - t0, min_ns);
    CHECK_EQ(atomic_load(&n_ok), 1);
    reset();
}

static void test_add(px_timerq *q)
{
    int64_t t0 = px_now();
    check_fires(px_timerq_add(q, 0, on_timer, NULL), t0, 0);
    t0 = px_now();
    check_fires(px_timerq_add(q, 1, on_timer, NULL), t0, 1);
    check_never(q, px_timerq_add(q, INT64_MAX, on_timer, NULL));
    check_never(q, px_timerq_add(q, INT64_MAX - px_now() + 1, on_timer, NULL));
    CHECK_EQ(px_timerq_add(q, INT64_MIN, on_timer, NULL), 0);
    CHECK_EQ(px_timerq_add(q, -1, on_timer, NULL), 0);

    t0 = px_now();
    check_fires(px_timerq_add_at(q, 0, on_timer, NULL), t0, 0);   /* in the past */
    check_fires(px_timerq_add_at(q, 1, on_timer, NULL), t0, 0);
    check_never(q, px_timerq_add_at(q, INT64_MAX, on_timer, NULL));
    CHECK_EQ(px_timerq_add_at(q, INT64_MIN, on_timer, NULL), 0);
    CHECK_EQ(px_timerq_pending(q), 0);
    CHECK_EQ(ev_count(&called), 0);
}

/* A periodic timer: `ticks` ticks come (0: none may), then one cancel call. */
static void check_periodic(px_timerq *q, int64_t first, int64_t period, int ticks)
{
    uint64_t id = px_timerq_add_periodic(q, first, period, on_timer, NULL);
    CHECK(id != 0);
    if (ticks > 0) {
        EV_WAIT(&called, ticks);
    } else {
        pass_20ms(q);
        CHECK_EQ(atomic_load(&n_ok), 1);   /* the 20 ms one only */
    }
    int before = ev_count(&called);
    CHECK_EQ(px_timerq_cancel(q, id), 1);
    EV_WAIT(&called, before + 1);
    for (int n; !cancel_came(&n);)            /* a tick under way ends first */
        EV_WAIT(&called, n + 1);
    CHECK_EQ(atomic_load(&n_cancelled), 1);
    reset();
}

static void test_periodic(px_timerq *q)
{
    check_periodic(q, 0, PX_MSEC(1), 2);
    check_periodic(q, 1, PX_MSEC(1), 2);
    check_periodic(q, INT64_MAX, PX_MSEC(1), 0);
    CHECK_EQ(px_timerq_add_periodic(q, INT64_MIN, PX_MSEC(1), on_timer, NULL), 0);
    CHECK_EQ(px_timerq_add_periodic(q, 0, 0, on_timer, NULL), 0);
    check_periodic(q, 0, 1, 3);               /* 1 ns: missed ticks coalesce */
    CHECK_EQ(px_timerq_add_periodic(q, 0, INT64_MIN, on_timer, NULL), 0);

    /* Period INT64_MAX: the first tick, and then never another. */
    uint64_t id = px_timerq_add_periodic(q, 0, INT64_MAX, on_timer, NULL);
    CHECK(id != 0);
    EV_WAIT(&called, 1);
    pass_20ms(q);
    CHECK_EQ(atomic_load(&n_ok), 2);
    CHECK_EQ(px_timerq_cancel(q, id), 1);
    EV_WAIT(&called, 3);
    CHECK_EQ(atomic_load(&n_cancelled), 1);
    reset();
}

/* A deadline timer's wait: fires (want 0), never fires (want 1), refused (want -1). */
static void check_timer_wait(px_timerq *q, px_timer *t, int set, int want)
{
    if (want < 0) {
        CHECK_EQ(set, PX_EINVAL);
        return;
    }
    CHECK_EQ(set, 0);
    int64_t t0 = px_now(), expiry = px_timer_expiry(t);
    CHECK_EQ(px_timer_async_wait(t, on_timer, NULL), 0);
    if (want == 0) {
        EV_WAIT(&called, 1);
        CHECK(px_now() >= expiry || expiry <= t0);
        CHECK_EQ(atomic_load(&n_ok), 1);
    } else {
        CHECK_EQ(expiry, INT64_MAX);
        pass_20ms(q);
        CHECK_EQ(atomic_load(&n_ok), 1);
        CHECK_EQ(px_timer_cancel(t), 1);
        EV_WAIT(&called, 2);
        CHECK_EQ(atomic_load(&n_cancelled), 1);
    }
    reset();
}

static void test_timer(px_timerq *q)
{
    px_timer *t = px_timer_new(q);
    CHECK(t != NULL);
    check_timer_wait(q, t, px_timer_expires_after(t, 0), 0);
    check_timer_wait(q, t, px_timer_expires_after(t, 1), 0);
    check_timer_wait(q, t, px_timer_expires_after(t, INT64_MAX), 1);
    check_timer_wait(q, t, px_timer_expires_after(t, INT64_MIN), -1);
    check_timer_wait(q, t, px_timer_expires_at(t, 0), 0);
    check_timer_wait(q, t, px_timer_expires_at(t, 1), 0);
    check_timer_wait(q, t, px_timer_expires_at(t, INT64_MAX), 1);
    check_timer_wait(q, t, px_timer_expires_at(t, INT64_MIN), -1);
    px_timer_free(t);
}

/*
** A queue with this abort linger and slack: every cancel gets its one call.
** The first abort wakes the worker; it then lingers, so the second may wait for
** the next wake-up -- here a timer's deadline -- and never longer than free.
*/
static void test_opts(int64_t linger, int64_t slack)
{
    px_timerq_opts o = { NULL, slack, linger };
    px_timerq *q = px_timerq_new(&o);
    CHECK(q != NULL);
    uint64_t a = px_timerq_add(q, PX_SEC(100), on_timer, NULL);
    uint64_t b = px_timerq_add(q, PX_SEC(100), on_timer, NULL);
    CHECK_EQ(px_timerq_cancel(q, a), 1);
    EV_WAIT(&called, 1);
    CHECK_EQ(px_timerq_cancel(q, b), 1);
    int64_t t0 = px_now();
    CHECK(px_timerq_add(q, PX_MSEC(1), on_timer, NULL) != 0);
    EV_WAIT(&called, 3);
    CHECK_GE(px_now() - t0, PX_MSEC(1));
    CHECK_EQ(atomic_load(&n_ok), 1);
    CHECK_EQ(atomic_load(&n_cancelled), 2);
    uint64_t c = px_timerq_add(q, PX_SEC(100), on_timer, NULL);
    CHECK_EQ(px_timerq_cancel(q, c), 1);
    px_timerq_free(q);                        /* delivers what is still owed */
    CHECK_EQ(ev_count(&called), 4);
    CHECK_EQ(atomic_load(&n_cancelled), 3);
    reset();
}

static px_queue *hq;

static void noop(void *arg, int status)
{
    (void)arg; (void)status;
}

static void *post_later(void *arg)
{
    (void)arg;
    sleep_ns(PX_MSEC(5));   /* the waiter is in ppoll by then, or soon will be */
    CHECK_EQ(px_queue_post(hq, noop, NULL, 0), 0);
    return NULL;
}

/* px_queue_wait with `timeout` on an empty queue that a thread posts to. */
static void check_wait_for_post(int64_t timeout)
{
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, post_later, NULL), 0);
    CHECK_EQ(px_queue_wait(hq, timeout), 1);
    pthread_join(th, NULL);
    CHECK_EQ(px_queue_drain(hq, 0), 1);
}

static void test_queue_wait(void)
{
    hq = px_queue_new();
    CHECK(hq != NULL);
    CHECK_EQ(px_queue_wait(hq, 0), 0);
    int64_t t0 = px_now();
    CHECK_EQ(px_queue_wait(hq, 1), 0);
    CHECK_GE(px_now() - t0, 1);
    CHECK_EQ(px_queue_post(hq, noop, NULL, 0), 0);
    CHECK_EQ(px_queue_wait(hq, INT64_MAX), 1);
    CHECK_EQ(px_queue_wait(hq, INT64_MIN), 1);
    CHECK_EQ(px_queue_drain(hq, 0), 1);
    check_wait_for_post(INT64_MAX);
    check_wait_for_post(INT64_MAX - px_now() + 1);
    check_wait_for_post(INT64_MIN);          /* negative: for ever */
    px_queue_free(hq);
}

/* -- fibers --------------------------------------------------------------- */

static int sleep_max(void *arg)
{
    (void)arg;
    return px_sleep(INT64_MAX);
}

static int sleep_until_max(void *arg)
{
    (void)arg;
    return px_sleep_until(INT64_MAX);
}

static int park_long(void *arg)
{
    (void)arg;
    return px_sleep(PX_SEC(100));
}

static int sleep_short(void *arg)
{
    (void)arg;
    return px_sleep(PX_MSEC(1));
}

static uint64_t sleeper_id;

static void *stray_waker(void *arg)
{
    (void)arg;
    CHECK_EQ(px_wake(sleeper_id), 0);   /* a sleep is no park */
    return NULL;
}

static void *sleeper(void *arg)
{
    (void)arg;
    check_times_out(PX_MSEC(5), sleep_until_max, NULL);
    return NULL;
}

/* A pushed scope around a long park: 1 when it timed out, 0 when it did not. */
static int pushed(int rc, int64_t sleep_ns_)
{
    CHECK_EQ(rc, 0);
    int r = px_sleep(sleep_ns_);
    int fired = px_scope_pop();
    CHECK_EQ(fired, r);
    return r == PX_ETIMEDOUT;
}

static void *fiber_main(void *arg)
{
    (void)arg;
    int64_t t0 = px_now();
    CHECK_EQ(px_sleep(0), 0);
    CHECK_EQ(px_sleep(1), 0);
    CHECK_GE(px_now() - t0, 1);
    CHECK_EQ(px_sleep(INT64_MIN), PX_EINVAL);
    check_times_out(PX_MSEC(5), sleep_max, NULL);

    CHECK_EQ(px_sleep_until(0), 0);           /* past: a yield */
    CHECK_EQ(px_sleep_until(1), 0);
    CHECK_EQ(px_sleep_until(INT64_MIN), 0);
    px_fiber *s = px_spawn(sleeper, NULL);   /* px_sleep_until(INT64_MAX) */
    CHECK(s != NULL);
    sleeper_id = px_fiber_id(s);
    CHECK_EQ(px_yield(), 0);                 /* it sleeps now */
    px_fiber *w = px_spawn(stray_waker, NULL);
    CHECK(w != NULL);
    CHECK_EQ(px_join(w, NULL), 0);
    CHECK_EQ(px_join(s, NULL), 0);
    px_fiber_release(w);
    px_fiber_release(s);

    CHECK_EQ(px_with_timeout(0, park_long, NULL), PX_ETIMEDOUT);
    CHECK_EQ(px_with_timeout(1, park_long, NULL), PX_ETIMEDOUT);
    CHECK_EQ(px_with_timeout(INT64_MAX, sleep_short, NULL), 0);
    CHECK_EQ(px_with_timeout(INT64_MIN, sleep_short, NULL), PX_EINVAL);

    CHECK_EQ(pushed(px_scope_push_timeout(0), PX_SEC(100)), 1);
    CHECK_EQ(pushed(px_scope_push_timeout(1), PX_SEC(100)), 1);
    CHECK_EQ(pushed(px_scope_push_timeout(INT64_MAX), PX_MSEC(1)), 0);
    CHECK_EQ(px_scope_push_timeout(INT64_MIN), PX_EINVAL);
    CHECK_EQ(pushed(px_scope_push_deadline(0), PX_SEC(100)), 1);
    CHECK_EQ(pushed(px_scope_push_deadline(1), PX_SEC(100)), 1);
    CHECK_EQ(pushed(px_scope_push_deadline(INT64_MAX), PX_MSEC(1)), 0);
    CHECK_EQ(px_scope_push_deadline(INT64_MIN), PX_EINVAL);
    return NULL;
}

static void *short_nap(void *arg)
{
    (void)arg;
    int64_t t0 = px_now();
    CHECK_EQ(px_sleep(PX_MSEC(1)), 0);
    CHECK_GE(px_now() - t0, PX_MSEC(1));
    return NULL;
}

static void test_sched_slack(int64_t slack)
{
    px_sched_opts o = { .timer_slack_ns = slack };
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, short_nap, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    px_sched_free(s);
}

static const int64_t v[4] = { 0, 1, INT64_MAX, INT64_MIN };

static void setup(void)
{
    ev_init(&called);
}

/* A timer queue's three kinds of duration: add, periodic, the deadline timer. */
SPEC(timerq_delays_saturate)
{
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    test_add(q);
    px_timerq_free(q);
}

SPEC(timerq_periods_saturate)
{
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    test_periodic(q);
    px_timerq_free(q);
}

SPEC(deadline_timer_durations_saturate)
{
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    test_timer(q);
    px_timerq_free(q);
}

SPEC(timerq_options_saturate)
{
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            test_opts(v[i], v[j]);
}

SPEC(queue_wait_timeouts_saturate)
{
    test_queue_wait();
}

SPEC(fiber_waits_and_scopes_saturate)
{
    CHECK_EQ(px_run(fiber_main, NULL, NULL), 0);
}

SPEC(scheduler_slack_saturates)
{
    for (int i = 0; i < 4; i++)
        test_sched_slack(v[i]);
}

SPECS_AROUND(setup, NULL, timerq_delays_saturate, timerq_periods_saturate,
             deadline_timer_durations_saturate, timerq_options_saturate,
             queue_wait_timeouts_saturate, fiber_waits_and_scopes_saturate,
             scheduler_slack_saturates)
