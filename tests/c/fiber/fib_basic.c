/*
** fib_basic.c -- px_run's argument and result, spawn/join with results, when a
** spawned fiber first runs, FIFO yield order, sleep order without early wakes,
** ids and stale ids, a self join, off-fiber calls, a nested run, an idle
** scheduler, 100,000 fibers: one SPEC (one ctest fiber.<name>) each.
*/
#include <string.h>

#include "../spec.h"

static void *square(void *arg)
{
    intptr_t n = (intptr_t)arg;
    return (void *)(n * n);
}

static void *join_results(void *arg)
{
    (void)arg;
    px_fiber *f[10];
    for (intptr_t i = 0; i < 10; i++)
        CHECK((f[i] = px_spawn(square, (void *)i)) != NULL);
    for (intptr_t i = 9; i >= 0; i--) {
        void *r = NULL;
        CHECK_EQ(px_join(f[i], &r), 0);
        CHECK_EQ((intptr_t)r, i * i);
        CHECK_EQ(px_join(f[i], &r), 0);   /* joining an ended fiber again */
        px_fiber_release(f[i]);
    }
    return (void *)42;
}

static char order[64];
static size_t order_len;

static void *yielder(void *arg)
{
    char c = (char)(intptr_t)arg;
    for (int i = 0; i < 3; i++) {
        order[order_len++] = c;
        CHECK_EQ(px_yield(), 0);
    }
    return NULL;
}

static void *yield_order(void *arg)
{
    (void)arg;
    px_fiber *a = px_spawn(yielder, (void *)'a');
    px_fiber *b = px_spawn(yielder, (void *)'b');
    px_fiber *c = px_spawn(yielder, (void *)'c');
    CHECK_EQ(px_join(a, NULL), 0);
    CHECK_EQ(px_join(b, NULL), 0);
    CHECK_EQ(px_join(c, NULL), 0);
    px_fiber_release(a);
    px_fiber_release(b);
    px_fiber_release(c);
    order[order_len] = 0;
    CHECK(strcmp(order, "abcabcabc") == 0);
    return NULL;
}

static int64_t woke[8];       /* the deadlines of the sleeps, in the order they ended */
static int nwoke;

static void *sleeper(void *arg)
{
    intptr_t ms = (intptr_t)arg;
    int64_t deadline = px_now() + PX_MSEC(ms);
    CHECK_EQ(px_sleep(PX_MSEC(ms)), 0);
    CHECK_GE(px_now(), deadline);              /* never early */
    woke[nwoke++] = deadline;
    return NULL;
}

static void *sleep_order(void *arg)
{
    (void)arg;
    static const int ms[] = { 200, 50, 150, 0, 100 };
    px_fiber *f[5];
    for (int i = 0; i < 5; i++)
        f[i] = px_spawn(sleeper, (void *)(intptr_t)ms[i]);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(px_join(f[i], NULL), 0);
        px_fiber_release(f[i]);
    }
    CHECK_EQ(nwoke, 5);
    /* In deadline order.  Sleeps that come due in one pass of the scheduler
    ** wake in no promised order, so the deadlines lie 50 ms apart: each comes
    ** due in a pass of its own unless the machine (a sanitizer under load)
    ** stalls the scheduler for that long. */
    for (int i = 1; i < 5; i++)
        CHECK(woke[i - 1] <= woke[i]);
    CHECK_EQ(px_sleep(-1), PX_EINVAL);
    return NULL;
}

static uint64_t parked_id;

static void *parker(void *arg)
{
    (void)arg;
    parked_id = px_self();
    CHECK_EQ(px_park("test park", NULL, NULL), 0);
    return NULL;
}

static void *stale_ids(void *arg)
{
    (void)arg;
    px_fiber *f = px_spawn(parker, NULL);
    uint64_t fid = px_fiber_id(f);
    CHECK(fid != 0 && fid != px_self());
    CHECK_EQ(px_wake(fid), 0);        /* not parked yet: it has not run */
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(parked_id, fid);
    CHECK_EQ(px_wake(fid), 1);
    CHECK_EQ(px_wake(fid), 0);        /* woken already */
    CHECK_EQ(px_join(f, NULL), 0);
    CHECK_EQ(px_wake(fid), 0);        /* ended */
    CHECK_EQ(px_wake(fid + 1000), 0); /* never existed */
    CHECK_EQ(px_wake(0), 0);
    px_fiber_release(f);
    /* A new fiber never gets an old id. */
    px_fiber *g = px_spawn(square, NULL);
    CHECK(px_fiber_id(g) > fid);
    CHECK_EQ(px_join(g, NULL), 0);
    px_fiber_release(g);
    /* A sleeping fiber ignores stray wakes. */
    px_fiber *s = px_spawn(sleeper, (void *)(intptr_t)20);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_wake(px_fiber_id(s)), 0);
    nwoke = 0;
    CHECK_EQ(px_join(s, NULL), 0);
    px_fiber_release(s);
    CHECK_EQ(px_join(NULL, NULL), PX_EINVAL);
    return NULL;
}

