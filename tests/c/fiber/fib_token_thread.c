/*
** fib_token_thread.c -- a token may be cancelled from any thread, so in px_run
** (which gives no scheduler to hold) a fiber parked in a cancel scope is not
** deadlocked: the run waits for the cancel another thread makes, and the fiber
** gets PX_ECANCELED.  With px_sched_run the caller holds the scheduler for
** that thread (px_sched_hold), as for a px_wake or px_sched_post.  A real
** deadlock is still one: with no cancel scope open, or once the scope closed,
** px_run / px_sched_run return PX_EDEADLK with the report.
*/
#include <string.h>

#include "../spec.h"

static px_latch parking;     /* set by the fiber just before it parks */
static px_token *tok;
static int got;

/* Cancels once the fiber is about to park; then lets go of `arg` (a held
** scheduler) if there is one. */
static void *canceller(void *arg)
{
    EV_WAIT(&parking, 1);
    sleep_ns(PX_MSEC(50));   /* let the scheduler find nothing else to do */
    CHECK_EQ(px_token_cancel(tok), 1);
    if (arg)
        CHECK_EQ(px_sched_unhold(arg), 0);
    return NULL;
}

static int park_in_scope(void *arg)
{
    (void)arg;
    ev_set(&parking);
    return px_park("waits for a cancel from another thread", NULL, NULL);
}

static void *cancelled_main(void *arg)
{
    (void)arg;
    got = px_with_cancel(tok, park_in_scope, NULL);
    return (void *)&got;
}

/* Each case: a fresh token and latch, and `got` cleared. */
static void begin(void)
{
    ev_init(&parking);
    tok = px_token_new();
    CHECK(tok != NULL);
    got = 0;
}

static void end(void)
{
    px_token_free(tok);
    ev_destroy(&parking);
}

/* The case of the issue: px_run, the token cancelled from a thread. */
SPEC(px_run_waits_for_cancel)
{
    pthread_t th;
    void *r = NULL;
    begin();
    CHECK_EQ(pthread_create(&th, NULL, canceller, NULL), 0);
    CHECK_EQ(px_run(cancelled_main, NULL, &r), 0);
    CHECK_EQ(got, PX_ECANCELED);
    CHECK(r == (void *)&got);
    CHECK_EQ(pthread_join(th, NULL), 0);
    end();
}

/* The same with the push form and a second fiber that waits on the first. */
static void *pushed(void *arg)
{
    (void)arg;
    CHECK_EQ(px_scope_push_cancel(tok), 0);
    ev_set(&parking);
    got = px_park("pushed scope", NULL, NULL);
    CHECK_EQ(px_scope_pop(), PX_ECANCELED);
    return NULL;
}

static void *joins_pushed(void *arg)
{
    (void)arg;
    px_fiber *f = px_spawn(pushed, NULL);
    CHECK(f != NULL);
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
    return NULL;
}

SPEC(push_form_and_joiner)
{
    pthread_t th;
    begin();
    CHECK_EQ(pthread_create(&th, NULL, canceller, NULL), 0);
    CHECK_EQ(px_run(joins_pushed, NULL, NULL), 0);
    CHECK_EQ(got, PX_ECANCELED);
    CHECK_EQ(pthread_join(th, NULL), 0);
    end();
}

/* Runs cancelled_main on s with the canceller thread given `held` (s if the
** caller holds s for it, else NULL): the fiber is cancelled; s is freed. */
static void sched_run_cancelled(px_sched *s, px_sched *held)
{
    pthread_t th;
    CHECK_EQ(px_sched_post(s, cancelled_main, NULL), 0);
    CHECK_EQ(pthread_create(&th, NULL, canceller, held), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(got, PX_ECANCELED);
    CHECK_EQ(pthread_join(th, NULL), 0);
    px_sched_free(s);
}

/* px_sched_run: the caller holds the scheduler for the cancelling thread. */
SPEC(sched_run_with_a_hold)
{
    begin();
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_hold(s), 0);
    sched_run_cancelled(s, s);
    end();
}

/* px_sched_run of a scheduler made with token_scopes_hold: no hold, as px_run. */
SPEC(token_scopes_hold_option)
{
    begin();
    px_sched_opts o = { .token_scopes_hold = 1 };
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    sched_run_cancelled(s, NULL);
    end();
}

