/*
** fib_scopes.c -- every kind of park interrupted by a timeout and by a token,
** leaving nothing queued; nested scopes take the nearest deadline; a scope that
** fired interrupts the next park at once; the push/pop form; a grant that races
** an interrupt is passed on by dereg.
*/
#define FIBERS_GATE_NO_MAIN
#include "fibers_gate.c"

#include "../check.h"

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

static void *holder(void *arg)
{
    (void)arg;
    CHECK_EQ(gate_take(&g), 0);
    CHECK_EQ(px_park("hold", NULL, NULL), 0);
    gate_give(&g);
    return NULL;
}

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

static int fired_then_park(void *arg)
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

/* The grant race: the holder gives the gate to a waiter whose scope fires in
** the same tick, before the waiter runs; its dereg must pass the gate on. */
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

static uint64_t main_id;

static void *waker(void *arg)
{
    (void)arg;
    CHECK_EQ(px_wake(main_id), 1);      /* a park, not taken for a sleep */
    return NULL;
}

/* A sleep that a fired scope ended before it began leaves no deadline behind:
** the next park is woken by px_wake, not by the sleep's old deadline. */
static void sleep_in_a_fired_scope_leaves_nothing(void)
{
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
}

static void *main_fiber(void *arg)
{
    (void)arg;
    px_fiber *h = px_spawn(holder, NULL);           /* holds the gate */
    int64_t long_sleep = PX_SEC(10);
    px_fiber *stuck = px_spawn(forever, NULL);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(g.owner, px_fiber_id(h));

    interrupt_both(take_body, NULL);
    CHECK_EQ(gate_waiters(&g), 0);                  /* nothing left queued */
    interrupt_both(sleep_body, &long_sleep);
    interrupt_both(park_body, NULL);
    interrupt_both(join_body, stuck);
    CHECK_EQ(gate_waiters(&g), 0);

    /* Nested: the nearer deadline wins whichever scope it belongs to. */
    int64_t t0 = px_now();
    CHECK_EQ(px_with_timeout(PX_MSEC(15), inner_long, NULL), PX_ETIMEDOUT);
    int64_t took = px_now() - t0;
    CHECK_GE(took, PX_MSEC(15));
    CHECK(took < PX_SEC(5));
    t0 = px_now();
    CHECK_EQ(px_with_timeout(PX_SEC(10), inner_short, NULL), 0);
    CHECK_GE(t_nested - t0, PX_MSEC(10));
    CHECK(t_nested - t0 < PX_SEC(5));

    CHECK_EQ(px_with_timeout(PX_MSEC(30), fired_then_park, NULL), PX_ETIMEDOUT);
    sleep_in_a_fired_scope_leaves_nothing();

    /* Push/pop. */
    CHECK_EQ(px_scope_pop(), PX_EINVAL);
    CHECK_EQ(px_scope_push_timeout(PX_MSEC(10)), 0);
    CHECK_EQ(gate_take(&g), PX_ETIMEDOUT);
    CHECK_EQ(px_park_result(), PX_ETIMEDOUT);
    CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
    px_token *t = px_token_new();
    CHECK_EQ(px_scope_push_cancel(t), 0);
    CHECK_EQ(px_scope_push_timeout(PX_SEC(10)), 0);
    CHECK_EQ(px_token_cancel(t), 1);
    CHECK_EQ(gate_take(&g), PX_ECANCELED);
    CHECK_EQ(px_scope_pop(), 0);                    /* the timeout scope never fired */
    CHECK_EQ(px_scope_pop(), PX_ECANCELED);
    px_token_free(t);
    CHECK_EQ(px_scope_push_timeout(-1), PX_EINVAL);
    CHECK_EQ(px_scope_push_cancel(NULL), PX_EINVAL);
    CHECK_EQ(px_with_timeout(-1, take_body, NULL), PX_EINVAL);
    CHECK_EQ(gate_waiters(&g), 0);

    /* The grant race. */
    CHECK_EQ(px_wake(px_fiber_id(h)), 1);
    CHECK_EQ(px_join(h, NULL), 0);
    px_fiber_release(h);
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

    px_wake(px_fiber_id(stuck));
    CHECK_EQ(px_join(stuck, NULL), 0);
    px_fiber_release(stuck);
    return NULL;
}

int main(void)
{
    CHECK_EQ(px_run(main_fiber, NULL, NULL), 0);
    CHECK_EQ(px_with_timeout(1, take_body, NULL), PX_ENOFIBER);
    CHECK_EQ(px_scope_push_timeout(1), PX_ENOFIBER);
    CHECK_EQ(px_scope_pop(), PX_ENOFIBER);
    free(g.waiters);
    printf("fib_scopes: ok\n");
    return 0;
}
