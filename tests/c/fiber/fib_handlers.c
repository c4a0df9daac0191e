/*
** fib_handlers.c -- a scheduler as an executor owes every handler call it
** took one exactly-once call, however its run ends.  A pulled run (the Python
** host's path) freed between two pulls holds handler calls in two places:
** taken in as fibers that have not started, and posted to its inbox but not
** taken in yet.  px_sched_free calls each of them once, with PX_ECANCELED
** (aborted before it ran), and each handler frees its argument: under ASan,
** LeakSanitizer finds any call that was lost.
*/
#include "../spec.h"

typedef struct call {
    int tag;
} call;

static int calls, statuses[16], tags[16];

static void handler(void *arg, int status)
{
    call *c = arg;
    CHECK(calls < 16);
    statuses[calls] = status;
    tags[calls] = c->tag;
    calls++;
    free(c);   /* the one call is the last use of arg */
}

static void post(px_executor e, int tag, int status)
{
    call *c = malloc(sizeof *c);
    CHECK(c != NULL);
    c->tag = tag;
    CHECK_EQ(e.post(e.ctx, handler, c, status), 0);
}

static int resumed;

static int never_resumed(void *ctx)
{
    (void)ctx;
    resumed++;
    return PX_HOST_DONE;
}

static const px_host_ops pulled = { NULL, NULL, NULL };

/* Three calls taken in as fibers behind a pulled fiber's turn, two more in the
** inbox: the free makes all five, in the order they were posted. */
SPEC(a_pulled_run_freed_between_pulls_calls_every_handler)
{
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    px_executor e = px_sched_executor(s);
    calls = 0;
    CHECK(px_spawn_hosted(s, &pulled, NULL) != NULL);
    for (int i = 0; i < 3; i++)
        post(e, i, 0);
    void *ctx = (void *)1;
    CHECK_EQ(px_sched_next(s, 0, &ctx), 1);   /* the pulled fiber's turn */
    CHECK_EQ(calls, 0);                       /* the handlers are fibers now */
    post(e, 3, 0);
    post(e, 4, PX_ECANCELED);
    px_sched_free(s);                         /* between pulls: the run is given up */
    CHECK_EQ(calls, 5);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(tags[i], i);
        CHECK_EQ(statuses[i], PX_ECANCELED);
    }
}

/* The same with a hosted fiber that has a resume: the run never started, so
** nothing was taken in; the inbox's calls are aborted. */
SPEC(a_scheduler_freed_before_its_run_aborts_the_posted_handlers)
{
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    px_host_ops ops = { never_resumed, NULL, NULL };
    CHECK(px_spawn_hosted(s, &ops, NULL) != NULL);
    calls = resumed = 0;
    post(px_sched_executor(s), 7, 0);
    px_sched_free(s);
    CHECK_EQ(calls, 1);
    CHECK_EQ(tags[0], 7);
    CHECK_EQ(statuses[0], PX_ECANCELED);
    CHECK_EQ(resumed, 0);
}

/* A timer queue whose executor is a pulled run: its handlers expire, are
** posted and taken in, and the run is freed; every one is called once. */
SPEC(a_timer_queue_into_a_pulled_run_loses_no_handler)
{
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    px_executor e = px_sched_executor(s);
    px_timerq_opts o = { .executor = &e };
    px_timerq *q = px_timerq_new(&o);
    CHECK(q != NULL);
    calls = 0;
    CHECK(px_spawn_hosted(s, &pulled, NULL) != NULL);
    for (int i = 0; i < 3; i++) {
        call *c = malloc(sizeof *c);
        CHECK(c != NULL);
        c->tag = i;
        CHECK(px_timerq_add(q, 0, handler, c) != 0);
    }
    /* Wait until the worker posted all three (none is pending any more). */
    int64_t give_up = px_now() + PX_TEST_TIMEOUT_NS;
    while (px_timerq_pending(q) != 0 && px_now() < give_up) {
        struct timespec ts = { 0, 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(px_timerq_pending(q), 0);
    void *ctx;
    CHECK_EQ(px_sched_next(s, 0, &ctx), 1);   /* takes in what was posted */
    px_timerq_free(q);                        /* joins the worker: all posted */
    px_sched_free(s);
    CHECK_EQ(calls, 3);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(statuses[i], PX_ECANCELED);
}

SPECS(a_pulled_run_freed_between_pulls_calls_every_handler,
      a_scheduler_freed_before_its_run_aborts_the_posted_handlers,
      a_timer_queue_into_a_pulled_run_loses_no_handler)
