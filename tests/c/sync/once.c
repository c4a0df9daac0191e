/*
** once.c -- the conformance specification of px_once.
**
** Each SPEC is one documented behaviour.  Fibers synchronize on events (the
** runner's progress, a fiber's end), never on sleeps.
*/
#include <string.h>

#include "sync_kit.h"

#define SYNC_EXAMPLE_NO_MAIN
#include "sync_once.c"   /* docs/examples: run below as a spec */

static px_once *O;
static int runs;                                 /* how often an action ran */

static void run(px_fiber_fn main)
{
    O = px_once_new();
    CHECK(O != NULL);
    runs = 0;
    CHECK_EQ(px_run(main, NULL, NULL), 0);
    CHECK_EQ(px_once_free(O), 0);
}

/* Runs for a while (other fibers run meanwhile) and returns 7. */
static int slow_action(void *arg)
{
    (void)arg;
    runs++;
    for (int i = 0; i < 20; i++)
        CHECK_EQ(px_yield(), 0);
    return 7;
}

static int results[5], done_seen[5];

static void *racer(void *arg)
{
    uintptr_t i = (uintptr_t)arg;
    results[i] = px_once_do(O, slow_action, NULL);
    done_seen[i] = px_once_done(O);              /* nobody returns before it is done */
    return NULL;
}

static void *racers_main(void *arg)
{
    (void)arg;
    spawn_join_numbered(racer, 5);
    CHECK_EQ(runs, 1);
    CHECK_EQ(results[0], 7);                     /* the runner gets fn's result */
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(done_seen[i], 1);
        if (i > 0)
            CHECK_EQ(results[i], 0);             /* the others get 0 */
    }
    return NULL;
}

SPEC(runs_the_action_once_among_5_racers_who_wait_for_it)
{
    run(racers_main);
}

static void *later_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_once_done(O), 0);
    CHECK_EQ(px_once_do(O, slow_action, NULL), 7);
    CHECK_EQ(px_once_done(O), 1);
    CHECK_EQ(px_once_do(O, slow_action, NULL), 0);   /* at once, not run again */
    CHECK_EQ(px_once_begin(O), 0);
    CHECK_EQ(runs, 1);
    return NULL;
}

SPEC(later_callers_return_at_once_without_running_it)
{
    run(later_main);
}

static int failing_action(void *arg)
{
    (void)arg;
    runs++;
    return PX_EINVAL;                            /* it failed */
}

static void *failing_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_once_do(O, failing_action, NULL), PX_EINVAL);
    CHECK_EQ(px_once_done(O), 1);                /* done all the same */
    CHECK_EQ(px_once_do(O, failing_action, NULL), 0);
    CHECK_EQ(runs, 1);                           /* never retried */
    return NULL;
}

SPEC(a_failed_action_is_done_and_never_retried)
{
    run(failing_main);
}

static int inner_result;

static int reentrant_action(void *arg)
{
    (void)arg;
    runs++;
    inner_result = px_once_do(O, failing_action, NULL);
    CHECK_EQ(px_once_begin(O), PX_EDEADLK);
    return 0;
}

static void *reentrant_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_once_do(O, reentrant_action, NULL), 0);
    CHECK_EQ(inner_result, PX_EDEADLK);
    CHECK_EQ(runs, 1);                           /* the inner action never ran */
    CHECK_EQ(px_once_done(O), 1);
    return NULL;
}

SPEC(reentrant_do_from_inside_the_action_is_edeadlk)
{
    run(reentrant_main);
}

/* The runner is interrupted inside the action (its wait there cancelled, by
** another thread as Python's runner is): the action ends with it, the waiter
** returns 0 and it is done. */
static px_token *T;
static px_event *Gate;
static cancel_call runner_call;
static int waiter_result = -100;

static int gated_action(void *arg)
{
    (void)arg;
    runs++;
    return px_event_wait(Gate);                  /* nobody sets it */
}

static int do_gated(void *arg) { (void)arg; return px_once_do(O, gated_action, NULL); }

static void *once_waiter(void *arg)
{
    (void)arg;
    waiter_result = px_once_do(O, failing_action, NULL);
    return NULL;
}

static void *canceller(void *arg)
{
    (void)arg;
    CHECK_EQ(px_token_cancel(T), 1);
    return NULL;
}

static int join_fiber(void *arg) { return px_join(arg, NULL); }

static void *ending_runner_main(void *arg)
{
    (void)arg;
    runner_call = (cancel_call){ .token = T, .body = do_gated };
    px_fiber *r = px_spawn(cancellable, &runner_call);
    YIELD_UNTIL(runs == 1);                      /* inside the action */
    px_fiber *w = px_spawn(once_waiter, NULL);
    for (int i = 0; i < 10; i++)
        CHECK_EQ(px_yield(), 0);
    CHECK_EQ(waiter_result, -100);               /* it waits for the runner */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, canceller, NULL) == 0);
    /* The cancel comes from a thread the scheduler cannot see: join under a
    ** (generous) timeout, whose deadline keeps the run from a deadlock. */
    CHECK_EQ(px_with_timeout(PX_TEST_TIMEOUT_NS, join_fiber, r), 0);
    px_fiber_release(r);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_EQ(runner_call.result, PX_ECANCELED);  /* the action's outcome */
    join(w);
    CHECK_EQ(waiter_result, 0);                  /* the waiter just returns */
    CHECK_EQ(px_once_done(O), 1);
    CHECK_EQ(px_once_do(O, failing_action, NULL), 0);
    CHECK_EQ(runs, 1);
    return NULL;
}

