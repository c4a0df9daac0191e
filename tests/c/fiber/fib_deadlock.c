/*
** fib_deadlock.c -- a stuck run returns PX_EDEADLK with a report that names
** every parked fiber, its reason, what it waits on and the wait-for cycle; a
** fiber parked on something outside, or a pending sleep, is not a deadlock.
*/
#include <string.h>

#define FIBERS_GATE_NO_MAIN
#include "fibers_gate.c"

#include "../spec.h"

static gate g[2];
static uint64_t side_id[2], id3;
static int sides;

/* The two sides of the cycle: side i takes gate i, lets the other side run,
** then waits for the other side's gate. */
static void *side(void *arg)
{
    (void)arg;
    int i = sides++;
    side_id[i] = px_self();
    CHECK_EQ(gate_take(&g[i]), 0);
    px_yield();
    gate_take(&g[1 - i]);
    return NULL;
}

static void *lonely(void *arg)
{
    (void)arg;
    id3 = px_self();
    px_park("lonely park", NULL, NULL);
    return NULL;
}

static int contains(const char *needle)
{
    return strstr(report, needle) != NULL;
}

SPEC(cycle)
{
    sides = 0;
    px_sched *s = run_to_deadlock((px_fiber_fn[]){ side, side, lonely, NULL });
    CHECK_EQ(reports, 1);
    fputs(report, stdout);
    char line[256];
    CHECK(contains("deadlock detected"));
    CHECK(contains("3 fiber(s) are parked"));
    snprintf(line, sizeof line, "fiber %llu: parked on \"gate take\", waits on gate@%p held by fiber %llu",
             (unsigned long long)px_fiber_number(side_id[0]), (void *)&g[1], (unsigned long long)px_fiber_number(side_id[1]));
    CHECK(contains(line));
    snprintf(line, sizeof line, "fiber %llu: parked on \"gate take\", waits on gate@%p held by fiber %llu",
             (unsigned long long)px_fiber_number(side_id[1]), (void *)&g[0], (unsigned long long)px_fiber_number(side_id[0]));
    CHECK(contains(line));
    snprintf(line, sizeof line, "fiber %llu: parked on \"lonely park\"\n", (unsigned long long)px_fiber_number(id3));
    CHECK(contains(line));
    CHECK(contains("wait-for cycle: fiber "));
    snprintf(line, sizeof line, "gate@%p (\"gate take\") held by fiber %llu", (void *)&g[0],
             (unsigned long long)px_fiber_number(side_id[0]));
    CHECK(contains(line));
    snprintf(line, sizeof line, "gate@%p (\"gate take\") held by fiber %llu", (void *)&g[1],
             (unsigned long long)px_fiber_number(side_id[1]));
    CHECK(contains(line));
    px_sched_free(s);   /* releases the parked fibers */
}

static px_fiber *jb;
static void *join_b(void *arg);
static void *join_a(void *arg)
{
    (void)arg;
    jb = px_spawn(join_b, NULL);
    px_join(jb, NULL);
    return NULL;
}
static px_fiber *ja;
static void *join_b(void *arg)
{
    (void)arg;
    px_join(ja, NULL);
    return NULL;
}
static void *join_main(void *arg)
{
    (void)arg;
    ja = px_spawn(join_a, NULL);
    px_join(ja, NULL);   /* never returns: the run deadlocks */
    return NULL;
}

SPEC(join_cycle)
{
    px_sched *s = run_to_deadlock((px_fiber_fn[]){ join_main, NULL });
    fputs(report, stdout);
    CHECK(contains("3 fiber(s) are parked"));
    CHECK(contains("parked on \"fiber join\", waits on fiber@"));
    CHECK(contains("wait-for cycle"));
    px_sched_free(s);
}

/* Not deadlocks: a pending timeout, an outside park under a hold. */
static void *timed(void *arg)
{
    (void)arg;
    CHECK_EQ(px_scope_push_timeout(PX_MSEC(20)), 0);
    CHECK_EQ(px_park("bounded", NULL, NULL), PX_ETIMEDOUT);
    CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
    return NULL;
}

static void *outside(void *arg)
{
    px_sched *s = arg;
    px_park_info pi = { "outside", NULL, NULL, NULL, NULL, NULL, PX_PARK_OUTSIDE };
    CHECK_EQ(px_scope_push_timeout(PX_MSEC(20)), 0);
    CHECK_EQ(px_park_with(&pi), PX_ETIMEDOUT);
    px_scope_pop();
    px_sched_unhold(s);
    return NULL;
}

SPEC(not_deadlocks)
{
    int before = reports;
    px_sched *s = px_sched_new(NULL);
    CHECK_EQ(px_sched_post(s, timed, NULL), 0);
    CHECK_EQ(px_sched_hold(s), 0);
    CHECK_EQ(px_sched_post(s, outside, s), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(reports, before);
    px_sched_free(s);
}

/* px_run writes the report to stderr and says PX_EDEADLK. */
SPEC(px_run_reports_a_deadlock_and_says_edeadlk)
{
    CHECK_EQ(px_run(lonely, NULL, NULL), PX_EDEADLK);
}

SPECS(cycle, join_cycle, not_deadlocks, px_run_reports_a_deadlock_and_says_edeadlk)
