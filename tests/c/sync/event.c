/*
** event.c -- the conformance specification of px_event (a level).
**
** Fibers synchronize on observable state (the count of fibers that called
** wait, a fiber's end), never on sleeps; the only timeouts are under test.
*/
#include "sync_kit.h"

static px_event *E;

static void run(px_fiber_fn main)
{
    E = px_event_new();
    CHECK(E != NULL);
    CHECK_EQ(px_run(main, NULL, NULL), 0);
    CHECK_EQ(px_event_free(E), 0);               /* nobody left queued */
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

SPECS(wait_after_set_returns_at_once_and_keeps_returning,
      clear_makes_wait_park_again_until_the_next_set,
      a_waiter_woken_by_set_returns_0_even_if_cleared_before_it_ran)
