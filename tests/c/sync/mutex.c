/*
** mutex.c -- the conformance specification of px_mutex.
**
** Each SPEC is one documented behaviour.  Fibers synchronize on events (the
** number of waiters, a fiber's end), never on sleeps; the only timeouts are
** the ones under test, and they are short while the holds are unbounded.
*/
#include <string.h>

#include "sync_kit.h"

#define SYNC_EXAMPLE_NO_MAIN
#include "sync_mutex.c"   /* docs/examples: run below as a spec */

static px_mutex *M;
static px_token *T;        /* each run's own (run_with_token) */

static void run(px_fiber_fn main)
{
    M = px_mutex_new();
    CHECK(M != NULL);
    run_with_token(main, &T);
    CHECK_EQ(px_mutex_free(M), 0);
}

static void *lock_unlock(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(M), 0);
    CHECK_EQ(px_mutex_unlock(M), 0);
    return NULL;
}

static int lock_body(void *arg) { (void)arg; return px_mutex_lock(M); }

/* -- mutual exclusion and hand-off ------------------------------------------ */

static long counter;

static void *incrementer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++) {
        CHECK_EQ(px_mutex_lock(M), 0);
        long v = counter;
        if (i % 7 == 0)
            CHECK_EQ(px_yield(), 0);   /* let the others try to get in */
        counter = v + 1;
        CHECK_EQ(px_mutex_owner(M), px_self());
        CHECK_EQ(px_mutex_unlock(M), 0);
        if (i % 3 == 0)
            CHECK_EQ(px_yield(), 0);
    }
    return NULL;
}

static void *ten_incrementers(void *arg)
{
    (void)arg;
    spawn_join_all(incrementer, NULL, 10);
    CHECK_EQ(counter, 10000);
    return NULL;
}

SPEC(no_lost_updates_with_10_fibers)
{
    run(ten_incrementers);
}

static char order[16];
static size_t norder;

static void *note_in_turn(void *arg)
{
    CHECK_EQ(px_mutex_lock(M), 0);
    order[norder++] = (char)(uintptr_t)arg;
    CHECK_EQ(px_mutex_unlock(M), 0);
    return NULL;
}

static void *fifo_main(void *arg)
{
    (void)arg;
    px_fiber *f[5];
    CHECK_EQ(px_mutex_lock(M), 0);
    for (int i = 0; i < 5; i++) {
        CHECK((f[i] = px_spawn(note_in_turn, (void *)(uintptr_t)('a' + i))) != NULL);
        YIELD_UNTIL(px_mutex_waiters(M) == (size_t)i + 1);   /* queued in this order */
    }
    CHECK_EQ(px_mutex_unlock(M), 0);
    join_all(f, 5);
    CHECK(strcmp(order, "abcde") == 0);
    return NULL;
}

SPEC(hands_off_in_fifo_order)
{
    run(fifo_main);
}

static void *owner_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(M), 0);
    px_fiber *w = px_spawn(lock_unlock, NULL);
    YIELD_UNTIL(px_mutex_waiters(M) == 1);
    CHECK_EQ(px_mutex_unlock(M), 0);
    /* The waiter has not run yet, and already owns it. */
    CHECK_EQ(px_mutex_owner(M), px_fiber_id(w));
    CHECK_EQ(px_mutex_waiters(M), 0);
    join(w);
    CHECK_EQ(px_mutex_owner(M), 0);
    return NULL;
}

SPEC(unlock_makes_the_first_waiter_owner_before_it_wakes)
{
    run(owner_main);
}

static int tried;

static void *trier(void *arg)
{
    (void)arg;
    tried = px_mutex_trylock(M);
    return NULL;
}

static void *no_steal_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(M), 0);
    px_fiber *w = px_spawn(lock_unlock, NULL);
    YIELD_UNTIL(px_mutex_waiters(M) == 1);
    /* Held and waited for: a third fiber's trylock is refused. */
    px_fiber *t = px_spawn(trier, NULL);
    join(t);
    CHECK_EQ(tried, PX_EBUSY);
    t = px_spawn(trier, NULL);                    /* ready before the waiter */
    CHECK_EQ(px_mutex_unlock(M), 0);
    /* Handed to the waiter, which has not run: neither the releaser nor a
    ** newcomer can take it back. */
    CHECK_EQ(px_mutex_trylock(M), PX_EBUSY);
    CHECK_EQ(px_mutex_owner(M), px_fiber_id(w));
    join(t);
    CHECK_EQ(tried, PX_EBUSY);
    join(w);
    return NULL;
}

