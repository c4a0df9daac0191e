/*
** waitgroup.c -- the conformance specification of px_waitgroup.
**
** Fibers synchronize on observable state (the number of waiters, a fiber's
** end), never on sleeps; the only timeouts are the ones under test.
*/
#include "sync_kit.h"

static px_waitgroup *WG;
static px_token *T;        /* each run's own (run_with_token) */

static void run(px_fiber_fn main)
{
    WG = px_waitgroup_new();
    CHECK(WG != NULL);
    run_with_token(main, &T);
    CHECK_EQ(px_waitgroup_free(WG), 0);
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
    spawn_all(f, 4, worker, NULL);
    CHECK_EQ(px_waitgroup_wait(WG), 0);
    CHECK_EQ(px_waitgroup_count(WG), 0);
    join_all(f, 4);
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

static int wait_body(void *arg) { (void)arg; return px_waitgroup_wait(WG); }

static cancel_call cancelled;      /* the wait a spec's scope interrupts */

static void *cancel_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_waitgroup_add(WG, 1), 0);
    cancelled = (cancel_call){ .token = T, .body = wait_body, .started = &entered };
    px_fiber *c = px_spawn(cancellable, &cancelled);
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(px_waitgroup_free(WG), PX_EBUSY);   /* c is queued */
    CHECK_EQ(px_token_cancel(T), 1);
    join(c);
    CHECK_EQ(cancelled.result, PX_ECANCELED);
    CHECK_EQ(px_waitgroup_count(WG), 1);         /* the count is not touched */
    CHECK_EQ(px_waitgroup_done(WG), 0);
    return NULL;                                 /* run() frees: nobody queued */
}

SPEC(cancelled_wait_leaves_nothing_queued)
{
    run(cancel_main);
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
    run(fired_main);
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

SPECS(wait_at_zero_returns_at_once,
      wait_parks_until_the_last_job_is_done,
      top_up_while_waiting_keeps_the_waiter_parked_until_zero,
      going_below_zero_is_einval_and_leaves_the_count_unchanged,
      cancelled_wait_leaves_nothing_queued,
      wait_in_a_fired_scope_fails_at_once_without_queueing,
      a_waiter_released_at_zero_returns_even_if_the_count_rises_again)
