/*
** barrier.c -- the conformance specification of px_barrier.
**
** Fibers synchronize on observable state (px_barrier_waiting, a fiber's
** end), never on sleeps; the only timeouts are the ones under test.
*/
#include "sync_kit.h"

static px_barrier *B;
static px_token *T;        /* each run's own (run_with_token) */

static void run(size_t parties, px_fiber_fn main)
{
    B = px_barrier_new(parties);
    CHECK(B != NULL);
    run_with_token(main, &T);
    CHECK_EQ(px_barrier_waiting(B), 0);
    CHECK_EQ(px_barrier_free(B), 0);
}

SPEC(zero_parties_is_refused_with_einval)
{
    errno = 0;
    CHECK(px_barrier_new(0) == NULL);
    CHECK_EQ(errno, EINVAL);
}

/* -- lockstep ------------------------------------------------------------------ */

enum { PARTIES = 3, GENERATIONS = 3 };

static int step[PARTIES];            /* the generation each party is in */
static int leaders[GENERATIONS];     /* leaders seen in each generation */

/* Party `arg` does GENERATIONS rounds; party 0 is slow (it yields a lot
** before each arrival).  Nobody may run ahead of the slowest party. */
static void *party(void *arg)
{
    int me = (int)(uintptr_t)arg;
    for (int g = 0; g < GENERATIONS; g++) {
        if (me == 0)
            for (int i = 0; i < 50; i++)
                CHECK_EQ(px_yield(), 0);
        step[me] = g;
        int r = px_barrier_arrive_and_wait(B);
        CHECK(r == 0 || r == 1);
        leaders[g] += r;
        /* Through the barrier of generation g: everyone reached it. */
        for (int p = 0; p < PARTIES; p++)
            CHECK_GE(step[p], g);
        CHECK_GE(px_barrier_phase(B), (uint64_t)g + 1);
    }
    return NULL;
}

static void *lockstep_main(void *arg)
{
    (void)arg;
    spawn_join_numbered(party, PARTIES);
    CHECK_EQ(px_barrier_phase(B), GENERATIONS);
    return NULL;
}

SPEC(lockstep_over_three_generations_with_a_slow_party)
{
    run(PARTIES, lockstep_main);
}

SPEC(exactly_one_leader_per_phase)
{
    run(PARTIES, lockstep_main);
    for (int g = 0; g < GENERATIONS; g++)
        CHECK_EQ(leaders[g], 1);
}

static int arrived, results[8];

static void *arriver(void *arg)
{
    arrived++;
    results[(uintptr_t)arg] = px_barrier_arrive_and_wait(B);
    return NULL;
}

static void *last_main(void *arg)
{
    (void)arg;
    px_fiber *f[2];
    spawn_numbered(f, 2, arriver);
    YIELD_UNTIL(arrived == 2);
    CHECK_EQ(px_barrier_waiting(B), 2);
    /* The last arrival returns 1 at once: the phase is over and re-armed
    ** before the others have even run. */
    CHECK_EQ(px_barrier_arrive_and_wait(B), 1);
    CHECK_EQ(px_barrier_phase(B), 1);
    CHECK_EQ(px_barrier_waiting(B), 0);
    join_all_got_0(f, 2, results);
    return NULL;
}

SPEC(the_last_arrival_leads_without_parking_and_the_others_get_0)
{
    run(3, last_main);
}

/* -- phases never mix ---------------------------------------------------------- */

static int second_round;

static void *twice(void *arg)
{
    arrived++;
    results[(uintptr_t)arg] = px_barrier_arrive_and_wait(B);
    second_round++;
    return (void *)(intptr_t)px_barrier_arrive_and_wait(B);
}