SPEC(a_runner_ending_inside_the_action_ends_it)
{
    CHECK((T = px_token_new()) != NULL);
    CHECK((Gate = px_event_new()) != NULL);
    run(ending_runner_main);
    CHECK_EQ(px_event_free(Gate), 0);
    px_token_free(T);
}

static int begin_results[3];

static void *beginner(void *arg)
{
    uintptr_t i = (uintptr_t)arg;
    begin_results[i] = px_once_begin(O);
    return NULL;
}

/* The runner ends the action with end(); its waiters then return 0. */
static void *end_wakes_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_once_end(O), PX_EPERM);          /* nothing begun */
    CHECK_EQ(px_once_begin(O), 1);               /* this fiber runs the action */
    CHECK_EQ(px_once_done(O), 0);
    begin_results[0] = begin_results[1] = -100;
    px_fiber *f[2];
    spawn_numbered(f, 2, beginner);
    for (int i = 0; i < 10; i++)
        CHECK_EQ(px_yield(), 0);
    CHECK_EQ(begin_results[0], -100);            /* both parked meanwhile */
    CHECK_EQ(begin_results[1], -100);
    CHECK_EQ(px_once_free(O), PX_EBUSY);         /* running, and waited on */
    CHECK_EQ(px_once_end(O), 0);
    CHECK_EQ(px_once_done(O), 1);
    CHECK_EQ(px_once_end(O), PX_EPERM);          /* only once */
    join_all_got_0(f, 2, begin_results);
    return NULL;
}

SPEC(begin_and_end_run_the_action_in_two_steps)
{
    run(end_wakes_main);
}

static int end_result;

static void *foreign_ender(void *arg)
{
    (void)arg;
    end_result = px_once_end(O);
    return NULL;
}

static void *foreign_end_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_once_begin(O), 1);
    join(px_spawn(foreign_ender, NULL));
    CHECK_EQ(end_result, PX_EPERM);              /* not the runner */
    CHECK_EQ(px_once_done(O), 0);
    CHECK_EQ(px_once_end(O), 0);
    return NULL;
}

SPEC(end_by_a_fiber_that_did_not_begin_is_eperm)
{
    run(foreign_end_main);
}

SPEC(done_works_anywhere_and_do_without_an_action_is_einval)
{
    px_once *o = px_once_new();
    CHECK(o != NULL);
    CHECK_EQ(px_once_done(o), 0);
    CHECK_EQ(px_once_do(o, NULL, NULL), PX_EINVAL);
    CHECK_EQ(px_once_free(o), 0);
}

/* The action needs a mutex that a fiber waiting for the Once holds. */
static px_mutex *Mx;
static uint64_t runner_id, holder_id;

static int locking_action(void *arg)
{
    (void)arg;
    YIELD_UNTIL(px_mutex_owner(Mx) != 0);
    return px_mutex_lock(Mx);                    /* never returns */
}

static void *stuck_runner(void *arg)
{
    (void)arg;
    runner_id = px_self();
    px_once_do(O, locking_action, NULL);
    return NULL;
}

static void *stuck_holder(void *arg)
{
    (void)arg;
    holder_id = px_self();
    CHECK_EQ(px_mutex_lock(Mx), 0);
    px_once_do(O, failing_action, NULL);         /* parks behind the runner */
    return NULL;
}

SPEC(deadlock_report_names_the_runner_and_prints_the_cycle)
{
    O = px_once_new();
    Mx = px_mutex_new();
    px_sched *s = run_to_deadlock((px_fiber_fn[]){ stuck_runner, stuck_holder, NULL });
    check_has("fiber %llu: parked on \"Once init\", waits on once@%p held by fiber %llu\n",
              (unsigned long long)px_fiber_number(holder_id), (void *)O, (unsigned long long)px_fiber_number(runner_id));
    check_has("-> once@%p (\"Once init\") held by fiber %llu", (void *)O,
              (unsigned long long)px_fiber_number(runner_id));
    check_has("-> mutex@%p (\"Mutex lock\") held by fiber %llu", (void *)Mx,
              (unsigned long long)px_fiber_number(holder_id));
    CHECK_EQ(px_once_free(O), PX_EBUSY);
    px_sched_free(s);                            /* discards runner and waiter */
    CHECK_EQ(px_once_free(O), 0);
    CHECK_EQ(px_mutex_free(Mx), 0);
}

SPEC(the_documented_example_runs)
{
    CHECK_EQ(sync_once_example(), 0);
}

SPECS(runs_the_action_once_among_5_racers_who_wait_for_it,
      later_callers_return_at_once_without_running_it,
      a_failed_action_is_done_and_never_retried,
      reentrant_do_from_inside_the_action_is_edeadlk,
      a_runner_ending_inside_the_action_ends_it,
      begin_and_end_run_the_action_in_two_steps,
      end_by_a_fiber_that_did_not_begin_is_eperm,
      done_works_anywhere_and_do_without_an_action_is_einval,
      deadlock_report_names_the_runner_and_prints_the_cycle,
      the_documented_example_runs)