static px_fiber *joins_itself;

static void *self_joiner(void *arg)
{
    (void)arg;
    void *r = (void *)1;
    CHECK_EQ(px_join(joins_itself, &r), PX_EDEADLK);
    CHECK(r == (void *)1);                    /* left alone */
    return (void *)"ok";
}

static void *self_join(void *arg)
{
    (void)arg;
    CHECK(px_self() != 0);
    joins_itself = px_spawn(self_joiner, NULL);
    CHECK(joins_itself != NULL);
    void *r = NULL;
    CHECK_EQ(px_join(joins_itself, &r), 0);
    CHECK(strcmp(r, "ok") == 0);
    px_fiber_release(joins_itself);
    return NULL;
}

static size_t done_count;

static void *tiny(void *arg)
{
    (void)arg;
    done_count++;
    return arg;
}

/*
** TSan counts every fiber as a thread (at most 8128 live): spawn in waves, and
** fewer in all, since each fiber costs it about a millisecond (100,000 took 85 s
** of a 180 s bound); the plain and ASan runs spawn the full 100,000.
*/
#ifdef PX_TEST_TSAN
#  define WAVE 4000
#  define MANY 20000
#else
#  define WAVE 100000
#  define MANY 100000
#endif

static void *many(void *arg)
{
    size_t n = (size_t)(uintptr_t)arg;
    px_fiber **f = malloc(WAVE * sizeof *f);
    CHECK(f != NULL);
    for (size_t base = 0; base < n; base += WAVE) {
        size_t k = n - base < WAVE ? n - base : WAVE;
        for (size_t i = 0; i < k; i++)
            CHECK((f[i] = px_spawn_sized(tiny, (void *)(uintptr_t)(base + i), 16384)) != NULL);
        for (size_t i = 0; i < k; i++) {
            void *r;
            CHECK_EQ(px_join(f[i], &r), 0);
            CHECK_EQ((uintptr_t)r, base + i);
            px_fiber_release(f[i]);
        }
    }
    free(f);
    CHECK_EQ(done_count, n);
    return NULL;
}

/* -- px_run's argument and result; a nested run -------------------------- */

static void *twice(void *arg)
{
    return (void *)((intptr_t)arg * 2);
}

static void *add_then_spawn(void *arg)
{
    intptr_t n = (intptr_t)arg;
    px_fiber *f = px_spawn(twice, (void *)(intptr_t)21);
    void *r = NULL;
    CHECK_EQ(px_join(f, &r), 0);
    px_fiber_release(f);
    return (void *)(n + (intptr_t)r);       /* n + 42 */
}

static int nested_code;
static void *nested_result;

static void *runs_nested(void *arg)
{
    (void)arg;
    nested_result = (void *)1;
    nested_code = px_run(tiny, NULL, &nested_result);
    CHECK_EQ(px_yield(), 0);                /* the outer run goes on */
    return (void *)"ok";
}

/* -- ids: 0 off-fiber, the fiber's own on one -------------------------------- */

static void *own_id(void *arg)
{
    (void)arg;
    return (void *)(uintptr_t)px_self();
}

static void *ids_on_fibers(void *arg)
{
    (void)arg;
    uint64_t me = px_self();
    CHECK(me != 0);
    px_fiber *f = px_spawn(own_id, NULL);
    void *r = NULL;
    CHECK_EQ(px_join(f, &r), 0);
    CHECK_EQ((uint64_t)(uintptr_t)r, px_fiber_id(f));
    CHECK(px_fiber_id(f) != me);
    px_fiber_release(f);
    return NULL;
}

/* -- a spawned fiber runs when its spawner next parks, yields or ends ------- */

static char trail[32];
static size_t trail_len;

static void *leave_mark(void *arg)
{
    trail[trail_len++] = (char)(intptr_t)arg;
    return NULL;
}

