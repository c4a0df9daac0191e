/*
** fib_wake.c -- px_sched_wake: a signal handler's way to make its run look.
** A binding's SIGINT handler records the signal; the run's on_wait hook looks
** at the record before each kernel wait.  A signal that lands between that
** look and the wait itself would be seen only at the run's next deadline or
** post; with px_sched_wake in the handler the wait returns at once, the hook
** looks again, and the run is interrupted promptly.
*/
#include <signal.h>

#include "../spec.h"

static px_sched *S;
static volatile sig_atomic_t came;
static int raised, posted, slept;

static void on_usr1(int sig)
{
    (void)sig;
    came = 1;
    px_sched_wake(S);     /* async-signal-safe */
}

static void *canceller(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sched_cancel(S), 0);
    return NULL;
}

/* Before its first wait the hook raises the signal itself: the handler runs
** after the look, before the kernel wait -- the gap, every time.  The next
** look (after the wake) sees the record and posts the interruption. */
static void on_wait(void *ctx, int entering)
{
    (void)ctx;
    if (!entering)
        return;
    if (came && !posted) {
        posted = 1;
        CHECK_EQ(px_sched_post(S, canceller, NULL), 0);
    } else if (!raised) {
        raised = 1;
        raise(SIGUSR1);
    }
}

static void *sleeper(void *arg)
{
    (void)arg;
    slept = px_sleep(PX_SEC(60));
    return NULL;
}

SPEC(a_signal_between_the_look_and_the_wait_ends_the_wait)
{
    struct sigaction sa = { .sa_handler = on_usr1 };
    sigemptyset(&sa.sa_mask);
    CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
    px_sched_opts o = { .on_wait = on_wait };
    S = px_sched_new(&o);
    CHECK(S != NULL);
    CHECK_EQ(px_sched_post(S, sleeper, NULL), 0);
    int64_t t0 = px_now();
    CHECK_EQ(px_sched_run(S), 0);
    CHECK(raised && came && posted);
    CHECK_EQ(slept, PX_ECANCELED);
    CHECK(px_now() - t0 < PX_SEC(30));   /* not the sleep's 60 s */
    px_sched_free(S);
    signal(SIGUSR1, SIG_DFL);
}

static px_latch asleep;

static void *waker(void *arg)
{
    (void)arg;
    EV_WAIT(&asleep, 1);
    for (int i = 0; i < 1000; i++)
        CHECK_EQ(px_sched_wake(S), 0);
    return NULL;
}

static void *timed_sleeper(void *arg)
{
    int64_t *woke_after = arg;
    int64_t t0 = px_now();
    ev_set(&asleep);
    CHECK_EQ(px_sleep(PX_MSEC(100)), 0);
    *woke_after = px_now() - t0;
    return NULL;
}

/* A wake is no post and no deadline: a sleep under a storm of wakes from
** another thread ends when it is due, not before. */
SPEC(wakes_end_no_sleep_early)
{
    S = px_sched_new(NULL);
    CHECK(S != NULL);
    ev_init(&asleep);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, waker, NULL), 0);
    int64_t woke_after = 0;
    CHECK_EQ(px_sched_post(S, timed_sleeper, &woke_after), 0);
    CHECK_EQ(px_sched_run(S), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_GE(woke_after, PX_MSEC(100));
    px_sched_free(S);
    ev_destroy(&asleep);
}

static int yields;

static void *busy(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sched_wake(S), 0);      /* no wait under way: the next one's */
    for (; yields < 3; yields++)
        CHECK_EQ(px_yield(), 0);
    return NULL;
}

/* Before a run, and while it is busy: the wake waits for the next kernel
** wait, which returns at once; nothing else changes. */
SPEC(a_wake_with_no_wait_under_way_is_harmless)
{
    CHECK_EQ(px_sched_wake(NULL), PX_EINVAL);
    S = px_sched_new(NULL);
    CHECK(S != NULL);
    CHECK_EQ(px_sched_wake(S), 0);
    CHECK_EQ(px_sched_post(S, busy, NULL), 0);
    CHECK_EQ(px_sched_run(S), 0);
    CHECK_EQ(yields, 3);
    px_sched_free(S);
}

/* The hook may px_wake (the header allows it there): on the scheduler's own
** thread the wake readies the fiber at once, with no post behind it, so the
** kernel wait that follows must not sleep -- it takes no time. */
static uint64_t parked_id;
static int hook_woke;

static void wake_hook(void *ctx, int entering)
{
    (void)ctx;
    if (entering && parked_id != 0 && !hook_woke) {
        hook_woke = 1;
        CHECK_EQ(px_wake(parked_id), 1);
    }
}

static void *parks_outside(void *arg)
{
    (void)arg;
    static const px_park_info info = { .reason = "hook", .flags = PX_PARK_OUTSIDE };
    CHECK_EQ(px_scope_push_timeout(PX_SEC(10)), 0);
    parked_id = px_self();
    int64_t t0 = px_now();
    int r = px_park_with(&info);
    int64_t took = px_now() - t0;
    px_scope_pop();
    CHECK_EQ(r, 0);
    CHECK(took < PX_SEC(5));
    return NULL;
}

SPEC(a_px_wake_from_the_on_wait_hook_ends_the_wait_at_once)
{
    px_sched_opts o = { .on_wait = wake_hook };
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, parks_outside, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(hook_woke, 1);
    px_sched_free(s);
}

SPECS(a_signal_between_the_look_and_the_wait_ends_the_wait, wakes_end_no_sleep_early,
      a_wake_with_no_wait_under_way_is_harmless,
      a_px_wake_from_the_on_wait_hook_ends_the_wait_at_once)
