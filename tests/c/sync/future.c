/*
** future.c -- the conformance specification of futures (px_future_*,
** px_fiber_future).
**
** Settlements from other threads synchronize on what the waiters show
** (px_future's own state, an atomic the waiter sets before it waits); the
** only sleeps are waits that a settlement or a scope ends.
*/
#include <sched.h>

#include "sync_kit.h"

#define V(n) ((void *)(uintptr_t)(n))
#define N(p) ((uintptr_t)(p))

static void run(px_fiber_fn main)
{
    CHECK_EQ(px_run(main, NULL, NULL), 0);
}

static px_future *FU;
static int woke;

static void *wait_value(void *arg)
{
    void *v = NULL;
    CHECK_EQ(px_future_wait(arg, &v), 0);
    woke++;
    return v;
}

static void *value_main(void *arg)
{
    (void)arg;
    px_future *fu = px_future_new();
    CHECK_EQ(px_future_done(fu), 0);
    px_fiber *f = px_spawn(wait_value, fu);
    CHECK_EQ(px_yield(), 0);                   /* it waits */
    CHECK_EQ(px_future_set_result(fu, V(5)), 0);
    void *v;
    CHECK_EQ(px_join(f, &v), 0);
    px_fiber_release(f);
    CHECK_EQ(N(v), 5);
    CHECK_EQ(px_future_done(fu), 1);
    CHECK_EQ(px_future_wait(fu, &v), 0);       /* settled: at once, as often as asked */
    CHECK_EQ(N(v), 5);
    CHECK_EQ(px_future_wait(fu, NULL), 0);
    CHECK_EQ(px_future_free(fu), 0);
    return NULL;
}

SPEC(wait_returns_the_value)
{
    run(value_main);
}

static void *wait_status(void *arg)
{
    return V((uintptr_t)(intptr_t)px_future_wait(arg, NULL));
}

static void *error_main(void *arg)
{
    (void)arg;
    px_future *fu = px_future_new();
    px_fiber *f[3];
    spawn_all(f, 3, wait_status, fu);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_future_set_error(fu, 77), 0);
    for (int i = 0; i < 3; i++) {
        void *r;
        CHECK_EQ(px_join(f[i], &r), 0);
        CHECK_EQ((int)(intptr_t)r, 77);
        px_fiber_release(f[i]);
    }
    void *v = V(1);
    CHECK_EQ(px_future_wait(fu, &v), 77);
    CHECK_EQ(N(v), 1);                         /* no value for a failure */
    CHECK_EQ(px_future_free(fu), 0);
    return NULL;
}

SPEC(an_error_fails_every_wait)
{
    run(error_main);
}

SPEC(a_second_settlement_is_refused)
{
    px_future *fu = px_future_new();
    CHECK_EQ(px_future_set_result(fu, V(1)), 0);
    CHECK_EQ(px_future_set_result(fu, V(2)), PX_EBUSY);
    CHECK_EQ(px_future_set_error(fu, 3), PX_EBUSY);
    void *v;
    CHECK_EQ(px_future_wait(fu, &v), 0);       /* settled: answers off-fiber too */
    CHECK_EQ(N(v), 1);
    CHECK_EQ(px_future_free(fu), 0);
    fu = px_future_new();
    CHECK_EQ(px_future_set_error(fu, 3), 0);
    CHECK_EQ(px_future_set_result(fu, V(2)), PX_EBUSY);
    CHECK_EQ(px_future_wait(fu, &v), 3);
    CHECK_EQ(px_future_free(fu), 0);
}

static void *many_main(void *arg)
{
    (void)arg;
    woke = 0;
    px_future *fu = px_future_new();
    px_fiber *f[50];
    spawn_all(f, 50, wait_value, fu);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_future_set_result(fu, V(9)), 0);
    for (int i = 0; i < 50; i++) {
        void *v;
        CHECK_EQ(px_join(f[i], &v), 0);
        CHECK_EQ(N(v), 9);
        px_fiber_release(f[i]);
    }
    CHECK_EQ(woke, 50);
    CHECK_EQ(px_future_free(fu), 0);
    return NULL;
}

SPEC(many_fibers_wait_for_one_future)
{
    run(many_main);
}

