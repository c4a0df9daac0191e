/*
** clock.c -- the virtual clock (px_sched_opts.clock = PX_CLOCK_VIRTUAL): time
** stands still while fibers run, jumps to the next deadline when every fiber
** waits on time alone, and moves with real time while something from outside
** (an fd, a pool job) may still come.
*/
#include <unistd.h>

#include "../spec.h"

#define HOUR PX_SEC(3600)

static const px_sched_opts virtual_clock = { .clock = PX_CLOCK_VIRTUAL };

static int64_t real_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void run_virtual(px_fiber_fn main, void *arg)
{
    CHECK_EQ(px_run_with(&virtual_clock, main, arg, NULL), 0);
}

/* -- jumps -------------------------------------------------------------------- */

enum { SLEEPERS = 100, SLEEPS = 100 };   /* 10,000 sleeps of an hour */

static void *sleeps_hours(void *arg)
{
    (void)arg;
    for (int i = 0; i < SLEEPS; i++)
        CHECK_EQ(px_sleep(HOUR), 0);
    return NULL;
}

static void *hours_main(void *arg)
{
    (void)arg;
    int64_t t0 = px_now();
    px_fiber *f[SLEEPERS];
    for (int i = 0; i < SLEEPERS; i++)
        CHECK((f[i] = px_spawn(sleeps_hours, NULL)) != NULL);
    for (int i = 0; i < SLEEPERS; i++) {
        CHECK_EQ(px_join(f[i], NULL), 0);
        px_fiber_release(f[i]);
    }
    int64_t took = px_now() - t0;
    CHECK(took >= SLEEPS * HOUR && took < SLEEPS * HOUR + PX_SEC(1));
    return NULL;
}

SPEC(ten_thousand_hour_long_sleeps_take_no_real_time)
{
    int64_t t0 = real_now();
    run_virtual(hours_main, NULL);
    int64_t took = real_now() - t0;
    printf("10,000 sleeps of an hour: %.3f s real\n", (double)took / 1e9);
    CHECK(took < PX_SEC(1));
}

static void *still_main(void *arg)
{
    (void)arg;
    int64_t t0 = px_now();
    int64_t spin_until = real_now() + PX_MSEC(20);
    while (real_now() < spin_until)
        CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_now(), t0);                 /* fibers ran: time stood still */
    CHECK_EQ(px_sleep(PX_MSEC(5)), 0);
    CHECK_EQ(px_now(), t0 + PX_MSEC(5));    /* then it jumped, exactly */
    CHECK_EQ(px_sleep_until(t0 + HOUR), 0);
    CHECK_EQ(px_now(), t0 + HOUR);
    return NULL;
}

SPEC(now_stands_still_while_fibers_run)
{
    run_virtual(still_main, NULL);
}

/* -- a race ------------------------------------------------------------------- */

static px_chan *C;
static int64_t send_at;

static void *sends_later(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sleep_until(send_at), 0);
    CHECK_EQ(px_chan_trysend(C, &send_at), 0);   /* buffered: never waits */
    return NULL;
}

static int recv_body(void *arg)
{
    return px_chan_recv(C, arg);
}

/* offset: when the send comes, against the receiver's timeout. */
static void *race_main(void *arg)
{
    int64_t offset = (int64_t)(intptr_t)arg;
    int64_t t0 = px_now();
    send_at = t0 + HOUR + offset;
    px_fiber *s = px_spawn(sends_later, NULL);
    CHECK(s != NULL);
    void *v = NULL;
    int r = px_with_timeout(HOUR, recv_body, &v);
    CHECK_EQ(px_join(s, NULL), 0);
    px_fiber_release(s);
    void *left = NULL;
    int in_chan = px_chan_tryrecv(C, &left) == 0;
    /* Decided once: received, or timed out with the value still there. */
    if (r == 0)
        CHECK(v == &send_at && !in_chan);
    else
        CHECK(r == PX_ETIMEDOUT && v == NULL && in_chan && left == &send_at);
    if (offset < 0)
        CHECK_EQ(r, 0);
    if (offset > 0)
        CHECK_EQ(r, PX_ETIMEDOUT);
    return (void *)(intptr_t)r;
}

SPEC(a_timeout_racing_a_grant_is_decided_once)
{
    CHECK((C = px_chan_new(1)) != NULL);
    for (int round = 0; round < 50; round++)
        for (int64_t offset = -1; offset <= 1; offset++) {
            void *r;
            CHECK_EQ(px_run_with(&virtual_clock, race_main, (void *)(intptr_t)offset, &r), 0);
        }
    CHECK_EQ(px_chan_free(C), 0);
}

/* -- from outside ------------------------------------------------------------- */

static int fds[2];
static int64_t outside_waited, slept;
static px_latch waiting;

static void *writes_later(void *arg)
{
    (void)arg;
    EV_WAIT(&waiting, 1);
    struct timespec ts = { 0, 50000000 };   /* the outside event, 50 ms after the wait began */
    nanosleep(&ts, NULL);
    CHECK_EQ(write(fds[1], "x", 1), 1);
    return NULL;
}

static void *waits_on_fd(void *arg)
{
    (void)arg;
    int64_t t0 = px_now();
    ev_set(&waiting);
    CHECK_EQ(px_wait_fd(fds[0], PX_READABLE), 0);
    outside_waited = px_now() - t0;
    return NULL;
}

static void *sleeps_an_hour(void *arg)
{
    (void)arg;
    int64_t t0 = px_now();
    CHECK_EQ(px_sleep(HOUR), 0);
    slept = px_now() - t0;
    return NULL;
}