SPEC(trylock_never_steals_from_a_queued_waiter)
{
    run(no_steal_main);
}

static int unlocked;

static void *foreign_unlocker(void *arg)
{
    (void)arg;
    unlocked = px_mutex_unlock(M);
    return NULL;
}

static void *foreign_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_unlock(M), PX_EPERM);       /* not locked at all */
    CHECK_EQ(px_mutex_owner(M), 0);
    CHECK_EQ(px_mutex_lock(M), 0);
    px_fiber *u = px_spawn(foreign_unlocker, NULL);
    join(u);
    CHECK_EQ(unlocked, PX_EPERM);
    CHECK_EQ(px_mutex_owner(M), px_self());       /* nothing changed */
    CHECK_EQ(px_mutex_unlock(M), 0);
    CHECK_EQ(px_mutex_unlock(M), PX_EPERM);       /* and not twice */
    return NULL;
}

SPEC(unlock_by_a_non_owner_or_of_a_free_mutex_is_eperm)
{
    run(foreign_main);
}

static void *reentry_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(M), 0);
    CHECK_EQ(px_mutex_lock(M), PX_EDEADLK);
    CHECK_EQ(px_mutex_trylock(M), PX_EDEADLK);
    CHECK_EQ(px_mutex_waiters(M), 0);              /* refused without parking */
    CHECK_EQ(px_mutex_unlock(M), 0);               /* held once, not thrice */
    CHECK_EQ(px_mutex_owner(M), 0);
    return NULL;
}

SPEC(relock_and_trylock_by_the_owner_are_edeadlk)
{
    run(reentry_main);
}

/* -- interrupted waits -------------------------------------------------------- */

static cancel_call cancelled;      /* the lock a spec's scope interrupts */

static void *fired_main(void *arg)
{
    (void)arg;
    px_fiber *h = px_spawn(lock_unlock, NULL);   /* runs later */
    CHECK_EQ(px_mutex_lock(M), 0);
    CHECK_EQ(px_token_cancel(T), 1);
    CHECK_EQ(px_mutex_unlock(M), 0);
    /* A scope fired before the lock: a free mutex is still taken (no wait
    ** was needed), a held one fails at once without queueing. */
    cancelled = (cancel_call){ .token = T, .body = lock_body };
    px_fiber *c = px_spawn(cancellable, &cancelled);
    CHECK_EQ(px_mutex_lock(M), 0);
    CHECK_EQ(px_yield(), 0);   /* h queues, then c fails (a join of c would hand c the turn) */
    join(c);
    CHECK_EQ(cancelled.result, PX_ECANCELED);
    CHECK_EQ(px_mutex_waiters(M), 1);            /* h, which queued first */
    CHECK_EQ(px_mutex_unlock(M), 0);
    join(h);
    return NULL;
}

SPEC(lock_in_a_fired_scope_fails_at_once_without_queueing)
{
    run(fired_main);
}

/* -- owner death ---------------------------------------------------------------- */

static void *lock_and_end(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(M), 0);
    return NULL;   /* ends holding it */
}

/* Takes the lock, waits until two fibers queue and the token is cancelled,
** and ends holding it.  (The family's specs hand it over at a death.) */
static void *lock_and_end_queued(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(M), 0);
    YIELD_UNTIL(px_mutex_waiters(M) == 2 && px_token_cancelled(T));
    return NULL;
}

static int dead_result;

static void *lock_expecting_death(void *arg)
{
    (void)arg;
    dead_result = px_mutex_lock(M);
    CHECK_EQ(px_mutex_owner(M), px_self());        /* held, whatever it said */
    CHECK_EQ(px_mutex_unlock(M), 0);
    return NULL;
}

static void *race_death_main(void *arg)
{
    (void)arg;
    px_fiber *d = px_spawn(lock_and_end_queued, NULL);
    YIELD_UNTIL(px_mutex_owner(M) == px_fiber_id(d));
    cancelled = (cancel_call){ .token = T, .body = lock_body };
    px_fiber *c = px_spawn(cancellable, &cancelled);
    YIELD_UNTIL(px_mutex_waiters(M) == 1);
    px_fiber *w = px_spawn(lock_expecting_death, NULL);
    YIELD_UNTIL(px_mutex_waiters(M) == 2);
    /* c is interrupted and queued to run behind d, which ends first: its
    ** lock goes past c (still in the queue, but leaving) to w. */
    CHECK_EQ(px_token_cancel(T), 1);
    join(d);
    join(c);
    CHECK_EQ(cancelled.result, PX_ECANCELED);
    join(w);
    CHECK_EQ(dead_result, PX_EOWNERDEAD);        /* the news went on with it */
    return NULL;
}

