/*
** fib_scopes.c -- the scopes and tokens, one SPEC (one ctest fiber.<name>)
** each: every kind of park interrupted by a timeout and by a token, leaving
** nothing queued; nested scopes (the nearer deadline wins whichever scope it
** belongs to); a scope that fired interrupts the next park at once; the
** push/pop form; a grant that races an interrupt is passed on by dereg; a
** token off-fiber; what px_with_timeout returns when it did not fire.
*/
#define FIBERS_GATE_NO_MAIN
#include "fibers_gate.c"

#include "../spec.h"

static gate g;
static px_token *tok;

static int take_body(void *arg) { (void)arg; return gate_take(&g); }
static int sleep_body(void *arg) { return px_sleep(*(int64_t *)arg); }
static int park_body(void *arg) { (void)arg; return px_park("plain park", NULL, NULL); }

static void *forever(void *arg)
{
    (void)arg;
    px_park("forever", NULL, NULL);
    return NULL;
}

static int join_body(void *arg) { return px_join(arg, NULL); }

/* Runs body under a 20 ms timeout, then under a token another fiber cancels. */
static void *canceller(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sleep(PX_MSEC(5)), 0);
    CHECK_EQ(px_token_cancel(tok), 1);
    CHECK_EQ(px_token_cancel(tok), 0);
    return NULL;
}

static void interrupt_both(px_scope_fn body, void *arg)
{
    check_times_out(PX_MSEC(20), body, arg);
    tok = px_token_new();
    px_fiber *c = px_spawn(canceller, NULL);
    CHECK_EQ(px_with_cancel(tok, body, arg), PX_ECANCELED);
    CHECK(px_token_cancelled(tok));
    CHECK_EQ(px_join(c, NULL), 0);
    px_fiber_release(c);
    /* A token cancelled already interrupts at once. */
    CHECK_EQ(px_with_cancel(tok, body, arg), PX_ECANCELED);
    px_token_free(tok);
}

/* Runs fn as the main fiber of a px_run; the gate is left as it was found. */
static void run(void *(*fn)(void *))
{
    CHECK_EQ(px_run(fn, NULL, NULL), 0);
    CHECK_EQ(g.owner, 0);
    CHECK_EQ(gate_waiters(&g), 0);
}

static void *gate_holder(void *arg)
{
    (void)arg;
    CHECK_EQ(gate_take(&g), 0);
    CHECK_EQ(px_park("hold", NULL, NULL), 0);
    gate_give(&g);
    return NULL;
}

/* A fiber that holds the gate until let_go(it): a gate_take parks meanwhile. */
static px_fiber *hold_gate(void)
{
    px_fiber *h = px_spawn(gate_holder, NULL);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(g.owner, px_fiber_id(h));
    return h;
}

static void let_go(px_fiber *h)
{
    CHECK_EQ(px_wake(px_fiber_id(h)), 1);
    CHECK_EQ(px_join(h, NULL), 0);
    px_fiber_release(h);
}

/* -- every kind of park interrupted, nothing left queued ------------------- */

/* The px_park gate (docs/examples/fibers_gate.c) held by another fiber, and a
** bare px_park. */
static void *park_and_gate_take_main(void *arg)
{
    (void)arg;
    px_fiber *h = hold_gate();
    interrupt_both(take_body, NULL);
    CHECK_EQ(gate_waiters(&g), 0);                  /* nothing left queued */
    interrupt_both(park_body, NULL);
    CHECK_EQ(gate_waiters(&g), 0);
    let_go(h);
    return NULL;
}

SPEC(interrupt_both_park_and_gate_take) { run(park_and_gate_take_main); }

static void *sleep_main(void *arg)
{
    (void)arg;
    int64_t long_sleep = PX_SEC(10);
    interrupt_both(sleep_body, &long_sleep);
    return NULL;
}

SPEC(interrupt_both_sleep) { run(sleep_main); }

static void *join_main(void *arg)
{
    (void)arg;
    px_fiber *stuck = px_spawn(forever, NULL);
    CHECK_EQ(px_yield(), 0);
    interrupt_both(join_body, stuck);
    px_wake(px_fiber_id(stuck));
    CHECK_EQ(px_join(stuck, NULL), 0);
    px_fiber_release(stuck);
    return NULL;
}

SPEC(interrupt_both_join) { run(join_main); }

static px_mutex *M;
static void *mutex_holder(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(M), 0);
    CHECK_EQ(px_park("hold the mutex", NULL, NULL), 0);
    CHECK_EQ(px_mutex_unlock(M), 0);
    return NULL;
}
static int lock_body(void *arg) { (void)arg; return px_mutex_lock(M); }

