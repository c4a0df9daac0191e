/*
** fib_hosted.c -- hosted fibers on a host that cannot switch inside C (as Lua):
** a hand-written state machine plays the host's coroutine.  Every park returns
** PX_EYIELD, the host "yields" by returning from resume, and once resumed reads
** the outcome with px_park_result.  The same primitives (the gate, sleep,
** yield, join, push/pop scopes) work unchanged.
*/
#define FIBERS_GATE_NO_MAIN
#include "fibers_gate.c"

#include "../check.h"

static gate g;

typedef struct machine {
    int step;
    int released;
    char log[64];
    size_t len;
} machine;

static void note(machine *m, char c) { m->log[m->len++] = c; }

/* One resume: run until the next park (which returns PX_EYIELD) or the end. */
static int resume(void *ctx)
{
    machine *m = ctx;
    for (;;) {
        switch (m->step++) {
        case 0:   /* take the gate another fiber holds: parks */
            CHECK(px_self() != 0);
            if (g.owner == 0) {                  /* the holder has not run yet */
                m->step--;
                CHECK_EQ(px_yield(), PX_EYIELD);
                return 0;
            }
            CHECK_EQ(gate_take(&g), PX_EYIELD);
            return 0;
        case 1:   /* handed over: the park's outcome is 0 and the gate ours */
            CHECK_EQ(px_park_result(), 0);
            CHECK_EQ(g.owner, px_self());
            note(m, 'g');
            gate_give(&g);
            CHECK_EQ(px_sleep(PX_MSEC(10)), PX_EYIELD);
            m->log[m->len] = 0;
            return 0;
        case 2:
            CHECK_EQ(px_park_result(), 0);
            note(m, 's');
            CHECK_EQ(px_yield(), PX_EYIELD);
            return 0;
        case 3:   /* a bounded wait that times out: dereg ran before resume */
            note(m, 'y');
            CHECK_EQ(gate_take(&g), 0);          /* free now: no park */
            CHECK_EQ(px_scope_push_timeout(PX_MSEC(10)), 0);
            CHECK_EQ(gate_take(&g), PX_EYIELD);  /* our own gate: parks */
            return 0;
        case 4:
            CHECK_EQ(px_park_result(), PX_ETIMEDOUT);
            CHECK_EQ(gate_waiters(&g), 0);
            CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
            note(m, 't');
            return 0;                            /* no park: counts as a yield */
        case 5:
            note(m, 'e');
            return PX_HOST_DONE;
        }
    }
}

static void release(void *ctx)
{
    ((machine *)ctx)->released++;
}

static machine M;
static px_sched *S;

static void *holder(void *arg)
{
    px_fiber *h = arg;
    CHECK_EQ(gate_take(&g), 0);
    CHECK_EQ(px_yield(), 0);                 /* the hosted fiber queues */
    CHECK_EQ(gate_waiters(&g), 1);
    gate_give(&g);
    void *r = (void *)1;
    CHECK_EQ(px_join(h, &r), 0);             /* joining a hosted fiber */
    CHECK(r == NULL);
    CHECK_EQ(M.released, 1);
    px_fiber_release(h);
    return NULL;
}

int main(void)
{
    S = px_sched_new(NULL);
    px_host_ops ops = { resume, NULL, release };
    CHECK(px_spawn_hosted(NULL, &ops, &M) == NULL);
    CHECK(px_spawn_hosted(S, NULL, &M) == NULL);
    px_fiber *h = px_spawn_hosted(S, &ops, &M);   /* before the run: allowed */
    CHECK(h != NULL);
    CHECK_EQ(px_sched_post(S, holder, h), 0);
    CHECK_EQ(px_sched_run(S), 0);
    CHECK_EQ(M.step, 6);
    M.log[M.len] = 0;
    CHECK(strcmp(M.log, "gsyte") == 0);
    px_sched_free(S);
    free(g.waiters);
    printf("fib_hosted: ok\n");
    return 0;
}
