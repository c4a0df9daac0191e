/*
** host_exec.c -- the run as an executor (bindings/host/pxhost.h, exec.c):
** a call posted from another thread starts as a hosted fiber of the run with
** its status; a closed executor refuses posts (PX_ECLOSED, the call is still
** the caller's) and holds; close is refused while a call is in flight unless
** forced, and a call the freed scheduler never took in goes to cannot_start,
** told the run is over, even after every owner let go of the executor;
** cancel drops every hold for good.  One ctest each, host.exec_<spec>
** (spec.h).
*/
#include "../spec.h"
#include "pxhost.h"

typedef struct call {
    pxhost_call head;
    int ran;                 /* its handler ran, on a fiber */
    int given_back;          /* cannot_start got it: 1 + over */
} call;

static int handler_status = -100;
static uint64_t handler_fiber;

static void handler(void *arg, int status)
{
    pxhost_exec *x = arg;
    handler_status = status;
    handler_fiber = px_self();
    pxhost_exec_unhold(x);
}

static int resume(void *ctx)
{
    call *c = ctx;
    c->head.fn(c->head.arg, c->head.status);
    c->ran = 1;
    return PX_HOST_DONE;
}

static void release(void *ctx) { (void)ctx; }   /* the test owns the calls */

static void cannot_start(pxhost_call *head, int over)
{
    ((call *)head)->given_back = 1 + over;
}

static const px_host_ops FIBER_OPS = { resume, NULL, release };
static const pxhost_exec_ops OPS = { &FIBER_OPS, cannot_start };

static pxhost_exec *target;
static call posted;

static void *poster(void *arg)
{
    (void)arg;
    posted.head.fn = handler;
    posted.head.arg = target;
    CHECK_EQ(pxhost_exec_post(target, &posted.head, 7), 0);
    return NULL;
}

/* A call posted from another thread starts as a hosted fiber of the run. */
SPEC(exec_starts_a_posted_call_as_a_fiber)
{
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    target = pxhost_exec_new(s, &OPS);
    CHECK(target != NULL);
    CHECK_EQ(pxhost_exec_hold(target), 1);   /* the run waits for the call */
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, poster, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(posted.ran, 1);
    CHECK_EQ(posted.given_back, 0);
    CHECK_EQ(handler_status, 7);
    CHECK(handler_fiber != 0);
    CHECK_EQ(pxhost_exec_closed(target), 0);

    /* over: posts and holds are refused, an unhold does nothing */
    CHECK_EQ(pxhost_exec_close(target, 0), 1);
    CHECK_EQ(pxhost_exec_closed(target), 1);
    call late = { .head = { .fn = handler, .arg = target } };
    CHECK_EQ(pxhost_exec_post(target, &late.head, 0), PX_ECLOSED);
    CHECK_EQ(late.ran + late.given_back, 0);
    CHECK_EQ(pxhost_exec_hold(target), 0);
    pxhost_exec_unhold(target);
    pxhost_exec_unref(target);
    px_sched_free(s);
}

/* A call in flight: close refused unless forced; the freed scheduler hands
** it to cannot_start (run over), and it kept the executor alive for that. */
SPEC(exec_in_flight_call_outlives_its_owners)
{
    px_sched *s = px_sched_new(NULL);
    pxhost_exec *x = pxhost_exec_new(s, &OPS);
    CHECK(x != NULL);
    call c = { .head = { .fn = handler, .arg = x } };
    CHECK_EQ(pxhost_exec_post(x, &c.head, 0), 0);
    CHECK_EQ(pxhost_exec_close(x, 0), 0);     /* refused: run again first */
    CHECK_EQ(pxhost_exec_closed(x), 0);
    CHECK_EQ(pxhost_exec_close(x, 1), 1);
    pxhost_exec_unref(x);                     /* the last owner: the call keeps it */
    px_sched_free(s);
    CHECK_EQ(c.ran, 0);
    CHECK_EQ(c.given_back, 2);                /* cannot_start, over */
}

/* cancel drops every hold for good: the run ends, no hold is given again. */
SPEC(exec_cancel_drops_every_hold)
{
    px_sched *s = px_sched_new(NULL);
    pxhost_exec *x = pxhost_exec_new(s, &OPS);
    CHECK_EQ(pxhost_exec_hold(x), 1);
    CHECK_EQ(pxhost_exec_hold(x), 1);
    pxhost_exec_cancel(x);
    CHECK_EQ(pxhost_exec_hold(x), 0);
    CHECK_EQ(px_sched_run(s), 0);             /* held no more: it ends */
    CHECK_EQ(pxhost_exec_close(x, 0), 1);
    pxhost_exec_unref(x);
    px_sched_free(s);
}

static void setup(void) { CHECK_EQ(pxhost_exec_post(NULL, NULL, 0), PX_EINVAL); }

SPECS_AROUND(setup, NULL, exec_starts_a_posted_call_as_a_fiber,
             exec_in_flight_call_outlives_its_owners, exec_cancel_drops_every_hold)