static void *mutex_main(void *arg)
{
    (void)arg;
    M = px_mutex_new();
    CHECK(M != NULL);
    px_fiber *h = px_spawn(mutex_holder, NULL);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_mutex_owner(M), px_fiber_id(h));
    interrupt_both(lock_body, NULL);
    CHECK_EQ(px_mutex_waiters(M), 0);               /* nothing left queued */
    CHECK_EQ(px_mutex_owner(M), px_fiber_id(h));
    CHECK_EQ(px_wake(px_fiber_id(h)), 1);
    CHECK_EQ(px_join(h, NULL), 0);
    px_fiber_release(h);
    CHECK_EQ(px_mutex_lock(M), 0);                  /* nothing stranded */
    CHECK_EQ(px_mutex_owner(M), px_self());
    CHECK_EQ(px_mutex_unlock(M), 0);
    CHECK_EQ(px_mutex_free(M), 0);
    return NULL;
}

SPEC(interrupt_both_mutex_lock) { run(mutex_main); }

static px_chan *CH;
static int recv_body(void *arg) { return px_chan_recv(CH, arg); }
static void *receiver(void *arg)
{
    void *v = NULL;
    CHECK_EQ(px_chan_recv(CH, &v), 0);
    *(void **)arg = v;
    return NULL;
}

static void *chan_main(void *arg)
{
    (void)arg;
    CH = px_chan_new(0);
    CHECK(CH != NULL);
    void *v = NULL;
    interrupt_both(recv_body, &v);
    CHECK(v == NULL);
    void *got = NULL;
    px_fiber *r = px_spawn(receiver, &got);
    CHECK_EQ(px_chan_send(CH, (void *)&CH), 0);     /* the next receiver gets it */
    CHECK_EQ(px_join(r, NULL), 0);
    px_fiber_release(r);
    CHECK(got == (void *)&CH);
    CHECK_EQ(px_chan_free(CH), 0);
    return NULL;
}

SPEC(interrupt_both_channel_recv) { run(chan_main); }

/* A join under a timeout, then under a token: each leaves the joined fiber's
** joiners, and a later joiner still gets its result. */
static px_event *E;
static void *waits_for_e(void *arg)
{
    (void)arg;
    CHECK_EQ(px_event_wait(E), 0);
    return (void *)&E;
}
static void *timed_joiner(void *arg)
{
    CHECK_EQ(px_with_timeout(PX_MSEC(20), join_body, arg), PX_ETIMEDOUT);
    return NULL;
}
static void *cancelled_joiner(void *arg)
{
    CHECK_EQ(px_with_cancel(tok, join_body, arg), PX_ECANCELED);
    return NULL;
}

static void *nothing_queued_main(void *arg)
{
    (void)arg;
    E = px_event_new();
    tok = px_token_new();
    px_fiber *t = px_spawn(waits_for_e, NULL);
    px_fiber *a = px_spawn(timed_joiner, t);
    px_fiber *b = px_spawn(cancelled_joiner, t);
    CHECK_EQ(px_yield(), 0);                        /* both join */
    CHECK_EQ(px_token_cancel(tok), 1);
    CHECK_EQ(px_join(b, NULL), 0);
    CHECK_EQ(px_join(a, NULL), 0);
    px_fiber_release(a);
    px_fiber_release(b);
    CHECK_EQ(px_event_set(E), 1);                   /* t was the one waiter */
    void *r = NULL;
    CHECK_EQ(px_join(t, &r), 0);
    CHECK(r == (void *)&E);
    px_fiber_release(t);
    px_token_free(tok);
    CHECK_EQ(px_event_free(E), 0);
    return NULL;
}

SPEC(timed_out_or_cancelled_wait_leaves_nothing_queued) { run(nothing_queued_main); }

/* -- nested scopes: the nearer deadline wins whichever scope it belongs to -- */

static int64_t t_nested;
static int inner_long(void *arg)
{
    (void)arg;
    return px_with_timeout(PX_SEC(10), take_body, NULL);
}
static int inner_short(void *arg)
{
    (void)arg;
    int r = px_with_timeout(PX_MSEC(10), take_body, NULL);
    CHECK_EQ(r, PX_ETIMEDOUT);
    t_nested = px_now();
    return 0;   /* the outer scope has not fired */
}

