/*
** stray_wake.c -- px_wake is public and takes any id: a wake that no release
** sent must not end a wait.  The waiter waits on, still queued, and gets what
** it waited for only when it is handed over.
*/
#define FIBERS_GATE_NO_MAIN
#include "fibers_gate.c"

#include "spec.h"

static px_mutex *m;
static gate g;
static int lock_result = 1, take_result = 1;
static void *join_result;

static void *locker(void *arg)
{
    (void)arg;
    lock_result = px_mutex_lock(m);
    CHECK_EQ(px_mutex_owner(m), px_self());
    CHECK_EQ(px_mutex_unlock(m), 0);
    return NULL;
}

static void *taker(void *arg)
{
    (void)arg;
    take_result = gate_take(&g);
    CHECK_EQ(g.owner, px_self());
    gate_give(&g);
    return NULL;
}

static void *child(void *arg)
{
    (void)arg;
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_yield(), 0);
    return (void *)7;
}

static void *joiner(void *arg)
{
    CHECK_EQ(px_join(arg, &join_result), 0);
    return NULL;
}

static void finish(px_fiber *f)
{
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
}

static void *mutex_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(m), 0);
    px_fiber *l = px_spawn(locker, NULL);
    CHECK_EQ(px_yield(), 0);                     /* it queues */
    CHECK_EQ(px_wake(px_fiber_id(l)), 1);        /* a wake nobody granted */
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(lock_result, 1);                    /* still waiting ... */
    CHECK_EQ(px_mutex_waiters(m), 1);            /* ... and still queued */
    CHECK_EQ(px_mutex_unlock(m), 0);
    finish(l);
    CHECK_EQ(lock_result, 0);
    return NULL;
}

SPEC(a_stray_wake_does_not_end_a_mutex_lock)
{
    CHECK((m = px_mutex_new()) != NULL);
    CHECK_EQ(px_run(mutex_main, NULL, NULL), 0);
    CHECK_EQ(px_mutex_free(m), 0);
}

static void *join_main(void *arg)
{
    (void)arg;
    px_fiber *c = px_spawn(child, NULL);
    px_fiber *j = px_spawn(joiner, c);
    CHECK_EQ(px_yield(), 0);                     /* the joiner parks */
    CHECK_EQ(px_wake(px_fiber_id(j)), 1);
    finish(j);
    CHECK(join_result == (void *)7);             /* it waited for the real end */
    finish(c);
    return NULL;
}

SPEC(a_stray_wake_does_not_end_a_join)
{
    CHECK_EQ(px_run(join_main, NULL, NULL), 0);
}

static void *gate_main(void *arg)
{
    (void)arg;
    CHECK_EQ(gate_take(&g), 0);
    px_fiber *t = px_spawn(taker, NULL);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_wake(px_fiber_id(t)), 1);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(take_result, 1);
    CHECK_EQ(gate_waiters(&g), 1);
    gate_give(&g);
    finish(t);
    CHECK_EQ(take_result, 0);
    return NULL;
}

SPEC(a_stray_wake_does_not_end_a_gate_take)
{
    CHECK_EQ(px_run(gate_main, NULL, NULL), 0);
    free(g.waiters);
}

SPECS(a_stray_wake_does_not_end_a_mutex_lock,
      a_stray_wake_does_not_end_a_join,
      a_stray_wake_does_not_end_a_gate_take)
