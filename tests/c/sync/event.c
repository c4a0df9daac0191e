/*
** event.c -- the conformance specification of px_event (a level).
**
** Fibers synchronize on observable state (the count of fibers that called
** wait, a fiber's end), never on sleeps; the only timeouts are under test.
*/
#include "spec.h"

#define YIELD_UNTIL(cond) do { \
    for (long y_ = 0; !(cond); y_++) { \
        CHECK(y_ < 1000000); \
        CHECK_EQ(px_yield(), 0); \
    } \
} while (0)

static px_event *E;
static px_token *T;

static void run(px_fiber_fn main)
{
    E = px_event_new();
    CHECK(E != NULL);
    CHECK_EQ(px_run(main, NULL, NULL), 0);
    CHECK_EQ(px_event_free(E), 0);               /* nobody left queued */
}

static void join(px_fiber *f)
{
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
}

/* A fiber runs until it parks: once `entered` counts it, it is parked. */
static int entered, woken, results[8];

static void *waiter(void *arg)
{
    entered++;
    results[(uintptr_t)arg] = px_event_wait(E);
    woken++;
    return NULL;
}

static int wait_body(void *arg) { (void)arg; return px_event_wait(E); }

static void *level_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_event_is_set(E), 0);
    CHECK_EQ(px_event_set(E), 0);                /* nobody to wake */
    CHECK_EQ(px_event_is_set(E), 1);
    CHECK_EQ(px_event_wait(E), 0);               /* a level: at once */
    CHECK_EQ(px_event_wait(E), 0);               /* and again */
    CHECK_EQ(px_event_set(E), 0);                /* setting twice is fine */
    return NULL;
}

SPEC(wait_after_set_returns_at_once_and_keeps_returning)
{
    run(level_main);
}

static void *clear_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_event_set(E), 0);
    CHECK_EQ(px_event_clear(E), 0);
    CHECK_EQ(px_event_is_set(E), 0);
    CHECK_EQ(px_with_timeout(PX_MSEC(5), wait_body, NULL), PX_ETIMEDOUT);
    px_fiber *w = px_spawn(waiter, (void *)0);
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(woken, 0);                          /* cleared: it parks */
    CHECK_EQ(px_event_set(E), 1);
    join(w);
    CHECK_EQ(results[0], 0);
    return NULL;
}

SPEC(clear_makes_wait_park_again_until_the_next_set)
{
    run(clear_main);
}

static void *all_main(void *arg)
{
    (void)arg;
    px_fiber *f[8];
    for (int i = 0; i < 8; i++)
        CHECK((f[i] = px_spawn(waiter, (void *)(uintptr_t)i)) != NULL);
    YIELD_UNTIL(entered == 8);
    CHECK_EQ(woken, 0);
    CHECK_EQ(px_event_set(E), 8);                /* says how many it woke */
    for (int i = 0; i < 8; i++)
        join(f[i]);
    CHECK_EQ(woken, 8);
    for (int i = 0; i < 8; i++)
        CHECK_EQ(results[i], 0);
    return NULL;
}

SPEC(set_wakes_every_waiter_and_returns_how_many)
{
    run(all_main);
}

static void *cleared_main(void *arg)
{
    (void)arg;
    px_fiber *w = px_spawn(waiter, (void *)0);
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(px_event_set(E), 1);
    CHECK_EQ(px_event_clear(E), 0);              /* before w has run */
    join(w);
    CHECK_EQ(results[0], 0);                     /* it was woken: 0 */
    return NULL;
}

SPEC(a_waiter_woken_by_set_returns_0_even_if_cleared_before_it_ran)
{
    run(cleared_main);
}

SPEC(set_and_clear_need_no_fiber_and_wait_off_fiber_is_enofiber)
{
    px_event *e = px_event_new();
    CHECK(e != NULL);
    CHECK_EQ(px_event_wait(e), PX_ENOFIBER);
    CHECK_EQ(px_event_set(e), 0);
    CHECK_EQ(px_event_is_set(e), 1);
    CHECK_EQ(px_event_wait(e), PX_ENOFIBER);     /* even while set */
    CHECK_EQ(px_event_clear(e), 0);
    CHECK_EQ(px_event_is_set(e), 0);
    CHECK_EQ(px_event_set(NULL), PX_EINVAL);
    CHECK_EQ(px_event_clear(NULL), PX_EINVAL);
    CHECK_EQ(px_event_wait(NULL), PX_EINVAL);
    CHECK_EQ(px_event_is_set(NULL), 0);
    CHECK_EQ(px_event_free(NULL), 0);
    CHECK_EQ(px_event_free(e), 0);
}