SPEC(eownerdead_goes_past_an_interrupted_waiter_to_the_next)
{
    run(race_death_main);
}

static uint64_t first_id;

static void *lock_unlock_end(void *arg)
{
    (void)arg;
    first_id = px_self();
    CHECK_EQ(px_mutex_lock(M), 0);
    CHECK_EQ(px_mutex_unlock(M), 0);
    return NULL;
}

static uint64_t ids[64];

static void *newcomer(void *arg)
{
    uintptr_t i = (uintptr_t)arg;
    ids[i] = px_self();
    CHECK(ids[i] != first_id);
    CHECK(px_mutex_owner(M) != px_self());
    int r = px_mutex_trylock(M);                 /* never EDEADLK: not the owner */
    CHECK(r == 0 || r == PX_EOWNERDEAD);
    CHECK_EQ(px_mutex_unlock(M), 0);
    return NULL;
}

static void *ids_main(void *arg)
{
    (void)arg;
    join(px_spawn(lock_unlock_end, NULL));
    join(px_spawn(lock_and_end, NULL));          /* and one that died holding it */
    /* Fiber records are recycled; ids are not. */
    for (uintptr_t i = 0; i < 64; i++)
        join(px_spawn(newcomer, (void *)i));
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < i; j++)
            CHECK(ids[i] != ids[j]);
    return NULL;
}

SPEC(a_fiber_id_that_held_the_lock_is_never_mistaken_for_a_new_fiber)
{
    run(ids_main);
}

/* -- misuse, introspection, free ---------------------------------------------- */

static px_mutex *A, *B;
static uint64_t left_id, right_id;
static void *left(void *arg)
{
    (void)arg;
    left_id = px_self();
    CHECK_EQ(px_mutex_lock(A), 0);
    YIELD_UNTIL(px_mutex_owner(B) != 0);
    px_mutex_lock(B);                            /* never returns */
    return NULL;
}

static void *right(void *arg)
{
    (void)arg;
    right_id = px_self();
    CHECK_EQ(px_mutex_lock(B), 0);
    YIELD_UNTIL(px_mutex_waiters(B) == 1);
    px_mutex_lock(A);                            /* never returns */
    return NULL;
}

SPEC(deadlock_report_names_the_holders_and_prints_the_cycle)
{
    A = px_mutex_new();
    B = px_mutex_new();
    px_sched *s = run_to_deadlock((px_fiber_fn[]){ left, right, NULL });
    check_has("fiber %llu: parked on \"Mutex lock\", waits on mutex@%p held by fiber %llu",
              (unsigned long long)px_fiber_number(left_id), (void *)B, (unsigned long long)px_fiber_number(right_id));
    check_has("fiber %llu: parked on \"Mutex lock\", waits on mutex@%p held by fiber %llu",
              (unsigned long long)px_fiber_number(right_id), (void *)A, (unsigned long long)px_fiber_number(left_id));
    CHECK(strstr(report, "wait-for cycle: fiber ") != NULL);
    check_has("-> mutex@%p (\"Mutex lock\") held by fiber %llu", (void *)A,
              (unsigned long long)px_fiber_number(left_id));
    check_has("-> mutex@%p (\"Mutex lock\") held by fiber %llu", (void *)B,
              (unsigned long long)px_fiber_number(right_id));
    /* Off-fiber, the state is still there to see. */
    CHECK_EQ(px_mutex_owner(A), left_id);
    CHECK_EQ(px_mutex_owner(B), right_id);
    CHECK_EQ(px_mutex_waiters(A), 1);
    CHECK_EQ(px_mutex_waiters(B), 1);
    CHECK_EQ(px_mutex_free(A), PX_EBUSY);
    /* Freeing the scheduler discards the fibers: their holds and waits go,
    ** and nobody is woken. */
    px_sched_free(s);
    CHECK_EQ(px_mutex_owner(A), 0);
    CHECK_EQ(px_mutex_waiters(A), 0);
    CHECK_EQ(px_mutex_free(A), 0);
    CHECK_EQ(px_mutex_free(B), 0);
}

static int free_held, free_waited;

static void *free_main(void *arg)
{
    (void)arg;
    px_mutex *m = px_mutex_new();
    CHECK_EQ(px_mutex_lock(m), 0);
    free_held = px_mutex_free(m);
    M = m;
    px_fiber *w = px_spawn(lock_unlock, NULL);
    YIELD_UNTIL(px_mutex_waiters(m) == 1);
    CHECK_EQ(px_mutex_unlock(m), 0);             /* now only waited for by w */
    free_waited = px_mutex_free(m);              /* owned by w: refused */
    join(w);
    CHECK_EQ(px_mutex_free(m), 0);
    return NULL;
}

