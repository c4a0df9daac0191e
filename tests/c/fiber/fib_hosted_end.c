/*
** fib_hosted_end.c -- a hosted fiber whose body ends in the very turn it
** recorded a park (the park returned PX_EYIELD, then resume returns
** PX_HOST_DONE, as when a Lua coroutine errors or a greenlet is killed right
** after): the park is undone with the fiber.  Its deadline leaves the
** scheduler's set, an outside park stops counting (a later deadlock is
** reported), a join leaves the joined fiber's joiners, a yield leaves the
** ready queue -- the record is then reused by the next fiber while nothing
** points at it.  A hang here is the failure: an alarm turns it into one.
*/
#define _GNU_SOURCE
#include <signal.h>
#include <unistd.h>

#include "../spec.h"

/* One resume: the fiber records a wait, then its body ends at once. */
typedef struct ender {
    int (*wait)(struct ender *e);   /* records the wait: returns PX_EYIELD */
    px_fiber *target;               /* for a join */
    int resumes, released;
} ender;

static int resume(void *ctx)
{
    ender *e = ctx;
    e->resumes++;
    CHECK_EQ(e->resumes, 1);      /* an ended fiber has no turn */
    CHECK_EQ(e->wait(e), PX_EYIELD);
    return PX_HOST_DONE;
}

static void release(void *ctx)
{
    ((ender *)ctx)->released++;
}

static const px_host_ops ops = { resume, NULL, release };

static int long_sleep(ender *e)
{
    (void)e;
    return px_sleep(PX_SEC(3600));
}

static int timed_park(ender *e)
{
    (void)e;
    CHECK_EQ(px_scope_push_timeout(PX_SEC(3600)), 0);
    return px_park("bounded", NULL, NULL);   /* its scope closes with the fiber */
}

static int outside_park(ender *e)
{
    (void)e;
    px_park_info pi = { .reason = "outside", .flags = PX_PARK_OUTSIDE };
    return px_park_with(&pi);
}

static int join_target(ender *e)
{
    return px_join(e->target, NULL);
}

static int yield_once(ender *e)
{
    (void)e;
    return px_yield();
}

/* A C fiber after the hosted one: it gets the ended fiber's record, sleeps a
** little (the set must be sound) and parks under a short timeout that only
** its deadline may end. */
static void *reuser(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sleep(PX_MSEC(1)), 0);
    CHECK_EQ(px_scope_push_timeout(PX_MSEC(20)), 0);
    CHECK_EQ(px_park("reused record", NULL, NULL), PX_ETIMEDOUT);
    CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
    return NULL;
}

static int reusers_done;

static void *many_reusers(void *arg)
{
    (void)arg;
    px_fiber *f[8];
    for (int i = 0; i < 8; i++)
        CHECK((f[i] = px_spawn(reuser, NULL)) != NULL);
    for (int i = 0; i < 8; i++) {
        CHECK_EQ(px_join(f[i], NULL), 0);
        px_fiber_release(f[i]);
    }
    reusers_done++;
    return NULL;
}

/* The hosted fiber runs first; the C fibers then reuse its record. */
static void ends_after(int (*wait)(ender *))
{
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    ender e = { .wait = wait };
    px_fiber *h = px_spawn_hosted(s, &ops, &e);
    CHECK(h != NULL);
    px_fiber_release(h);                     /* its record is recycled at its end */
    CHECK_EQ(px_sched_post(s, many_reusers, NULL), 0);
    reusers_done = 0;
    int64_t t0 = px_now();
    CHECK_EQ(px_sched_run(s), 0);
    CHECK(px_now() - t0 < PX_SEC(20));       /* no stale hour-long deadline */
    CHECK_EQ(reusers_done, 1);
    CHECK_EQ(e.resumes, 1);
    CHECK_EQ(e.released, 1);
    px_sched_free(s);
}

/* -- a join recorded, then the end: the target's end must not touch it ----- */

static void *target(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++)
        CHECK_EQ(px_yield(), 0);         /* the joiner ends; a reuser parks */
    return NULL;
}

