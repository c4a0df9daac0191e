/*
** sem.c -- the conformance specification of px_sem.
**
** Fibers synchronize on observable state (px_sem_waiters, a fiber's end),
** never on sleeps; the only timeouts are the ones under test.
*/
#include "sync_kit.h"

static px_sem *S;
static px_token *T;

static void run(size_t initial, px_fiber_fn main)
{
    S = px_sem_new(initial);
    CHECK(S != NULL);
    CHECK_EQ(px_run(main, NULL, NULL), 0);
    CHECK_EQ(px_sem_waiters(S), 0);
    CHECK_EQ(px_sem_free(S), 0);
}

static int results[8];

/* Acquires, records the outcome in results[arg], and keeps the unit. */
static void *acquirer(void *arg)
{
    results[(uintptr_t)arg] = px_sem_acquire(S);
    return NULL;
}

static int acquire_body(void *arg) { (void)arg; return px_sem_acquire(S); }

static cancel_call cancelled;      /* the acquire a spec's scope interrupts */

/* -- units --------------------------------------------------------------------- */

static void *free_units_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sem_acquire(S), 0);
    CHECK_EQ(px_sem_acquire(S), 0);
    CHECK_EQ(px_sem_value(S), 0);
    CHECK_EQ(px_sem_tryacquire(S), PX_EBUSY);
    CHECK_EQ(px_sem_waiters(S), 0);              /* tryacquire never parks */
    CHECK_EQ(px_sem_release(S), 0);
    CHECK_EQ(px_sem_tryacquire(S), 0);
    CHECK_EQ(px_sem_release(S), 0);
    CHECK_EQ(px_sem_release(S), 0);
    CHECK_EQ(px_sem_value(S), 2);
    return NULL;
}

SPEC(acquire_takes_a_free_unit_at_once_and_tryacquire_refuses_when_none)
{
    run(2, free_units_main);
}

static int inside, most_inside;

static void *bounded(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++) {
        CHECK_EQ(px_sem_acquire(S), 0);
        if (++inside > most_inside)
            most_inside = inside;
        for (int y = 0; y < i % 3; y++)
            CHECK_EQ(px_yield(), 0);
        inside--;
        CHECK_EQ(px_sem_release(S), 0);
    }
    return NULL;
}

static void *bounded_main(void *arg)
{
    (void)arg;
    spawn_join_all(bounded, NULL, 6);
    CHECK_EQ(most_inside, 2);
    CHECK_EQ(px_sem_value(S), 2);
    return NULL;
}

SPEC(at_most_initial_fibers_hold_units_at_once)
{
    run(2, bounded_main);
}

/* -- hand-off -------------------------------------------------------------------- */

static char order[8];
static size_t norder;

static void *note_in_turn(void *arg)
{
    CHECK_EQ(px_sem_acquire(S), 0);
    order[norder++] = (char)(uintptr_t)arg;
    return NULL;
}

static void *fifo_main(void *arg)
{
    (void)arg;
    px_fiber *f[5];
    for (int i = 0; i < 5; i++) {
        CHECK((f[i] = px_spawn(note_in_turn, (void *)(uintptr_t)('a' + i))) != NULL);
        YIELD_UNTIL(px_sem_waiters(S) == (size_t)i + 1);   /* queued in this order */
    }
    for (int i = 0; i < 5; i++)
        CHECK_EQ(px_sem_release(S), 0);
    CHECK_EQ(px_sem_waiters(S), 0);
    CHECK_EQ(px_sem_value(S), 0);                /* every unit went to a waiter */
    join_all(f, 5);
    CHECK(strcmp(order, "abcde") == 0);
    return NULL;
}

SPEC(hands_units_off_in_fifo_order)
{
    run(0, fifo_main);
}

static void *tryer(void *arg)
{
    (void)arg;
    results[1] = px_sem_tryacquire(S);
    return NULL;
}