SPEC(free_refuses_a_held_or_waited_on_mutex_with_ebusy)
{
    CHECK_EQ(px_run(free_main, NULL, NULL), 0);
    CHECK_EQ(free_held, PX_EBUSY);
    CHECK_EQ(free_waited, PX_EBUSY);
}

/* -- a hosted fiber (a host that cannot switch inside C, as Lua) ------------- */

static px_sched *HS;
static int host2_step, host2_result, host2_waiters;

/* The same host, with the wait bounded by a pushed timeout that fires. */
static int host_resume_timed(void *ctx)
{
    (void)ctx;
    switch (host2_step++) {
    case 0:
        CHECK_EQ(px_scope_push_timeout(PX_MSEC(10)), 0);
        CHECK_EQ(px_mutex_lock(M), PX_EYIELD);
        return 0;
    case 1:
        host2_result = px_mutex_lock(M);         /* collects the timeout */
        host2_waiters = (int)px_mutex_waiters(M);
        CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
        CHECK(px_mutex_owner(M) != px_self());
        return PX_HOST_DONE;
    }
    return PX_HOST_DONE;
}

static void *hosted_timed_holder(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(M), 0);
    px_host_ops ops = { host_resume_timed, NULL, NULL };
    px_fiber *h = px_spawn_hosted(HS, &ops, NULL);
    join(h);                                     /* it gives up while we hold it */
    CHECK_EQ(host2_result, PX_ETIMEDOUT);
    CHECK_EQ(host2_waiters, 0);
    CHECK_EQ(px_mutex_owner(M), px_self());
    CHECK_EQ(px_mutex_unlock(M), 0);
    return NULL;
}

SPEC(hosted_fiber_timed_out_lock_leaves_no_waiter)
{
    M = px_mutex_new();
    HS = px_sched_new(NULL);
    CHECK_EQ(px_sched_post(HS, hosted_timed_holder, NULL), 0);
    CHECK_EQ(px_sched_run(HS), 0);
    CHECK_EQ(host2_step, 2);
    px_sched_free(HS);
    CHECK_EQ(px_mutex_free(M), 0);
}

/* -- two schedulers ----------------------------------------------------------- */

static px_latch held, done;

static void *hold_across(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(M), 0);
    ev_set(&held);
    EV_WAIT(&done, 1);                           /* blocks this scheduler's thread */
    CHECK_EQ(px_mutex_unlock(M), 0);
    return NULL;
}

static void *other_scheduler(void *arg)
{
    (void)arg;
    CHECK_EQ(px_run(hold_across, NULL, NULL), 0);
    return NULL;
}

static void *stranger(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(M), PX_ETHREAD);      /* would park on a foreign holder */
    CHECK_EQ(px_mutex_trylock(M), PX_EBUSY);
    CHECK_EQ(px_mutex_unlock(M), PX_EPERM);
    return NULL;
}

SPEC(lock_held_by_a_fiber_of_another_scheduler_is_ethread)
{
    M = px_mutex_new();
    ev_init(&held);
    ev_init(&done);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_scheduler, NULL) == 0);
    EV_WAIT(&held, 1);
    CHECK_EQ(px_run(stranger, NULL, NULL), 0);
    ev_set(&done);
    pthread_join(t, NULL);
    CHECK_EQ(px_mutex_free(M), 0);
    ev_destroy(&held);
    ev_destroy(&done);
}

SPEC(the_documented_example_runs)
{
    CHECK_EQ(sync_mutex_example(), 0);
}

SPECS(no_lost_updates_with_10_fibers,
      hands_off_in_fifo_order,
      unlock_makes_the_first_waiter_owner_before_it_wakes,
      trylock_never_steals_from_a_queued_waiter,
      unlock_by_a_non_owner_or_of_a_free_mutex_is_eperm,
      relock_and_trylock_by_the_owner_are_edeadlk,
      lock_in_a_fired_scope_fails_at_once_without_queueing,
      eownerdead_goes_past_an_interrupted_waiter_to_the_next,
      a_fiber_id_that_held_the_lock_is_never_mistaken_for_a_new_fiber,
      deadlock_report_names_the_holders_and_prints_the_cycle,
      free_refuses_a_held_or_waited_on_mutex_with_ebusy,
      hosted_fiber_timed_out_lock_leaves_no_waiter,
      lock_held_by_a_fiber_of_another_scheduler_is_ethread,
      the_documented_example_runs)
