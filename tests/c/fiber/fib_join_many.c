/*
** fib_join_many.c -- px_join is O(1) whatever the number of joiners, and the
** joiners are woken in the order they joined.  A million hosted joiners (no
** stacks: a record each) join one fiber and must all be done in seconds, in
** join order (a join that walked the list to append took about half an hour).
** Then C fibers, some of them joining under a timeout that fires first: each
** interrupted join leaves the joiners, the others keep their order; and as
** many hosted joins interrupted newest first leave in constant time each.
** PX_JOIN_MANY=n in the environment sets the number of hosted joiners (the
** build asks for fewer under the sanitizers and qemu).
*/
#include <unistd.h>

#include "../spec.h"

/* -- a million hosted joiners ------------------------------------------------ */

static px_fiber *T;           /* the joined fiber */
static size_t njoiners, njoined, nwoken, out_of_order;

typedef struct joiner {
    size_t idx;
    int step;                 /* 0 not started, 1 joining, 2 its join recorded (PX_EYIELD) */
} joiner;

static int joiner_resume(void *ctx)
{
    joiner *j = ctx;
    int r = px_join(T, NULL);
    if (r == PX_EYIELD) {
        CHECK_EQ(j->step, 0);
        j->step = 2;
        njoined++;
        return 0;
    }
    CHECK_EQ(r, 0);
    CHECK_EQ(j->step, 2);      /* it waited, then found T ended */
    if (j->idx != nwoken)
        out_of_order++;
    nwoken++;
    return PX_HOST_DONE;
}

/* The target yields until every joiner joined (each join hands it the next
** turn: it is ready), then ends. */
static int target_resume(void *ctx)
{
    (void)ctx;
    if (njoined < njoiners)
        return 0;
    CHECK_EQ(nwoken, 0);
    return PX_HOST_DONE;
}

typedef int (*resume_fn)(void *host_ctx);

/* A scheduler with the hosted fiber T (target) and n hosted joiners (joiner,
** each given its record of *js, in spawn order); njoiners is n. */
static px_sched *spawn_joiners(resume_fn target, resume_fn joiner_fn, joiner **js, size_t n)
{
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    px_host_ops tops = { target, NULL, NULL };
    px_host_ops jops = { joiner_fn, NULL, NULL };
    T = px_spawn_hosted(s, &tops, NULL);
    CHECK(T != NULL);
    *js = calloc(n, sizeof **js);
    CHECK(*js != NULL);
    for (size_t i = 0; i < n; i++) {
        (*js)[i].idx = i;
        px_fiber *f = px_spawn_hosted(s, &jops, &(*js)[i]);
        CHECK(f != NULL);
        px_fiber_release(f);
    }
    njoiners = n;
    njoined = 0;
    return s;
}

static void free_joiners(px_sched *s, joiner *js)
{
    px_fiber_release(T);
    px_sched_free(s);
    free(js);
}

static void a_million_joiners_finish_in_join_order(size_t n)
{
    joiner *js;
    px_sched *s = spawn_joiners(target_resume, joiner_resume, &js, n);
    int64_t t0 = px_now();
    CHECK_EQ(px_sched_run(s), 0);
    double secs = (double)(px_now() - t0) / 1e9;
    CHECK_EQ(nwoken, n);
    CHECK_EQ(out_of_order, 0);
    printf("%zu joiners of one fiber: %.2f s\n", n, secs);
    CHECK(secs < 60);   /* quadratic: about half an hour at a million */
    free_joiners(s, js);
}

/* -- joins interrupted newest first ------------------------------------------ */

/* Each joiner's deadline is earlier the later it joined: the timeouts fire in
** reverse join order, so each leaves the ring from its end (a leave that
** walked from the first joiner made this quadratic). */
static int64_t base;
static size_t nleft;

static int rjoiner_resume(void *ctx)
{
    joiner *j = ctx;
    if (j->step == 0) {
        j->step = 1;
        CHECK_EQ(px_scope_push_deadline(base + (int64_t)(njoiners - j->idx)), 0);
    }
    int r = j->step == 1 ? px_join(T, NULL) : px_park_result();
    if (r == PX_EYIELD) {
        j->step = 2;
        return 0;
    }
    CHECK_EQ(r, PX_ETIMEDOUT);
    CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
    nleft++;
    return PX_HOST_DONE;
}

