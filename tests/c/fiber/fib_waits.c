/*
** fib_waits.c -- sleeps and parks: a sleep never returns early, a bad duration
** is refused, a fiber posted from another thread may park, 100,000 fibers
** each parked once are all woken and joined: one SPEC (one ctest
** fiber.<name>) each.
*/
#include "../spec.h"

/* TSan counts every fiber as a thread (at most 8128 live): fewer there. */
#ifdef PX_TEST_TSAN
#  define PARKED 4000
#else
#  define PARKED 100000
#endif

static void *never_early(void *arg)
{
    (void)arg;
    static const int64_t ns[] = { PX_MSEC(1), PX_MSEC(10), PX_MSEC(30), PX_MSEC(20) };
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        int64_t t0 = px_now();
        CHECK_EQ(px_sleep(ns[i]), 0);
        CHECK_GE(px_now() - t0, ns[i]);
        int64_t deadline = px_now() + ns[i];
        CHECK_EQ(px_sleep_until(deadline), 0);
        CHECK_GE(px_now(), deadline);
    }
    return NULL;
}

SPEC(sleep_never_returns_early)
{
    CHECK_EQ(px_run(never_early, NULL, NULL), 0);
}

static void *bad_durations(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sleep(-1), PX_EINVAL);
    CHECK_EQ(px_sleep(INT64_MIN), PX_EINVAL);
    CHECK_EQ(px_sleep(0), 0);                    /* a yield */
    CHECK_EQ(px_sleep_until(-1), 0);             /* a deadline passed: a yield */
    return NULL;
}

SPEC(sleep_rejects_bad_durations)
{
    CHECK_EQ(px_run(bad_durations, NULL, NULL), 0);
}

/* -- a fiber posted from another thread parks ------------------------------ */

static px_sched *S;
static px_mutex *M;
static px_event *E;
static int posted_ran;

static void *posted(void *arg)
{
    CHECK(px_self() != 0);
    CHECK_EQ(px_mutex_lock(M), 0);               /* parks: main holds it */
    CHECK_EQ(px_sleep(PX_MSEC(1)), 0);
    posted_ran = (int)(intptr_t)arg;
    CHECK_EQ(px_mutex_unlock(M), 0);
    CHECK_EQ(px_event_set(E), 1);
    return NULL;
}

static void *poster(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sched_post(S, posted, (void *)(intptr_t)7), 0);
    return NULL;
}

static int wait_e(void *arg) { (void)arg; return px_event_wait(E); }

static void *post_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(M), 0);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, poster, NULL), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(px_sleep(PX_MSEC(10)), 0);          /* the posted fiber queues */
    CHECK_EQ(px_mutex_waiters(M), 1);
    CHECK_EQ(px_mutex_unlock(M), 0);
    CHECK_EQ(px_with_timeout(PX_SEC(60), wait_e, NULL), 0);
    CHECK_EQ(posted_ran, 7);
    return NULL;
}

SPEC(posted_fiber_can_park)
{
    S = px_sched_new(NULL);
    CHECK(S != NULL);
    M = px_mutex_new();
    E = px_event_new();
    CHECK_EQ(px_sched_post(S, post_main, NULL), 0);
    CHECK_EQ(px_sched_run(S), 0);
    CHECK_EQ(posted_ran, 7);
    CHECK_EQ(px_mutex_free(M), 0);
    CHECK_EQ(px_event_free(E), 0);
    px_sched_free(S);
}

/* -- 100,000 fibers, each parked once ---------------------------------------- */

static void *park_once(void *arg)
{
    CHECK_EQ(px_event_wait(E), 0);
    return arg;
}

static void *parked_main(void *arg)
{
    size_t n = (size_t)(uintptr_t)arg;
    px_fiber **f = malloc(n * sizeof *f);
    CHECK(f != NULL);
    for (size_t i = 0; i < n; i++)
        CHECK((f[i] = px_spawn_sized(park_once, (void *)(uintptr_t)(i + 1), 16384)) != NULL);
    CHECK_EQ(px_yield(), 0);                     /* every one parks */
    CHECK_EQ(px_event_set(E), (int)n);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        void *r;
        CHECK_EQ(px_join(f[i], &r), 0);
        sum += (uintptr_t)r;
        px_fiber_release(f[i]);
    }
    free(f);
    CHECK_EQ(sum, (uint64_t)n * (n + 1) / 2);
    return NULL;
}

SPEC(hundred_thousand_fibers_park_once_and_are_all_joined)
{
    E = px_event_new();
    CHECK(E != NULL);
    CHECK_EQ(px_run(parked_main, (void *)(uintptr_t)PARKED, NULL), 0);
    CHECK_EQ(px_event_free(E), 0);
}

SPECS(sleep_never_returns_early, sleep_rejects_bad_durations, posted_fiber_can_park,
      hundred_thousand_fibers_park_once_and_are_all_joined)