/* The outer scope's deadline (then its token) comes first: the inner scope
** passes it through and the outer one is the one that fired. */
static void *outer_main(void *arg)
{
    (void)arg;
    px_fiber *h = hold_gate();                      /* takes park */
    int64_t t0 = px_now();
    CHECK_EQ(px_with_timeout(PX_MSEC(15), inner_long, NULL), PX_ETIMEDOUT);
    int64_t took = px_now() - t0;
    CHECK_GE(took, PX_MSEC(15));
    CHECK(took < PX_SEC(5));

    px_token *t = px_token_new();
    CHECK_EQ(px_scope_push_cancel(t), 0);
    CHECK_EQ(px_scope_push_timeout(PX_SEC(10)), 0);
    CHECK_EQ(px_token_cancel(t), 1);
    CHECK_EQ(gate_take(&g), PX_ECANCELED);
    CHECK_EQ(px_scope_pop(), 0);                    /* the timeout scope never fired */
    CHECK_EQ(px_scope_pop(), PX_ECANCELED);
    px_token_free(t);
    let_go(h);
    return NULL;
}

SPEC(an_outer_scopes_interrupt_passes_through_the_inner_one) { run(outer_main); }

static void *inner_main(void *arg)
{
    (void)arg;
    px_fiber *h = hold_gate();
    int64_t t0 = px_now();
    CHECK_EQ(px_with_timeout(PX_SEC(10), inner_short, NULL), 0);
    CHECK_GE(t_nested - t0, PX_MSEC(10));
    CHECK(t_nested - t0 < PX_SEC(5));
    let_go(h);
    return NULL;
}

SPEC(nested_scopes_the_inner_deadline_fires_and_the_outer_goes_on) { run(inner_main); }

/* -- a scope that fired ------------------------------------------------------- */

static int fired_then_park_body(void *arg)
{
    (void)arg;
    int64_t ns = PX_MSEC(30);
    CHECK_EQ(sleep_body(&ns), PX_ETIMEDOUT);       /* the scope fires here */
    int64_t t0 = px_now();
    CHECK_EQ(gate_take(&g), PX_ETIMEDOUT);          /* ... and again at once */
    CHECK_EQ(px_park("again", NULL, NULL), PX_ETIMEDOUT);
    CHECK(px_now() - t0 < PX_MSEC(5));
    CHECK_EQ(gate_waiters(&g), 0);
    return PX_ETIMEDOUT;
}

static void *fired_then_park_main(void *arg)
{
    (void)arg;
    px_fiber *h = hold_gate();
    CHECK_EQ(px_with_timeout(PX_MSEC(30), fired_then_park_body, NULL), PX_ETIMEDOUT);
    let_go(h);
    return NULL;
}

SPEC(fired_then_park) { run(fired_then_park_main); }

static uint64_t main_id;

static void *waker(void *arg)
{
    (void)arg;
    CHECK_EQ(px_wake(main_id), 1);      /* a park, not taken for a sleep */
    return NULL;
}

/* A sleep that a fired scope ended before it began leaves no deadline behind:
** the next park is woken by px_wake, not by the sleep's old deadline. */
static void *sleep_in_a_fired_scope_main(void *arg)
{
    (void)arg;
    px_token *t = px_token_new();
    CHECK_EQ(px_token_cancel(t), 1);
    CHECK_EQ(px_scope_push_cancel(t), 0);
    CHECK_EQ(px_sleep(PX_MSEC(20)), PX_ECANCELED);
    CHECK_EQ(px_scope_pop(), PX_ECANCELED);
    px_token_free(t);
    main_id = px_self();
    px_fiber *w = px_spawn(waker, NULL);
    CHECK_EQ(px_park("woken by waker", NULL, NULL), 0);
    CHECK_EQ(px_join(w, NULL), 0);
    px_fiber_release(w);
    return NULL;
}

SPEC(a_sleep_in_a_fired_scope_leaves_no_deadline_behind) { run(sleep_in_a_fired_scope_main); }

/* The wait itself returns the interrupt: what body does before it ran, what
** it does after the wait returned does too (nothing is unwound). */
static char where[64];
static int interrupted_wait_body(void *arg)
{
    (void)arg;
    strcat(where, "before ");
    if (px_sleep(PX_SEC(30)) == PX_ETIMEDOUT) {
        strcat(where, "at-the-sleep");
        return PX_ETIMEDOUT;
    }
    strcat(where, "after");
    return 0;
}

static void *interrupted_wait_main(void *arg)
{
    (void)arg;
    where[0] = 0;
    CHECK_EQ(px_with_timeout(PX_MSEC(20), interrupted_wait_body, NULL), PX_ETIMEDOUT);
    CHECK(strcmp(where, "before at-the-sleep") == 0);
    return NULL;
}

SPEC(timeout_raises_at_the_interrupted_wait) { run(interrupted_wait_main); }

/* -- the push/pop form, and the refusals ------------------------------------ */

