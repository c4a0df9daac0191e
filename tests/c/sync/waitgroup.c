/*
** waitgroup.c -- the conformance specification of px_waitgroup.
**
** Fibers synchronize on observable state (the number of waiters, a fiber's
** end), never on sleeps; the only timeouts are the ones under test.
*/
#include "spec.h"

#define YIELD_UNTIL(cond) do { \
    for (long y_ = 0; !(cond); y_++) { \
        CHECK(y_ < 1000000); \
        CHECK_EQ(px_yield(), 0); \
    } \
} while (0)

static px_waitgroup *WG;
static px_token *T;

static void run(px_fiber_fn main)
{
    WG = px_waitgroup_new();
    CHECK(WG != NULL);
    CHECK_EQ(px_run(main, NULL, NULL), 0);
    CHECK_EQ(px_waitgroup_free(WG), 0);
}

static void join(px_fiber *f)
{
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
}

/* Each waiter records what its wait returned in results[arg].  `entered`
** counts the fibers that called wait: a fiber runs until it parks, so once
** the caller sees the count, those fibers are parked (or returned). */
static int results[8];
static int entered, woken;

static void *waiter(void *arg)
{
    entered++;
    results[(uintptr_t)arg] = px_waitgroup_wait(WG);
    woken++;
    return NULL;
}

static void *zero_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_waitgroup_count(WG), 0);
    CHECK_EQ(px_waitgroup_wait(WG), 0);          /* nothing to wait for */
    CHECK_EQ(px_waitgroup_add(WG, 1), 0);
    CHECK_EQ(px_waitgroup_done(WG), 0);
    CHECK_EQ(px_waitgroup_wait(WG), 0);          /* back at zero */
    return NULL;
}

SPEC(wait_at_zero_returns_at_once)
{
    run(zero_main);
}

static void *worker(void *arg)
{
    (void)arg;
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_waitgroup_done(WG), 0);
    return NULL;
}

static void *fan_out_main(void *arg)
{
    (void)arg;
    px_fiber *f[4];
    CHECK_EQ(px_waitgroup_add(WG, 4), 0);        /* counted before the spawns */
    for (int i = 0; i < 4; i++)
        CHECK((f[i] = px_spawn(worker, NULL)) != NULL);
    CHECK_EQ(px_waitgroup_wait(WG), 0);
    CHECK_EQ(px_waitgroup_count(WG), 0);
    for (int i = 0; i < 4; i++)
        join(f[i]);
    return NULL;
}

SPEC(wait_parks_until_the_last_job_is_done)
{
    run(fan_out_main);
}

static void *top_up_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_waitgroup_add(WG, 1), 0);
    px_fiber *w = px_spawn(waiter, (void *)0);
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(px_waitgroup_add(WG, 2), 0);        /* topped up while waited on */
    CHECK_EQ(px_waitgroup_done(WG), 0);
    CHECK_EQ(px_waitgroup_done(WG), 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(px_yield(), 0);
    CHECK_EQ(woken, 0);                          /* 1 left: still parked */
    CHECK_EQ(px_waitgroup_done(WG), 0);
    join(w);
    CHECK_EQ(woken, 1);
    CHECK_EQ(results[0], 0);
    return NULL;
}

SPEC(top_up_while_waiting_keeps_the_waiter_parked_until_zero)
{
    run(top_up_main);
}

SPEC(going_below_zero_is_einval_and_leaves_the_count_unchanged)
{
    px_waitgroup *wg = px_waitgroup_new();
    CHECK(wg != NULL);
    CHECK_EQ(px_waitgroup_done(wg), PX_EINVAL);
    CHECK_EQ(px_waitgroup_count(wg), 0);
    CHECK_EQ(px_waitgroup_add(wg, 2), 0);
    CHECK_EQ(px_waitgroup_add(wg, -3), PX_EINVAL);
    CHECK_EQ(px_waitgroup_count(wg), 2);
    CHECK_EQ(px_waitgroup_add(wg, INT64_MIN), PX_EINVAL);
    CHECK_EQ(px_waitgroup_add(wg, INT64_MAX), PX_EINVAL);   /* would overflow */
    CHECK_EQ(px_waitgroup_count(wg), 2);
    CHECK_EQ(px_waitgroup_add(wg, -2), 0);
    CHECK_EQ(px_waitgroup_count(wg), 0);
    CHECK_EQ(px_waitgroup_free(wg), 0);
}

