/*
** map.c -- the conformance specification of px_map.
*/
#include "sync_kit.h"

#define V(n) ((void *)(uintptr_t)(n))
#define N(p) ((uintptr_t)(p))
#define HOUR 3600000000000LL

static void run(px_fiber_fn main)
{
    CHECK_EQ(px_run(main, NULL, NULL), 0);
}

static int in_flight, most_in_flight, calls;

/* Squares its item after a number of yields that makes later items end
** first: the order of ends is not the input order. */
static int square(void *item, void **result)
{
    uintptr_t x = N(item);
    calls++;
    if (++in_flight > most_in_flight)
        most_in_flight = in_flight;
    for (uintptr_t i = 0; i <= (1000 - x) % 7; i++)
        CHECK_EQ(px_yield(), 0);
    in_flight--;
    *result = V(x * x);
    return 0;
}

static void *order_main(void *arg)
{
    (void)arg;
    enum { N_ITEMS = 1000 };
    static void *items[N_ITEMS], *results[N_ITEMS];
    for (int i = 0; i < N_ITEMS; i++)
        items[i] = V(i);
    const size_t conc[] = { 1, 4, 1000 };
    for (int c = 0; c < 3; c++) {
        memset(results, 0, sizeof results);
        in_flight = most_in_flight = calls = 0;
        CHECK_EQ(px_map(square, items, results, N_ITEMS, conc[c]), 0);
        for (int i = 0; i < N_ITEMS; i++)
            CHECK_EQ(N(results[i]), (uintptr_t)i * i);
        CHECK_EQ(calls, N_ITEMS);
        CHECK_EQ((size_t)most_in_flight, conc[c]);
    }
    return NULL;
}

SPEC(results_keep_input_order_at_concurrency_1_4_and_1000)
{
    run(order_main);
}

static int entered_map;

/* Item 5 fails once three others wait; the rest sleep until cancelled. */
static int fail_at_5(void *item, void **result)
{
    calls++;
    if (N(item) == 5) {
        YIELD_UNTIL(entered_map == 3);
        return 55;
    }
    entered_map++;
    int r = px_sleep(HOUR);
    CHECK_EQ(r, PX_ECANCELED);
    *result = V(1);
    return r;
}

static void *failure_main(void *arg)
{
    (void)arg;
    void *items[100], *results[100] = { 0 };
    for (int i = 0; i < 100; i++)
        items[i] = V(i + 3);                    /* item 5 is the third */
    calls = entered_map = 0;
    CHECK_EQ(px_map(fail_at_5, items, results, 100, 4), 55);
    CHECK_EQ(calls, 4);                          /* no call started after the failure */
    for (int i = 0; i < 100; i++)
        CHECK(results[i] == NULL);               /* left alone: none returned 0 */
    return NULL;
}

SPEC(first_failure_cancels_the_rest)
{
    run(failure_main);
}

static void *bound_main(void *arg)
{
    (void)arg;
    void *items[50], *results[50];
    for (int i = 0; i < 50; i++)
        items[i] = V(i);
    for (size_t c = 1; c <= 60; c += 7) {
        in_flight = most_in_flight = 0;
        CHECK_EQ(px_map(square, items, results, 50, c), 0);
        CHECK_EQ((size_t)most_in_flight, (c < 50 ? c : 50));
    }
    in_flight = most_in_flight = 0;
    CHECK_EQ(px_map(square, items, results, 50, 0), 0);   /* 0: all at once */
    CHECK_EQ(most_in_flight, 50);
    return NULL;
}

SPEC(concurrency_bounds_the_calls_in_flight)
{
    run(bound_main);
}

static void *empty_main(void *arg)
{
    (void)arg;
    calls = 0;
    CHECK_EQ(px_map(square, NULL, NULL, 0, 4), 0);
    CHECK_EQ(calls, 0);
    return NULL;
}

SPEC(an_empty_input_returns_at_once)
{
    run(empty_main);
    CHECK_EQ(px_map(square, NULL, NULL, 0, 0), 0);    /* off-fiber too */
}

SPEC(hostile_arguments)
{
    void *items[1] = { V(1) }, *results[1];
    CHECK_EQ(px_map(NULL, items, results, 1, 1), PX_EINVAL);
    CHECK_EQ(px_map(square, NULL, results, 1, 1), PX_EINVAL);
    CHECK_EQ(px_map(square, items, NULL, 1, 1), PX_EINVAL);
    CHECK_EQ(px_map(square, items, results, 1, 1), PX_ENOFIBER);
}

/* A map whose calls park for good: px_run reports the deadlock and frees
** the run with the map under way -- what px_map made goes with it (ASan
** checks the leak). */
static int waits_for_good(void *item, void **result)
{
    (void)result;
    return px_event_wait(item);
}

static void *deadlocked_main(void *arg)
{
    void *items[3] = { arg, arg, arg }, *results[3];
    px_map(waits_for_good, items, results, 3, 2);   /* never returns */
    return NULL;
}

SPEC(a_map_discarded_with_its_run_leaks_nothing)
{
    px_event *e = px_event_new();
    CHECK_EQ(px_run(deadlocked_main, e, NULL), PX_EDEADLK);
    CHECK_EQ(px_event_free(e), 0);
}

SPECS(results_keep_input_order_at_concurrency_1_4_and_1000, first_failure_cancels_the_rest,
      concurrency_bounds_the_calls_in_flight, an_empty_input_returns_at_once,
      hostile_arguments, a_map_discarded_with_its_run_leaks_nothing)