/* -- real deadlocks -------------------------------------------------------- */

static uint64_t stuck_id;
static int stuck_count;

static void *stuck(void *arg)
{
    (void)arg;
    stuck_id = px_self();
    stuck_count++;
    px_park("parked for good", NULL, NULL);
    return NULL;
}

static int scope_then_return(void *arg)
{
    (void)arg;
    return 0;
}

/* Opened and closed a cancel scope, then parks for good outside any. */
static void *scope_closed_then_stuck(void *arg)
{
    CHECK_EQ(px_with_cancel(tok, scope_then_return, NULL), 0);
    CHECK_EQ(px_scope_push_cancel(tok), 0);
    CHECK_EQ(px_scope_pop(), 0);
    return stuck(arg);
}

/* Was cancelled in its scope, left it, then parks for good. */
static void *cancelled_then_stuck(void *arg)
{
    CHECK_EQ(px_with_cancel(tok, park_in_scope, NULL), PX_ECANCELED);
    return stuck(arg);
}

static void check_report(void)
{
    char want[64];
    CHECK_EQ(reports, 1);
    CHECK(strstr(report, "deadlock detected") != NULL);
    snprintf(want, sizeof want, "fiber %llu: parked on \"parked for good\"",
             (unsigned long long)px_fiber_number(stuck_id));
    CHECK(strstr(report, want) != NULL);
}

SPEC(real_deadlocks)
{
    tok = px_token_new();
    CHECK(tok != NULL);
    /* px_run: the report goes to stderr; the code is the promise. */
    CHECK_EQ(px_run(stuck, NULL, NULL), PX_EDEADLK);
    CHECK_EQ(px_run(scope_closed_then_stuck, NULL, NULL), PX_EDEADLK);

    px_sched_opts o = { 0 };
    o.on_deadlock = on_deadlock;
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    reports = 0;
    CHECK_EQ(px_sched_post(s, scope_closed_then_stuck, NULL), 0);
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);
    check_report();
    px_sched_free(s);

    /* cancelled from another thread, then a real deadlock outside the scope:
    ** px_run waited for the cancel, then reported */
    pthread_t th;
    ev_init(&parking);
    stuck_count = 0;
    CHECK_EQ(pthread_create(&th, NULL, canceller, NULL), 0);
    CHECK_EQ(px_run(cancelled_then_stuck, NULL, NULL), PX_EDEADLK);
    CHECK_EQ(stuck_count, 1);
    CHECK_EQ(pthread_join(th, NULL), 0);
    ev_destroy(&parking);
    px_token_free(tok);

    /* the same with px_sched_run and a hold the canceller lets go of */
    ev_init(&parking);
    tok = px_token_new();
    CHECK(tok != NULL);
    s = px_sched_new(&o);
    CHECK(s != NULL);
    reports = 0;
    stuck_count = 0;
    CHECK_EQ(px_sched_hold(s), 0);
    CHECK_EQ(pthread_create(&th, NULL, canceller, s), 0);
    CHECK_EQ(px_sched_post(s, cancelled_then_stuck, NULL), 0);
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);
    check_report();
    CHECK_EQ(stuck_count, 1);
    CHECK_EQ(pthread_join(th, NULL), 0);
    px_sched_free(s);
    ev_destroy(&parking);
    px_token_free(tok);

    /* px_sched_run without a hold: a fiber in a cancel scope and nothing
    ** else is a deadlock, reported as before (the caller may cancel and run
    ** again) */
    tok = px_token_new();
    CHECK(tok != NULL);
    ev_init(&parking);
    s = px_sched_new(&o);
    CHECK(s != NULL);
    reports = 0;
    got = 0;
    CHECK_EQ(px_sched_post(s, cancelled_main, NULL), 0);
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);
    CHECK_EQ(reports, 1);
    CHECK(strstr(report, "waits for a cancel from another thread") != NULL);
    CHECK_EQ(px_token_cancel(tok), 1);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(got, PX_ECANCELED);
    px_sched_free(s);
    ev_destroy(&parking);
    px_token_free(tok);
}

SPECS(px_run_waits_for_cancel, push_form_and_joiner, sched_run_with_a_hold,
      token_scopes_hold_option, real_deadlocks)