static void *mix_main(void *arg)
{
    (void)arg;
    px_fiber *a = px_spawn(twice, (void *)0);
    YIELD_UNTIL(arrived == 1);
    CHECK_EQ(px_barrier_arrive_and_wait(B), 1);  /* leads phase 1; a not run yet */
    CHECK_EQ(second_round, 0);
    /* Arriving again at once makes this fiber phase 2's first arrival, not
    ** the partner of a's stale one: it parks until a arrives again. */
    CHECK_EQ(px_barrier_arrive_and_wait(B), 0);
    void *r;
    CHECK_EQ(px_join(a, &r), 0);
    px_fiber_release(a);
    CHECK_EQ(results[0], 0);
    CHECK_EQ((intptr_t)r, 1);                    /* a led phase 2 */
    CHECK_EQ(px_barrier_phase(B), 2);
    return NULL;
}

SPEC(phases_never_mix_a_fast_rearrival_waits_for_the_next_phase)
{
    run(2, mix_main);
}

/* -- interrupted arrivals ------------------------------------------------------ */

static int arrive_body(void *arg) { (void)arg; return px_barrier_arrive_and_wait(B); }

static void *timeout_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_with_timeout(PX_MSEC(5), arrive_body, NULL), PX_ETIMEDOUT);
    CHECK_EQ(px_barrier_waiting(B), 0);          /* withdrawn */
    CHECK_EQ(px_barrier_phase(B), 0);
    px_fiber *a = px_spawn(arriver, (void *)0);
    YIELD_UNTIL(arrived == 1);
    CHECK_EQ(px_barrier_arrive_and_wait(B), 1);  /* a's partner, not a */
    join(a);
    CHECK_EQ(results[0], 0);
    CHECK_EQ(px_barrier_phase(B), 1);
    return NULL;
}

SPEC(timed_out_arrival_withdraws_its_count)
{
    run(2, timeout_main);
}

static cancel_call cancelled;      /* the arrival a spec's scope interrupts */

static void *cancel_main(void *arg)
{
    (void)arg;
    cancelled = (cancel_call){ .token = T, .body = arrive_body, .started = &arrived };
    px_fiber *c = px_spawn(cancellable, &cancelled);
    px_fiber *a = px_spawn(arriver, (void *)0);
    YIELD_UNTIL(arrived == 2);
    CHECK_EQ(px_barrier_waiting(B), 2);
    /* c is interrupted but has not run yet: it is still queued.  An arrival
    ** now would be the third only if c still counted; it must park. */
    CHECK_EQ(px_token_cancel(T), 1);
    px_fiber *b = px_spawn(arriver, (void *)1);  /* runs after we park */
    CHECK_EQ(px_barrier_arrive_and_wait(B), 0);
    join(c);
    join(a);
    join(b);
    CHECK_EQ(cancelled.result, PX_ECANCELED);
    CHECK_EQ(results[0], 0);
    CHECK_EQ(results[1], 1);                     /* b completed the phase */
    CHECK_EQ(px_barrier_phase(B), 1);
    return NULL;
}

SPEC(cancelled_arrival_withdraws_its_count_even_before_it_runs_again)
{
    run(3, cancel_main);
}

static void *fired_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_token_cancel(T), 1);
    CHECK_EQ(px_with_cancel(T, arrive_body, NULL), PX_ECANCELED);
    CHECK_EQ(px_barrier_waiting(B), 0);
    return NULL;
}

SPEC(arrival_in_a_fired_scope_fails_at_once_without_counting)
{
    run(2, fired_main);
}

/* -- edges, misuse, reports ---------------------------------------------------- */

static void *single_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++)
        CHECK_EQ(px_barrier_arrive_and_wait(B), 1);
    CHECK_EQ(px_barrier_phase(B), 3);
    return NULL;
}

SPEC(a_one_party_barrier_always_leads)
{
    run(1, single_main);
}

SPECS(zero_parties_is_refused_with_einval,
      lockstep_over_three_generations_with_a_slow_party,
      exactly_one_leader_per_phase,
      the_last_arrival_leads_without_parking_and_the_others_get_0,
      phases_never_mix_a_fast_rearrival_waits_for_the_next_phase,
      timed_out_arrival_withdraws_its_count,
      cancelled_arrival_withdraws_its_count_even_before_it_runs_again,
      arrival_in_a_fired_scope_fails_at_once_without_counting,
      a_one_party_barrier_always_leads)