static void *spawner(void *arg)
{
    (void)arg;
    px_fiber *f[4];
    f[0] = px_spawn(leave_mark, (void *)'a');
    f[1] = px_spawn(leave_mark, (void *)'b');
    trail[trail_len++] = 'S';                  /* spawned: neither ran yet */
    CHECK_EQ(px_yield(), 0);
    trail[trail_len++] = 'Y';                  /* yielded: both ran */
    f[2] = px_spawn(leave_mark, (void *)'c');
    trail[trail_len++] = 's';
    CHECK_EQ(px_join(f[2], NULL), 0);          /* a join parks: c runs */
    f[3] = px_spawn(leave_mark, (void *)'d');
    trail[trail_len++] = 'E';                  /* d runs after main ended */
    for (int i = 0; i < 4; i++)
        px_fiber_release(f[i]);
    return NULL;
}

/* -- a yield lets every fiber that is ready run first ------------------------ */

static void *seen_after_yield(void *arg)
{
    (void)arg;
    trail_len = 0;
    px_fiber *a = px_spawn(leave_mark, (void *)'1');
    px_fiber *b = px_spawn(leave_mark, (void *)'2');
    CHECK_EQ(trail_len, 0);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(trail_len, 2);
    CHECK(trail[0] == '1' && trail[1] == '2');
    px_fiber_release(a);
    px_fiber_release(b);
    return NULL;
}

SPEC(run_passes_arguments_and_returns_mains_result)
{
    void *r = NULL;
    CHECK_EQ(px_run(twice, (void *)(intptr_t)5, &r), 0);
    CHECK_EQ((intptr_t)r, 10);
    CHECK_EQ(px_run(add_then_spawn, (void *)(intptr_t)3, &r), 0);
    CHECK_EQ((intptr_t)r, 45);
    CHECK_EQ(px_run(twice, NULL, NULL), 0);   /* no result wanted */
}

SPEC(a_nested_run_is_ebusy)
{
    void *r = NULL;
    CHECK_EQ(px_run(runs_nested, NULL, &r), 0);
    CHECK_EQ(nested_code, PX_EBUSY);
    CHECK(nested_result == NULL);           /* set to NULL first, whatever the outcome */
    CHECK(strcmp(r, "ok") == 0);
}

SPEC(self_is_0_off_fiber_and_the_fibers_id_on_one)
{
    CHECK_EQ(px_self(), 0);
    CHECK_EQ(px_run(ids_on_fibers, NULL, NULL), 0);
    CHECK_EQ(px_self(), 0);
}

SPEC(spawn_order)
{
    trail_len = 0;
    CHECK_EQ(px_run(spawner, NULL, NULL), 0);
    trail[trail_len] = 0;
    CHECK(strcmp(trail, "SabYscEd") == 0);
}

SPEC(yield_lets_the_others_run)
{
    CHECK_EQ(px_run(seen_after_yield, NULL, NULL), 0);
}

SPEC(join_results)
{
    void *r = NULL;
    CHECK_EQ(px_run(join_results, NULL, &r), 0);
    CHECK_EQ((intptr_t)r, 42);
}

SPEC(yield_order)
{
    CHECK_EQ(px_run(yield_order, NULL, NULL), 0);
}

SPEC(sleep_order)
{
    CHECK_EQ(px_run(sleep_order, NULL, NULL), 0);
}

SPEC(stale_ids)
{
    CHECK_EQ(px_run(stale_ids, NULL, NULL), 0);
}

SPEC(self_join)
{
    CHECK_EQ(px_run(self_join, NULL, NULL), 0);
}

SPEC(off_fiber_calls)
{
    CHECK_EQ(px_run(NULL, NULL, NULL), PX_EINVAL);
    CHECK_EQ(px_self(), 0);
    CHECK_EQ(px_yield(), PX_ENOFIBER);
    CHECK_EQ(px_sleep(1), PX_ENOFIBER);
    CHECK_EQ(px_park("x", NULL, NULL), PX_ENOFIBER);
    CHECK_EQ(px_park_result(), PX_ENOFIBER);
    CHECK(px_spawn(tiny, NULL) == NULL);
}

SPEC(a_scheduler_with_nothing_to_do_returns_at_once)
{
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_run(s), 0);
    done_count = 0;
    CHECK_EQ(px_sched_post(s, tiny, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(done_count, 1);
    px_sched_free(s);
    CHECK_EQ(px_sched_run(NULL), PX_EINVAL);
}

SPEC(many)
{
    done_count = 0;
    CHECK_EQ(px_run(many, (void *)(uintptr_t)MANY, NULL), 0);
}

SPECS(join_results, yield_order, sleep_order, stale_ids, self_join, off_fiber_calls,
      a_scheduler_with_nothing_to_do_returns_at_once, many,
      run_passes_arguments_and_returns_mains_result, a_nested_run_is_ebusy,
      self_is_0_off_fiber_and_the_fibers_id_on_one, spawn_order, yield_lets_the_others_run)