static int rtarget_resume(void *ctx)
{
    (void)ctx;
    if (nleft < njoiners) {
        int r = px_sleep(PX_MSEC(10));   /* until every join timed out */
        CHECK(r == PX_EYIELD || r == 0);
        return 0;
    }
    return PX_HOST_DONE;
}

static void joins_interrupted_newest_first_leave_in_constant_time(size_t n)
{
    joiner *js;
    px_sched *s = spawn_joiners(rtarget_resume, rjoiner_resume, &js, n);
    nleft = 0;
    int64_t t0 = px_now();
    base = t0 + PX_SEC(1);      /* after every join was recorded, here */
    CHECK_EQ(px_sched_run(s), 0);
    double secs = (double)(px_now() - t0) / 1e9;
    CHECK_EQ(nleft, n);
    printf("%zu joins interrupted newest first: %.2f s (1 s of it waiting)\n", n, secs);
    CHECK(secs < 60);   /* quadratic: hours at a million */
    free_joiners(s, js);
}

/* -- C joiners, some interrupted: the rest keep their order ----------------- */

/* Every third joiner times out: the first, some in the middle, the last. */
enum { CJOINERS = 301, CTIMED = (CJOINERS + 2) / 3 };

static px_fiber *CT;
static int c_order[CJOINERS], c_n, c_timed_out;

static void *c_joiner(void *arg)
{
    int i = (int)(intptr_t)arg;
    if (i % 3 == 0) {                 /* leaves the front, the middle, the back */
        CHECK_EQ(px_scope_push_timeout(PX_MSEC(1)), 0);
        CHECK_EQ(px_join(CT, NULL), PX_ETIMEDOUT);
        CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
        c_timed_out++;
        return NULL;
    }
    void *r = NULL;
    CHECK_EQ(px_join(CT, &r), 0);
    CHECK(r == (void *)&CT);
    c_order[c_n++] = i;
    return NULL;
}

static void *c_target(void *arg)
{
    (void)arg;
    while (c_timed_out < CTIMED)   /* until every timed join left */
        CHECK_EQ(px_sleep(PX_MSEC(1)), 0);
    return &CT;
}

static void *c_main(void *arg)
{
    (void)arg;
    CT = px_spawn(c_target, NULL);
    CHECK(CT != NULL);
    px_fiber *f[CJOINERS];
    for (int i = 0; i < CJOINERS; i++)
        CHECK((f[i] = px_spawn(c_joiner, (void *)(intptr_t)i)) != NULL);
    for (int i = 0; i < CJOINERS; i++) {
        CHECK_EQ(px_join(f[i], NULL), 0);
        px_fiber_release(f[i]);
    }
    CHECK_EQ(px_join(CT, NULL), 0);   /* a late join returns at once */
    px_fiber_release(CT);
    return NULL;
}

SPEC(interrupted_joins_leave_and_the_rest_keep_their_order)
{
    px_sched_opts o = { .shared_stacks = 2 };
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, c_main, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(c_timed_out, CTIMED);
    CHECK_EQ(c_n, CJOINERS - CTIMED);
    for (int k = 1; k < c_n; k++)
        CHECK(c_order[k - 1] < c_order[k]);
    px_sched_free(s);
}

/* How many joiners the million-joiner specs make (fewer under the sanitizers). */
static size_t joiners(void)
{
    const char *env = getenv("PX_JOIN_MANY");
    size_t n = env ? strtoul(env, NULL, 10) : 1000000;
    CHECK(n > 0);
    return n;
}

SPEC(a_million_joiners_finish_in_join_order)
{
    a_million_joiners_finish_in_join_order(joiners());
}

SPEC(joins_interrupted_newest_first_leave_in_constant_time)
{
    joins_interrupted_newest_first_leave_in_constant_time(joiners());
}

SPECS(interrupted_joins_leave_and_the_rest_keep_their_order,
      a_million_joiners_finish_in_join_order,
      joins_interrupted_newest_first_leave_in_constant_time)
