/*
** fib_hosted_switch.c -- hosted fibers on a host that CAN switch inside C, as a
** Python greenlet can: the host gives px_host_ops a suspend hook, so px_park
** switches back to the scheduler inside the call and returns the park's
** outcome itself, never PX_EYIELD.  The host here is POSIX ucontext, standing
** in for the greenlet's own stack switching.  The same primitives (the gate,
** sleep, yield, join, both scope forms) must work unchanged.
*/
#define _GNU_SOURCE
#define FIBERS_GATE_NO_MAIN
#include "fibers_gate.c"

#include <ucontext.h>

#include "../check.h"

enum { HOST_STACK = 256 * 1024 };

typedef struct host {
    ucontext_t sched_side;   /* where resume was called from */
    ucontext_t own;          /* the hosted body's context */
    char *stack;
    int started, done, released, resumes;
    char log[32];
    size_t len;
} host;

static gate g;
static host H;

static int time_out_take(void *arg)
{
    (void)arg;
    return gate_take(&g);    /* our own gate, held: waits until the deadline */
}

static void body(void)
{
    host *h = &H;
    CHECK(px_self() != 0);
    while (g.owner == 0)                     /* the holder has not run yet */
        CHECK_EQ(px_yield(), 0);
    CHECK_EQ(gate_take(&g), 0);              /* parks inside: suspend, then 0 */
    CHECK_EQ(g.owner, px_self());
    h->log[h->len++] = 'g';
    gate_give(&g);
    CHECK_EQ(px_sleep(PX_MSEC(5)), 0);
    h->log[h->len++] = 's';
    CHECK_EQ(px_yield(), 0);
    h->log[h->len++] = 'y';
    CHECK_EQ(gate_take(&g), 0);              /* free now */
    CHECK_EQ(px_with_timeout(PX_MSEC(10), time_out_take, NULL), PX_ETIMEDOUT);
    CHECK_EQ(gate_waiters(&g), 0);
    /* The gate's dereg handed our own hold on (it cannot tell it from a grant
    ** that raced the timeout), so the gate is free: take it again. */
    CHECK_EQ(gate_take(&g), 0);
    CHECK_EQ(px_scope_push_timeout(PX_MSEC(10)), 0);
    CHECK_EQ(gate_take(&g), PX_ETIMEDOUT);
    CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
    h->log[h->len++] = 't';
    h->done = 1;
    /* Returning ends this context: uc_link goes back to the scheduler's side. */
}

static int resume(void *ctx)
{
    host *h = ctx;
    h->resumes++;
    if (!h->started) {
        h->started = 1;
        CHECK(getcontext(&h->own) == 0);
        h->own.uc_stack.ss_sp = h->stack;
        h->own.uc_stack.ss_size = HOST_STACK;
        h->own.uc_link = &h->sched_side;
        makecontext(&h->own, body, 0);
    }
    CHECK(swapcontext(&h->sched_side, &h->own) == 0);
    return h->done ? PX_HOST_DONE : 0;
}

static void suspend(void *ctx)
{
    host *h = ctx;
    CHECK(swapcontext(&h->own, &h->sched_side) == 0);
}

static void release(void *ctx)
{
    ((host *)ctx)->released++;
}

static void *holder(void *arg)
{
    px_fiber *hf = arg;
    CHECK_EQ(gate_take(&g), 0);
    CHECK_EQ(px_yield(), 0);                 /* the hosted fiber queues behind us */
    CHECK_EQ(gate_waiters(&g), 1);
    gate_give(&g);
    void *r = (void *)1;
    CHECK_EQ(px_join(hf, &r), 0);
    CHECK(r == NULL);
    px_fiber_release(hf);
    return NULL;
}

int main(void)
{
    H.stack = malloc(HOST_STACK);
    CHECK(H.stack != NULL);
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    px_host_ops ops = { resume, suspend, release };
    px_fiber *hf = px_spawn_hosted(s, &ops, &H);
    CHECK(hf != NULL);
    CHECK_EQ(px_sched_post(s, holder, hf), 0);
    CHECK_EQ(px_sched_run(s), 0);
    H.log[H.len] = 0;
    CHECK(strcmp(H.log, "gsyt") == 0);
    CHECK_EQ(H.done, 1);
    CHECK_EQ(H.released, 1);
    CHECK(H.resumes >= 5);    /* one per park or yield, plus the first */
    px_sched_free(s);
    free(g.waiters);
    free(H.stack);
    printf("fib_hosted_switch: ok\n");
    return 0;
}