/* -- other threads ------------------------------------------------------------ */

static atomic_int waiting;

static void *settle_later(void *arg)
{
    while (!atomic_load(&waiting))
        sched_yield();
    CHECK_EQ(px_future_set_result(arg, V(31)), 0);
    return NULL;
}

static void *thread_main(void *arg)
{
    (void)arg;
    for (int round = 0; round < 50; round++) {
        px_future *fu = px_future_new();
        atomic_store(&waiting, 0);
        pthread_t t;
        CHECK_EQ(pthread_create(&t, NULL, settle_later, fu), 0);
        atomic_store(&waiting, 1);
        void *v;
        CHECK_EQ(px_future_wait(fu, &v), 0);   /* an outside park: no deadlock */
        CHECK_EQ(N(v), 31);
        CHECK_EQ(pthread_join(t, NULL), 0);
        CHECK_EQ(px_future_free(fu), 0);
    }
    return NULL;
}

SPEC(settled_from_another_thread)
{
    run(thread_main);
}

/* A fiber of another run waits too: a settlement wakes every scheduler. */
static void *other_run_main(void *arg)
{
    (void)arg;
    void *v;
    CHECK_EQ(px_future_wait(FU, &v), 0);
    CHECK_EQ(N(v), 31);
    return NULL;
}

static void *other_run(void *arg)
{
    (void)arg;
    run(other_run_main);
    return NULL;
}

/* -- wait_all, wait_any --------------------------------------------------------- */

static void *set_each(void *arg)
{
    px_future **fus = arg;
    for (int i = 2; i >= 0; i--) {                  /* in reverse */
        CHECK_EQ(px_yield(), 0);
        CHECK_EQ(px_future_set_result(fus[i], V(10 + i)), 0);
    }
    return NULL;
}