/* Runs *(px_fiber_fn *)arg, the fiber that waits for the outside, beside a
** fiber that sleeps an hour. */
static void *beside_a_sleeper(void *arg)
{
    px_fiber_fn waiter = *(px_fiber_fn *)arg;
    px_fiber *a = px_spawn(waiter, NULL), *b = px_spawn(sleeps_an_hour, NULL);
    CHECK(a && b);
    CHECK_EQ(px_join(a, NULL), 0);
    CHECK_EQ(px_join(b, NULL), 0);
    px_fiber_release(a);
    px_fiber_release(b);
    return NULL;
}

SPEC(waits_in_real_time_while_an_fd_wait_is_pending)
{
    CHECK_EQ(pipe(fds), 0);
    ev_init(&waiting);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, writes_later, NULL), 0);
    int64_t t0 = real_now();
    run_virtual(beside_a_sleeper, &(px_fiber_fn){ waits_on_fd });
    int64_t took = real_now() - t0;
    pthread_join(t, NULL);
    /* The fd took real time, and the clock went with it: no jump of an hour
    ** while the fd could still come.  Then the sleeper's hour, at once.  (The
    ** clock moves only while the run waits in the kernel, which starts a
    ** little after the writer's 50 ms began: a sanitizer's run is slow.) */
    CHECK(outside_waited >= PX_MSEC(20) && outside_waited < PX_SEC(60));
    CHECK_EQ(slept, HOUR);
    CHECK(took < PX_SEC(60));
    ev_destroy(&waiting);
    close(fds[0]);
    close(fds[1]);
}

static void *job(void *arg)
{
    (void)arg;
    struct timespec ts = { 0, 50000000 };
    nanosleep(&ts, NULL);
    return arg;
}

static void *runs_a_job(void *arg)
{
    (void)arg;
    int64_t t0 = px_now();
    void *r;
    CHECK_EQ(px_run_blocking(job, &fds, NULL, 0, &r), 0);
    CHECK(r == &fds);
    outside_waited = px_now() - t0;
    return NULL;
}

SPEC(waits_in_real_time_while_a_pool_job_runs)
{
    slept = outside_waited = 0;
    run_virtual(beside_a_sleeper, &(px_fiber_fn){ runs_a_job });
    CHECK(outside_waited >= PX_MSEC(20) && outside_waited < PX_SEC(60));   /* as for the fd */
    CHECK_EQ(slept, HOUR);
}

/* Past the last deadline there is, a wait for the outside moves no further:
** the clock never goes back. */
static void *sleeps_for_ever_then_waits_outside(void *arg)
{
    (void)arg;
    int64_t t0 = px_now();
    CHECK_EQ(px_sleep(INT64_MAX), 0);   /* nothing else can wake it: a jump to the end */
    int64_t t1 = px_now();
    CHECK(t1 > t0);
    void *r;
    CHECK_EQ(px_run_blocking(job, NULL, NULL, 0, &r), 0);
    CHECK(px_now() >= t1);
    return NULL;
}

SPEC(time_never_goes_back_after_the_last_deadline)
{
    run_virtual(sleeps_for_ever_then_waits_outside, NULL);
}

/* -- what stays --------------------------------------------------------------- */

static char said[4096];

static void keep_report(void *ctx, const char *text)
{
    (void)ctx;
    snprintf(said, sizeof said, "%s", text);
}

static px_event *Never;

static void *stuck_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sleep(HOUR), 0);   /* a jump first */
    px_event_wait(Never);
    return NULL;
}

SPEC(a_deadlock_is_still_reported)
{
    CHECK((Never = px_event_new()) != NULL);
    px_sched_opts o = { .clock = PX_CLOCK_VIRTUAL, .on_deadlock = keep_report };
    CHECK_EQ(px_run_with(&o, stuck_main, NULL, NULL), PX_EDEADLK);
    CHECK(strstr(said, "  fiber 1: parked on \"Event wait\"") != NULL);
    CHECK_EQ(px_event_free(Never), 0);
}

static int64_t thread_saw;

static void *reads_the_clock(void *arg)
{
    (void)arg;
    thread_saw = px_now();
    return NULL;
}

static void *threads_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sleep(HOUR), 0);
    int64_t mine = px_now();
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, reads_the_clock, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK(thread_saw < mine - HOUR / 2);   /* the thread: real time, an hour behind */
    int64_t real = real_now();
    CHECK(thread_saw <= real && thread_saw > real - PX_SEC(60));
    return NULL;
}

SPEC(other_threads_keep_real_time)
{
    run_virtual(threads_main, NULL);
    CHECK(llabs(px_now() - real_now()) < PX_SEC(60));   /* after the run: real again */
}

static void *never_runs(void *arg)
{
    return arg;
}

SPEC(an_unknown_clock_is_refused)
{
    px_sched_opts o = { .clock = 7 };
    CHECK_EQ(px_run_with(&o, never_runs, NULL, NULL), PX_EINVAL);
    o.clock = -1;
    CHECK_EQ(px_run_with(&o, never_runs, NULL, NULL), PX_EINVAL);
    CHECK(px_sched_new(&o) == NULL);
    o.clock = PX_CLOCK_REAL;
    CHECK_EQ(px_run_with(&o, never_runs, NULL, NULL), 0);
    CHECK_EQ(px_run_with(NULL, never_runs, NULL, NULL), 0);
}

SPECS(ten_thousand_hour_long_sleeps_take_no_real_time, now_stands_still_while_fibers_run,
      a_timeout_racing_a_grant_is_decided_once, waits_in_real_time_while_an_fd_wait_is_pending,
      waits_in_real_time_while_a_pool_job_runs, a_deadlock_is_still_reported,
      other_threads_keep_real_time, an_unknown_clock_is_refused,
      time_never_goes_back_after_the_last_deadline)