static void *push_pop_main(void *arg)
{
    (void)arg;
    px_fiber *h = hold_gate();
    CHECK_EQ(px_scope_pop(), PX_EINVAL);
    CHECK_EQ(px_scope_push_timeout(PX_MSEC(10)), 0);
    CHECK_EQ(gate_take(&g), PX_ETIMEDOUT);
    CHECK_EQ(px_park_result(), PX_ETIMEDOUT);
    CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
    CHECK_EQ(px_scope_push_timeout(-1), PX_EINVAL);
    CHECK_EQ(px_scope_push_cancel(NULL), PX_EINVAL);
    CHECK_EQ(px_with_timeout(-1, take_body, NULL), PX_EINVAL);
    CHECK_EQ(gate_waiters(&g), 0);
    let_go(h);
    return NULL;
}

SPEC(scope_push_and_pop)
{
    run(push_pop_main);
    CHECK_EQ(px_with_timeout(1, take_body, NULL), PX_ENOFIBER);
    CHECK_EQ(px_scope_push_timeout(1), PX_ENOFIBER);
    CHECK_EQ(px_scope_pop(), PX_ENOFIBER);
}

/* -- the grant race ------------------------------------------------------------ */

/* The holder gives the gate to a waiter whose scope fires in the same tick,
** before the waiter runs; its dereg must pass the gate on. */
static int racer_result;
static void *racer(void *arg)
{
    (void)arg;
    racer_result = px_with_timeout(PX_MSEC(10), take_body, NULL);
    return NULL;
}
static void *third(void *arg)
{
    (void)arg;
    CHECK_EQ(gate_take(&g), 0);
    CHECK_EQ(g.owner, px_self());
    gate_give(&g);
    return NULL;
}

static void *grant_race_main(void *arg)
{
    (void)arg;
    CHECK_EQ(gate_take(&g), 0);                     /* now we hold it */
    px_fiber *r = px_spawn(racer, NULL);
    px_fiber *th = px_spawn(third, NULL);
    CHECK_EQ(px_yield(), 0);                        /* both queue on the gate */
    CHECK_EQ(gate_waiters(&g), 2);
    CHECK_EQ(px_sleep(PX_MSEC(10)), 0);             /* racer's deadline is due too */
    gate_give(&g);                                  /* to racer, not yet run */
    CHECK_EQ(px_join(r, NULL), 0);
    CHECK_EQ(px_join(th, NULL), 0);
    px_fiber_release(r);
    px_fiber_release(th);
    CHECK_EQ(g.owner, 0);                           /* third got it, gave it back */
    CHECK_EQ(gate_waiters(&g), 0);
    CHECK(racer_result == 0 || racer_result == PX_ETIMEDOUT);
    return NULL;
}

SPEC(a_grant_racing_a_timeout_is_passed_on) { run(grant_race_main); }

/* -- tokens and px_with_timeout's result ------------------------------------- */

/* A token is made, cancelled (once) and read off-fiber. */
SPEC(cancellation_token_off_fiber)
{
    CHECK_EQ(px_self(), 0);
    px_token *t = px_token_new();
    CHECK(t != NULL);
    CHECK(!px_token_cancelled(t));
    CHECK_EQ(px_token_cancel(t), 1);
    CHECK_EQ(px_token_cancel(t), 0);
    CHECK(px_token_cancelled(t));
    px_token_free(t);
}

static int returns_its_arg(void *arg)
{
    CHECK_EQ(px_sleep(PX_MSEC(1)), 0);
    return (int)(intptr_t)arg;
}

static void *fns_result_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_with_timeout(PX_SEC(1), returns_its_arg, (void *)(intptr_t)7), 7);
    CHECK_EQ(px_with_timeout(PX_SEC(1), returns_its_arg, (void *)(intptr_t)0), 0);
    tok = px_token_new();
    CHECK_EQ(px_with_cancel(tok, returns_its_arg, (void *)(intptr_t)5), 5);
    px_token_free(tok);
    return NULL;
}

SPEC(timeout_returns_fns_results_when_it_did_not_fire) { run(fns_result_main); }

static void teardown(void)
{
    free(g.waiters);
}

SPECS_AROUND(NULL, teardown, interrupt_both_park_and_gate_take, interrupt_both_sleep,
             interrupt_both_join, interrupt_both_mutex_lock, interrupt_both_channel_recv,
             timed_out_or_cancelled_wait_leaves_nothing_queued,
             an_outer_scopes_interrupt_passes_through_the_inner_one,
             nested_scopes_the_inner_deadline_fires_and_the_outer_goes_on, fired_then_park,
             a_sleep_in_a_fired_scope_leaves_no_deadline_behind,
             timeout_raises_at_the_interrupted_wait, scope_push_and_pop,
             a_grant_racing_a_timeout_is_passed_on, cancellation_token_off_fiber,
             timeout_returns_fns_results_when_it_did_not_fire)