static void *all_main(void *arg)
{
    (void)arg;
    px_future *fus[3] = { px_future_new(), px_future_new(), px_future_new() };
    px_fiber *f = px_spawn(set_each, fus);
    void *values[3];
    CHECK_EQ(px_future_wait_all(fus, 3, values), 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(N(values[i]), 10 + i);
    join(f);
    CHECK_EQ(px_future_wait_all(fus, 0, NULL), 0);  /* nothing to wait for */
    CHECK_EQ(px_future_wait_all(fus, 3, NULL), 0);
    /* a fiber of another run waits on one of them as well */
    FU = px_future_new();
    atomic_store(&waiting, 0);
    pthread_t other, settler;
    CHECK_EQ(pthread_create(&other, NULL, other_run, NULL), 0);
    CHECK_EQ(pthread_create(&settler, NULL, settle_later, FU), 0);
    atomic_store(&waiting, 1);
    CHECK_EQ(px_future_wait(FU, NULL), 0);
    CHECK_EQ(pthread_join(settler, NULL), 0);
    CHECK_EQ(pthread_join(other, NULL), 0);      /* its run ended: its wait left FU */
    CHECK_EQ(px_future_free(FU), 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(px_future_free(fus[i]), 0);
    return NULL;
}

SPEC(wait_all_returns_values_in_input_order)
{
    run(all_main);
}

static void *fail_second(void *arg)
{
    px_future **fus = arg;
    CHECK_EQ(px_future_set_error(fus[1], 13), 0);
    CHECK_EQ(px_future_set_error(fus[2], 14), 0);
    return NULL;
}

static void *all_fail_main(void *arg)
{
    (void)arg;
    px_future *fus[3] = { px_future_new(), px_future_new(), px_future_new() };
    px_fiber *f = px_spawn(fail_second, fus);
    void *values[3] = { V(1), V(1), V(1) };
    /* fus[0] never settles: the first failure ends the wait */
    CHECK_EQ(px_future_wait_all(fus, 3, values), 13);
    CHECK_EQ(N(values[0]), 1);
    join(f);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(px_future_free(fus[i]), 0);
    return NULL;
}

SPEC(wait_all_fails_on_the_first_error)
{
    run(all_fail_main);
}

static void *set_second(void *arg)
{
    px_future **fus = arg;
    CHECK_EQ(px_future_set_result(fus[1], V(8)), 0);
    CHECK_EQ(px_future_set_result(fus[0], V(7)), 0);
    return NULL;
}

static void *any_main(void *arg)
{
    (void)arg;
    px_future *fus[3] = { px_future_new(), px_future_new(), px_future_new() };
    px_fiber *f = px_spawn(set_second, fus);
    CHECK_EQ(px_future_wait_any(fus, 3), 1);
    void *v;
    CHECK_EQ(px_future_wait(fus[1], &v), 0);
    CHECK_EQ(N(v), 8);
    join(f);
    CHECK_EQ(px_future_wait_any(fus, 3), 1);        /* both settled: the first to */
    for (int i = 0; i < 3; i++)
        CHECK_EQ(px_future_free(fus[i]), 0);        /* the waits left every future */
    return NULL;
}

SPEC(wait_any_returns_the_first_settled)
{
    run(any_main);
}

static int wait_any_2(void *arg)
{
    return px_future_wait_any(arg, 2);
}

static void *settle_racing(void *arg)
{
    while (!atomic_load(&waiting))
        ;
    for (volatile int spin = rand() % 20000; spin > 0; spin--)
        ;
    CHECK_EQ(px_future_set_result(arg, V(4)), 0);
    return NULL;
}

static void *race_main(void *arg)
{
    (void)arg;
    int settled = 0, timed_out = 0;
    for (int round = 0; round < 400; round++) {
        px_future *fus[2] = { px_future_new(), px_future_new() };
        atomic_store(&waiting, 0);
        pthread_t t;
        CHECK_EQ(pthread_create(&t, NULL, settle_racing, fus[1]), 0);
        atomic_store(&waiting, 1);
        int r = px_with_timeout(20000 * (round % 5), wait_any_2, fus);
        if (r == 1)
            settled++;
        else if (r == PX_ETIMEDOUT)
            timed_out++;
        else
            CHECK_EQ(r, 1);                         /* one or the other, nothing else */
        CHECK_EQ(pthread_join(t, NULL), 0);
        CHECK_EQ(px_future_done(fus[1]), 1);
        CHECK_EQ(px_future_free(fus[0]), 0);        /* nothing left queued either way */
        CHECK_EQ(px_future_free(fus[1]), 0);
    }
    CHECK_EQ(settled + timed_out, 400);
    return NULL;
}

SPEC(wait_any_settlement_races_a_timeout)
{
    run(race_main);
}

/* -- scopes ------------------------------------------------------------------------ */

static int wait_one(void *arg)
{
    return px_future_wait(arg, NULL);
}

static int wait_all_1(void *arg)
{
    return px_future_wait_all(arg, 1, NULL);
}

static void *scope_main(void *arg)
{
    (void)arg;
    px_future *fu = px_future_new();
    CHECK_EQ(px_with_timeout(1000000, wait_one, fu), PX_ETIMEDOUT);
    CHECK_EQ(px_with_timeout(1000000, wait_all_1, &fu), PX_ETIMEDOUT);
    px_token *t = px_token_new();
    px_token_cancel(t);
    CHECK_EQ(px_with_cancel(t, wait_one, fu), PX_ECANCELED);
    px_token_free(t);
    CHECK_EQ(px_future_done(fu), 0);
    CHECK_EQ(px_future_free(fu), 0);                /* no wait left on it */
    return NULL;
}

SPEC(a_scope_ends_the_wait)
{
    run(scope_main);
}

/* -- a fiber's future ------------------------------------------------------------------ */

static void *returns_arg(void *arg)
{
    CHECK_EQ(px_yield(), 0);
    return arg;
}

static void *fiber_future_main(void *arg)
{
    (void)arg;
    px_fiber *a = px_spawn(returns_arg, V(21)), *b = px_spawn(returns_arg, V(22));
    px_future *fa = px_fiber_future(a);
    CHECK(fa != NULL);
    CHECK(px_fiber_future(a) == fa);                 /* one per fiber */
    px_future *both[2] = { fa, px_fiber_future(b) };
    void *values[2];
    CHECK_EQ(px_future_wait_all(both, 2, values), 0);
    CHECK_EQ(N(values[0]), 21);
    CHECK_EQ(N(values[1]), 22);
    CHECK(px_fiber_future(a) == fa);                 /* after its end too */
    CHECK_EQ(px_future_free(fa), PX_EINVAL);         /* the fiber's, not ours */
    void *v;
    CHECK_EQ(px_join(a, &v), 0);                     /* still joinable */
    CHECK_EQ(N(v), 21);
    px_fiber_release(a);
    px_fiber_release(b);
    /* a future asked of a fiber that ended already is settled at once */
    px_fiber *c = px_spawn(returns_arg, V(23));
    CHECK_EQ(px_join(c, NULL), 0);
    CHECK_EQ(px_future_wait(px_fiber_future(c), &v), 0);
    CHECK_EQ(N(v), 23);
    px_fiber_release(c);
    /* a released fiber's record goes at its end, and its future with it --
    ** but only once the fiber that waits on it got what it waited for */
    px_fiber *d = px_spawn(returns_arg, V(24));
    px_future *fd = px_fiber_future(d);
    px_fiber_release(d);
    px_fiber *w = px_spawn(wait_value, fd);
    CHECK_EQ(px_join(w, &v), 0);
    CHECK_EQ(N(v), 24);
    px_fiber_release(w);
    /* one never collected goes with the scheduler (ASan checks the leak) */
    CHECK(px_fiber_future(px_spawn(returns_arg, NULL)) != NULL);
    return NULL;
}

SPEC(a_fiber_s_end_settles_its_future)
{
    run(fiber_future_main);
}

/* -- hostile use -------------------------------------------------------------------- */

/* A fiber that waits for its own end would wait for good, and no deadlock
** report would catch it (a future's wait is an outside park): refused, as a
** join of itself is, even beside a settled future (as the bindings do). */
static px_fiber *SELF;

static void *waits_for_itself(void *arg)
{
    YIELD_UNTIL(SELF != NULL);
    px_future *own = px_fiber_future(SELF), *fus[2] = { arg, own };
    CHECK_EQ(px_future_wait(own, NULL), PX_EDEADLK);
    CHECK_EQ(px_future_wait_all(fus, 2, NULL), PX_EDEADLK);
    CHECK_EQ(px_future_wait_any(fus, 2), PX_EDEADLK);
    return NULL;
}

static void *self_main(void *arg)
{
    (void)arg;
    px_future *fu = px_future_new();
    CHECK_EQ(px_future_set_result(fu, NULL), 0);
    SELF = NULL;
    px_fiber *f = px_spawn(waits_for_itself, fu);
    SELF = f;
    join(f);
    CHECK_EQ(px_future_free(fu), 0);
    return NULL;
}

SPEC(hostile_arguments)
{
    run(self_main);
    void *v;
    CHECK_EQ(px_future_set_result(NULL, NULL), PX_EINVAL);
    CHECK_EQ(px_future_set_error(NULL, 1), PX_EINVAL);
    CHECK_EQ(px_future_wait(NULL, &v), PX_EINVAL);
    CHECK_EQ(px_future_done(NULL), 0);
    CHECK_EQ(px_future_free(NULL), 0);
    CHECK(px_fiber_future(NULL) == NULL);
    px_future *fu = px_future_new();
    CHECK_EQ(px_future_set_error(fu, 0), PX_EINVAL);
    CHECK_EQ(px_future_done(fu), 0);
    CHECK_EQ(px_future_wait(fu, &v), PX_ENOFIBER);      /* unsettled, off-fiber */
    px_future *fus[2] = { fu, NULL };
    CHECK_EQ(px_future_wait_all(NULL, 1, NULL), PX_EINVAL);
    CHECK_EQ(px_future_wait_all(fus, 2, NULL), PX_EINVAL);
    CHECK_EQ(px_future_wait_any(fus, 2), PX_EINVAL);
    CHECK_EQ(px_future_wait_any(fus, 0), PX_EINVAL);
    CHECK_EQ(px_future_wait_any(NULL, 1), PX_EINVAL);
    CHECK_EQ(px_future_wait_any(fus, 1), PX_ENOFIBER);
    CHECK_EQ(px_future_free(fu), 0);
}

static void *free_main(void *arg)
{
    px_future *fu = arg;
    px_fiber *f = px_spawn(wait_value, fu);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_future_free(fu), PX_EBUSY);
    CHECK_EQ(px_future_set_result(fu, NULL), 0);
    /* woken, but it has not run yet: its wait is not over */
    CHECK_EQ(px_future_free(fu), PX_EBUSY);
    join(f);
    return NULL;
}

SPEC(free_refuses_a_waited_future)
{
    px_future *fu = px_future_new();
    CHECK_EQ(px_run(free_main, fu, NULL), 0);
    CHECK_EQ(px_future_free(fu), 0);
}

/* A fiber of another run waits on the future of a fiber that px_sched_free
** discards: the future is freed with the record, but not under that wait. */
static px_future *DISCARDED;
static atomic_int discarded_waits;

static void *waits_discarded_main(void *arg)
{
    while (atomic_load(&discarded_waits) == 0)
        CHECK_EQ(px_sleep(PX_MSEC(1)), 0);
    CHECK_EQ(px_scope_push_timeout(PX_SEC(2)), 0);
    atomic_store(&discarded_waits, 2);
    *(int *)arg = px_future_wait(DISCARDED, NULL);
    px_scope_pop();
    return NULL;
}

static void *parks_for_good(void *arg)
{
    px_event_wait(arg);   /* never returns: the run is discarded */
    return NULL;
}

static void *discard_main(void *arg)
{
    px_fiber *f = px_spawn(parks_for_good, arg);
    DISCARDED = px_fiber_future(f);
    CHECK(DISCARDED != NULL);
    atomic_store(&discarded_waits, 1);
    while (atomic_load(&discarded_waits) != 2)
        CHECK_EQ(px_sleep(PX_MSEC(1)), 0);
    CHECK_EQ(px_sleep(PX_MSEC(20)), 0);   /* it parks */
    return NULL;
}

static int discarded_result;

static void *waits_discarded_thread(void *arg)
{
    (void)arg;
    CHECK_EQ(px_run(waits_discarded_main, &discarded_result, NULL), 0);
    return NULL;
}

SPEC(a_discarded_fiber_s_future_ends_the_waits_of_other_runs)
{
    px_event *e = px_event_new();
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, waits_discarded_thread, NULL), 0);
    CHECK_EQ(px_run(discard_main, e, NULL), PX_EDEADLK);   /* f parked for good */
    int64_t t0 = px_now();
    CHECK_EQ(pthread_join(t, NULL), 0);
    /* the wait ends at once, not with its scope, and its future is gone */
    CHECK_EQ(discarded_result, PX_ECANCELED);
    CHECK(px_now() - t0 < PX_SEC(1));
    CHECK_EQ(px_event_free(e), 0);
}