SPEC(add_and_done_need_no_fiber)
{
    px_waitgroup *wg = px_waitgroup_new();
    CHECK(wg != NULL);
    CHECK_EQ(px_waitgroup_add(wg, 2), 0);        /* off-fiber: plain arithmetic */
    CHECK_EQ(px_waitgroup_count(wg), 2);
    CHECK_EQ(px_waitgroup_done(wg), 0);
    CHECK_EQ(px_waitgroup_count(wg), 1);
    CHECK_EQ(px_waitgroup_add(wg, 0), 0);
    CHECK_EQ(px_waitgroup_done(wg), 0);
    CHECK_EQ(px_waitgroup_count(wg), 0);
    CHECK_EQ(px_waitgroup_free(wg), 0);
}

SPEC(wait_off_fiber_is_enofiber_and_null_is_einval)
{
    px_waitgroup *wg = px_waitgroup_new();
    CHECK(wg != NULL);
    CHECK_EQ(px_waitgroup_wait(wg), PX_ENOFIBER);
    CHECK_EQ(px_waitgroup_add(wg, 1), 0);
    CHECK_EQ(px_waitgroup_wait(wg), PX_ENOFIBER);   /* not zero: still no park */
    CHECK_EQ(px_waitgroup_wait(NULL), PX_EINVAL);
    CHECK_EQ(px_waitgroup_add(NULL, 1), PX_EINVAL);
    CHECK_EQ(px_waitgroup_done(NULL), PX_EINVAL);
    CHECK_EQ(px_waitgroup_count(NULL), 0);
    CHECK_EQ(px_waitgroup_free(NULL), 0);
    CHECK_EQ(px_waitgroup_done(wg), 0);
    CHECK_EQ(px_waitgroup_free(wg), 0);
}

static int wait_body(void *arg) { (void)arg; return px_waitgroup_wait(WG); }

static void *timeout_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_waitgroup_add(WG, 1), 0);
    px_fiber *w = px_spawn(waiter, (void *)0);   /* a patient waiter behind */
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(px_with_timeout(PX_MSEC(5), wait_body, NULL), PX_ETIMEDOUT);
    CHECK_EQ(px_waitgroup_done(WG), 0);
    join(w);
    CHECK_EQ(results[0], 0);
    CHECK_EQ(woken, 1);
    CHECK_EQ(px_waitgroup_free(WG), 0);          /* nobody queued */
    WG = px_waitgroup_new();                     /* for run() to free */
    return NULL;
}

SPEC(timed_out_wait_leaves_nothing_queued)
{
    run(timeout_main);
}

static int cancel_result;

static void *cancellable(void *arg)
{
    (void)arg;
    entered++;
    cancel_result = px_with_cancel(T, wait_body, NULL);
    return NULL;
}

static void *cancel_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_waitgroup_add(WG, 1), 0);
    px_fiber *c = px_spawn(cancellable, NULL);
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(px_waitgroup_free(WG), PX_EBUSY);   /* c is queued */
    CHECK_EQ(px_token_cancel(T), 1);
    join(c);
    CHECK_EQ(cancel_result, PX_ECANCELED);
    CHECK_EQ(px_waitgroup_count(WG), 1);         /* the count is not touched */
    CHECK_EQ(px_waitgroup_done(WG), 0);
    return NULL;                                 /* run() frees: nobody queued */
}

SPEC(cancelled_wait_leaves_nothing_queued)
{
    T = px_token_new();
    run(cancel_main);
    px_token_free(T);
}

static void *fired_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_waitgroup_add(WG, 1), 0);
    CHECK_EQ(px_token_cancel(T), 1);             /* fired before the wait */
    CHECK_EQ(px_with_cancel(T, wait_body, NULL), PX_ECANCELED);
    CHECK_EQ(px_waitgroup_done(WG), 0);
    return NULL;
}

SPEC(wait_in_a_fired_scope_fails_at_once_without_queueing)
{
    T = px_token_new();
    run(fired_main);
    px_token_free(T);
}

static void *many_main(void *arg)
{
    (void)arg;
    px_fiber *f[8];
    CHECK_EQ(px_waitgroup_add(WG, 1), 0);
    for (int i = 0; i < 8; i++)
        CHECK((f[i] = px_spawn(waiter, (void *)(uintptr_t)i)) != NULL);
    YIELD_UNTIL(entered == 8);
    CHECK_EQ(woken, 0);
    CHECK_EQ(px_waitgroup_done(WG), 0);          /* one step to zero wakes all */
    for (int i = 0; i < 8; i++)
        join(f[i]);
    CHECK_EQ(woken, 8);
    for (int i = 0; i < 8; i++)
        CHECK_EQ(results[i], 0);
    return NULL;
}