static void *no_steal_main(void *arg)
{
    (void)arg;
    px_fiber *w = px_spawn(acquirer, (void *)0);
    YIELD_UNTIL(px_sem_waiters(S) == 1);
    px_fiber *t = px_spawn(tryer, NULL);         /* ready before the waiter runs */
    CHECK_EQ(px_sem_release(S), 0);
    /* The unit is w's before w runs: neither we nor t can take it. */
    CHECK_EQ(px_sem_value(S), 0);
    CHECK_EQ(px_sem_waiters(S), 0);
    CHECK_EQ(px_sem_tryacquire(S), PX_EBUSY);
    join(t);
    CHECK_EQ(results[1], PX_EBUSY);
    join(w);
    CHECK_EQ(results[0], 0);
    return NULL;
}

SPEC(release_hands_the_unit_to_the_first_waiter_and_tryacquire_never_steals_it)
{
    run(0, no_steal_main);
}

SPEC(release_past_the_largest_count_is_einval)
{
    px_sem *sem = px_sem_new(SIZE_MAX);
    CHECK(sem != NULL);
    CHECK_EQ(px_sem_release(sem), PX_EINVAL);
    CHECK_EQ(px_sem_value(sem), SIZE_MAX);
    CHECK_EQ(px_sem_free(sem), 0);
}

/* -- interrupted acquires ----------------------------------------------------------- */

static void *timeout_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_with_timeout(PX_MSEC(5), acquire_body, NULL), PX_ETIMEDOUT);
    CHECK_EQ(px_sem_waiters(S), 0);
    CHECK_EQ(px_sem_release(S), 0);
    CHECK_EQ(px_sem_value(S), 1);                /* nobody took it */
    return NULL;
}

SPEC(timed_out_acquire_leaves_no_waiter_and_takes_nothing)
{
    run(0, timeout_main);
}

/*
** A grant that really races the interrupt: the release is made while the
** scheduler is not running, so its wake waits in the scheduler's inbox
** behind a cancel posted first.  The cancelled fiber runs its pass_on.
*/
static void quiet(void *ctx, const char *text) { (void)ctx; (void)text; }

static void raced_grant(int with_next_waiter)
{
    T = px_token_new();
    S = px_sem_new(0);
    results[0] = -99;
    px_sched_opts o = { .on_deadlock = quiet };
    px_sched *s = px_sched_new(&o);
    cancelled = (cancel_call){ .token = T, .body = acquire_body };
    CHECK_EQ(px_sched_post(s, cancellable, &cancelled), 0);
    if (with_next_waiter)
        CHECK_EQ(px_sched_post(s, acquirer, (void *)0), 0);
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);       /* all parked, nothing pending */
    CHECK_EQ(px_sem_waiters(S), (size_t)(1 + with_next_waiter));
    CHECK_EQ(px_token_cancel(T), 1);             /* posted: the scheduler is idle */
    CHECK_EQ(px_sem_release(S), 0);              /* granted to the cancelled one */
    CHECK_EQ(px_sem_value(S), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(cancelled.result, PX_ECANCELED);
    if (with_next_waiter)
        CHECK_EQ(results[0], 0);                 /* passed on to the next waiter */
    CHECK_EQ(px_sem_value(S), (size_t)!with_next_waiter);   /* ... or the count */
    CHECK_EQ(px_sem_waiters(S), 0);
    px_sched_free(s);
    CHECK_EQ(px_sem_free(S), 0);
    px_token_free(T);
}

SPEC(interrupted_acquire_passes_a_raced_unit_to_the_next_waiter)
{
    raced_grant(1);
}

SPEC(interrupted_acquire_passes_a_raced_unit_back_to_the_count)
{
    raced_grant(0);
}

SPECS(acquire_takes_a_free_unit_at_once_and_tryacquire_refuses_when_none,
      at_most_initial_fibers_hold_units_at_once,
      hands_units_off_in_fifo_order,
      release_hands_the_unit_to_the_first_waiter_and_tryacquire_never_steals_it,
      release_past_the_largest_count_is_einval,
      timed_out_acquire_leaves_no_waiter_and_takes_nothing,
      interrupted_acquire_passes_a_raced_unit_to_the_next_waiter,
      interrupted_acquire_passes_a_raced_unit_back_to_the_count)