static int cancel_result;

static void *cancellable(void *arg)
{
    (void)arg;
    entered++;
    cancel_result = px_with_cancel(T, wait_body, NULL);
    return NULL;
}

static void *interrupt_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_with_timeout(PX_MSEC(5), wait_body, NULL), PX_ETIMEDOUT);
    CHECK_EQ(px_event_free(E), 0);               /* nobody queued: frees */
    E = px_event_new();
    px_fiber *c = px_spawn(cancellable, NULL);
    px_fiber *w = px_spawn(waiter, (void *)0);
    YIELD_UNTIL(entered == 2);
    CHECK_EQ(px_token_cancel(T), 1);             /* c interrupted, not run yet */
    CHECK_EQ(px_event_set(E), 1);                /* only w is woken */
    join(c);
    join(w);
    CHECK_EQ(cancel_result, PX_ECANCELED);
    CHECK_EQ(results[0], 0);
    return NULL;
}

SPEC(timed_out_or_cancelled_wait_leaves_nothing_queued)
{
    T = px_token_new();
    run(interrupt_main);
    px_token_free(T);
}

static void *busy_main(void *arg)
{
    (void)arg;
    px_fiber *w = px_spawn(waiter, (void *)0);
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(px_event_free(E), PX_EBUSY);
    CHECK_EQ(px_event_set(E), 1);
    join(w);
    return NULL;
}

SPEC(free_refuses_a_waited_on_event_with_ebusy)
{
    run(busy_main);
}

static char report[8192];

static void on_deadlock(void *ctx, const char *text)
{
    (void)ctx;
    snprintf(report, sizeof report, "%s", text);
}

SPEC(deadlock_report_names_the_wait_and_the_event)
{
    E = px_event_new();
    px_sched_opts o = { .on_deadlock = on_deadlock };
    px_sched *s = px_sched_new(&o);
    CHECK_EQ(px_sched_post(s, waiter, (void *)0), 0);
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);
    char want[64];
    snprintf(want, sizeof want, "event@%p", (void *)E);
    CHECK(strstr(report, "\"Event wait\"") != NULL);
    CHECK(strstr(report, want) != NULL);
    px_sched_free(s);
    CHECK_EQ(px_event_free(E), 0);
}

static int host_step, host_result;

static int host_resume(void *ctx)
{
    (void)ctx;
    switch (host_step++) {
    case 0:
        entered++;
        CHECK_EQ(px_event_wait(E), PX_EYIELD);
        return 0;
    default:
        host_result = px_event_wait(E);          /* the re-call: the outcome */
        return PX_HOST_DONE;
    }
}

static px_sched *HS;

static void *hosted_main(void *arg)
{
    (void)arg;
    px_host_ops ops = { host_resume, NULL, NULL };
    px_fiber *h = px_spawn_hosted(HS, &ops, NULL);
    CHECK(h != NULL);
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(px_event_set(E), 1);
    CHECK_EQ(px_event_clear(E), 0);              /* the re-call must not wait again */
    join(h);
    CHECK_EQ(host_step, 2);
    CHECK_EQ(host_result, 0);
    return NULL;
}

SPEC(hosted_fiber_waits_through_eyield_and_a_recall)
{
    E = px_event_new();
    HS = px_sched_new(NULL);
    CHECK_EQ(px_sched_post(HS, hosted_main, NULL), 0);
    CHECK_EQ(px_sched_run(HS), 0);
    px_sched_free(HS);
    CHECK_EQ(px_event_free(E), 0);
}

SPECS(wait_after_set_returns_at_once_and_keeps_returning,
      clear_makes_wait_park_again_until_the_next_set,
      set_wakes_every_waiter_and_returns_how_many,
      a_waiter_woken_by_set_returns_0_even_if_cleared_before_it_ran,
      set_and_clear_need_no_fiber_and_wait_off_fiber_is_enofiber,
      timed_out_or_cancelled_wait_leaves_nothing_queued,
      free_refuses_a_waited_on_event_with_ebusy,
      deadlock_report_names_the_wait_and_the_event,
      hosted_fiber_waits_through_eyield_and_a_recall)