SPEC(reaching_zero_wakes_every_waiter)
{
    run(many_main);
}

static void *rise_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_waitgroup_add(WG, 1), 0);
    px_fiber *w = px_spawn(waiter, (void *)0);
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(px_waitgroup_done(WG), 0);          /* zero: w is released ... */
    CHECK_EQ(px_waitgroup_add(WG, 1), 0);        /* ... and stays released */
    join(w);
    CHECK_EQ(results[0], 0);
    CHECK_EQ(px_waitgroup_done(WG), 0);
    return NULL;
}

SPEC(a_waiter_released_at_zero_returns_even_if_the_count_rises_again)
{
    run(rise_main);
}

static void *busy_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_waitgroup_add(WG, 1), 0);
    px_fiber *w = px_spawn(waiter, (void *)0);
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(px_waitgroup_free(WG), PX_EBUSY);   /* nothing freed */
    CHECK_EQ(px_waitgroup_done(WG), 0);
    join(w);
    return NULL;
}

SPEC(free_refuses_a_waited_on_waitgroup_with_ebusy)
{
    run(busy_main);
}

static char report[8192];

static void on_deadlock(void *ctx, const char *text)
{
    (void)ctx;
    snprintf(report, sizeof report, "%s", text);
}

static void *stuck(void *arg)
{
    (void)arg;
    px_waitgroup_wait(WG);                       /* nobody will call done */
    return NULL;
}

SPEC(deadlock_report_names_the_wait_and_the_waitgroup)
{
    WG = px_waitgroup_new();
    CHECK_EQ(px_waitgroup_add(WG, 1), 0);
    px_sched_opts o = { .on_deadlock = on_deadlock };
    px_sched *s = px_sched_new(&o);
    CHECK_EQ(px_sched_post(s, stuck, NULL), 0);
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);
    char want[64];
    snprintf(want, sizeof want, "waitgroup@%p", (void *)WG);
    CHECK(strstr(report, "\"WaitGroup wait\"") != NULL);
    CHECK(strstr(report, want) != NULL);
    px_sched_free(s);                            /* discards the waiter */
    CHECK_EQ(px_waitgroup_free(WG), 0);
}

/* A host that cannot switch inside C (as Lua): waits through PX_EYIELD. */
static int host_step, host_result;

static int host_resume(void *ctx)
{
    (void)ctx;
    switch (host_step++) {
    case 0:
        entered++;
        CHECK_EQ(px_waitgroup_wait(WG), PX_EYIELD);
        return 0;
    default:
        host_result = px_waitgroup_wait(WG);     /* the re-call: the outcome */
        return PX_HOST_DONE;
    }
}

static px_sched *HS;

static void *hosted_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_waitgroup_add(WG, 1), 0);
    px_host_ops ops = { host_resume, NULL, NULL };
    px_fiber *h = px_spawn_hosted(HS, &ops, NULL);
    CHECK(h != NULL);
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(px_waitgroup_done(WG), 0);
    join(h);
    CHECK_EQ(host_step, 2);
    CHECK_EQ(host_result, 0);
    return NULL;
}

SPEC(hosted_fiber_waits_through_eyield_and_a_recall)
{
    WG = px_waitgroup_new();
    HS = px_sched_new(NULL);
    CHECK_EQ(px_sched_post(HS, hosted_main, NULL), 0);
    CHECK_EQ(px_sched_run(HS), 0);
    px_sched_free(HS);
    CHECK_EQ(px_waitgroup_free(WG), 0);
}

SPECS(wait_at_zero_returns_at_once,
      wait_parks_until_the_last_job_is_done,
      top_up_while_waiting_keeps_the_waiter_parked_until_zero,
      going_below_zero_is_einval_and_leaves_the_count_unchanged,
      add_and_done_need_no_fiber,
      wait_off_fiber_is_enofiber_and_null_is_einval,
      timed_out_wait_leaves_nothing_queued,
      cancelled_wait_leaves_nothing_queued,
      wait_in_a_fired_scope_fails_at_once_without_queueing,
      reaching_zero_wakes_every_waiter,
      a_waiter_released_at_zero_returns_even_if_the_count_rises_again,
      free_refuses_a_waited_on_waitgroup_with_ebusy,
      deadlock_report_names_the_wait_and_the_waitgroup,
      hosted_fiber_waits_through_eyield_and_a_recall)