static void *join_scene(void *arg)
{
    px_sched *s = arg;
    px_fiber *t = px_spawn(target, NULL);
    CHECK(t != NULL);
    static ender e;
    memset(&e, 0, sizeof e);
    e.wait = join_target;
    e.target = t;
    px_fiber *h = px_spawn_hosted(s, &ops, &e);
    CHECK(h != NULL);
    px_fiber_release(h);
    CHECK_EQ(px_yield(), 0);             /* the hosted fiber joins t and ends */
    CHECK_EQ(e.resumes, 1);
    CHECK_EQ(e.released, 1);
    px_fiber *r = px_spawn(reuser, NULL);   /* gets the joiner's record */
    CHECK(r != NULL);
    CHECK_EQ(px_join(t, NULL), 0);       /* t's end wakes no stale joiner */
    CHECK_EQ(px_join(r, NULL), 0);
    px_fiber_release(t);
    px_fiber_release(r);
    return NULL;
}

SPEC(a_join_recorded_then_the_end)
{
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, join_scene, s), 0);
    CHECK_EQ(px_sched_run(s), 0);
    px_sched_free(s);
}

/* -- an outside park, then the end: a later real deadlock is reported ------- */

static char dl_text[2048];

static void keep_report(void *ctx, const char *text)
{
    (void)ctx;
    snprintf(dl_text, sizeof dl_text, "%s", text);
}

static void *stuck(void *arg)
{
    (void)arg;
    px_park("stuck for good", NULL, NULL);
    return NULL;
}

SPEC(an_outside_park_then_the_end_leaves_no_hold)
{
    px_sched_opts o = { .on_deadlock = keep_report };
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    ender e = { .wait = outside_park };
    px_fiber *h = px_spawn_hosted(s, &ops, &e);
    CHECK(h != NULL);
    px_fiber_release(h);
    CHECK_EQ(px_sched_post(s, stuck, NULL), 0);
    dl_text[0] = 0;
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);
    CHECK(strstr(dl_text, "stuck for good") != NULL);
    if (strstr(dl_text, "\"outside\"") != NULL) {
        fprintf(stderr, "%s\n", dl_text);
        CHECK(0);   /* the ended fiber is no waiter */
    }
    px_sched_free(s);
}

/* -- the pulled form: the end is the status of the next pull --------------- */

static const px_host_ops pulled = { NULL, NULL, NULL };

static void a_pulled_fiber_that_parks_then_ends(int (*wait)(ender *))
{
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    px_fiber *p = px_spawn_hosted(s, &pulled, NULL);
    CHECK(p != NULL);
    px_fiber_release(p);
    void *ctx;
    CHECK_EQ(px_sched_next(s, 0, &ctx), 1);   /* its turn */
    ender e = { .wait = wait };
    CHECK_EQ(wait(&e), PX_EYIELD);
    int64_t t0 = px_now();
    CHECK_EQ(px_sched_next(s, PX_HOST_DONE, &ctx), 0);   /* the run is over */
    CHECK(px_now() - t0 < PX_SEC(20));
    CHECK_EQ(px_sched_post(s, many_reusers, NULL), 0);   /* a new run */
    reusers_done = 0;
    CHECK_EQ(px_sched_next(s, 0, &ctx), 0);
    CHECK_EQ(reusers_done, 1);
    px_sched_free(s);
}

/* A hang (a stale deadline, a lost deadlock) fails the test. */
static void setup(void)
{
    alarm(120);
}

SPEC(a_hosted_fiber_ending_after_a_long_sleep_leaves_no_stale_deadline)
{
    ends_after(long_sleep);
}

SPEC(a_hosted_fiber_ending_after_a_timed_park_leaves_no_stale_deadline)
{
    ends_after(timed_park);
}

SPEC(a_hosted_fiber_ending_after_a_yield_leaves_no_stale_deadline)
{
    ends_after(yield_once);
}

SPEC(a_pulled_fiber_that_sleeps_then_ends)
{
    a_pulled_fiber_that_parks_then_ends(long_sleep);
}

SPEC(a_pulled_fiber_that_parks_timed_then_ends)
{
    a_pulled_fiber_that_parks_then_ends(timed_park);
}

SPEC(a_pulled_fiber_that_yields_then_ends)
{
    a_pulled_fiber_that_parks_then_ends(yield_once);
}

SPECS_AROUND(setup, NULL,
             a_hosted_fiber_ending_after_a_long_sleep_leaves_no_stale_deadline,
             a_hosted_fiber_ending_after_a_timed_park_leaves_no_stale_deadline,
             a_hosted_fiber_ending_after_a_yield_leaves_no_stale_deadline,
             a_join_recorded_then_the_end, an_outside_park_then_the_end_leaves_no_hold,
             a_pulled_fiber_that_sleeps_then_ends, a_pulled_fiber_that_parks_timed_then_ends,
             a_pulled_fiber_that_yields_then_ends)