/* A fiber released before its end: its record, and its future with it, go
** at its end -- not from under the fibers that wait on that future. */
static void *yields_then_returns(void *arg)
{
    CHECK_EQ(px_yield(), 0);
    return arg;
}

static void *released_main(void *arg)
{
    (void)arg;
    px_fiber *f = px_spawn(yields_then_returns, V(41));
    px_future *fu = px_fiber_future(f);
    px_fiber *w[3];
    spawn_all(w, 3, wait_value, fu);
    px_fiber_release(f);                       /* detached: freed at its end */
    for (int i = 0; i < 3; i++) {
        void *v;
        CHECK_EQ(px_join(w[i], &v), 0);
        CHECK_EQ(N(v), 41);
        px_fiber_release(w[i]);
    }
    return NULL;
}

SPEC(a_released_fiber_s_future_outlives_its_waits)
{
    run(released_main);
}

SPECS(wait_returns_the_value, an_error_fails_every_wait, a_second_settlement_is_refused,
      many_fibers_wait_for_one_future, settled_from_another_thread,
      wait_all_returns_values_in_input_order, wait_all_fails_on_the_first_error,
      wait_any_returns_the_first_settled, wait_any_settlement_races_a_timeout,
      a_scope_ends_the_wait, a_fiber_s_end_settles_its_future, hostile_arguments,
      free_refuses_a_waited_future, a_discarded_fiber_s_future_ends_the_waits_of_other_runs,
      a_released_fiber_s_future_outlives_its_waits)
