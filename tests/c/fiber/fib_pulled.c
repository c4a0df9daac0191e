/*
** fib_pulled.c -- a host that switches between its fibers itself (as the
** Python binding switches greenlets): fibers spawned with a NULL resume, run
** by px_sched_next one turn at a time.  A fiber that parks gets PX_EYIELD,
** pulls the next turn and switches straight to that fiber -- no trip through
** a scheduler context.  POSIX ucontext stands in for the greenlets.
*/
#define _GNU_SOURCE
#define FIBERS_GATE_NO_MAIN
#include "fibers_gate.c"

#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include "../spec.h"

enum { TASK_STACK = 256 * 1024, MAX_TASKS = 8 };

typedef struct task {
    ucontext_t uc;
    void (*body)(struct task *t);
    px_fiber *f;
    int done, released;
    char *stack;             /* malloc'd: a given-up context leaves ASan's marks behind */
} task;

static px_sched *S;
static ucontext_t root;
static int last;       /* what the pull that gave up the thread to the root got */
static atomic_int intrs; /* PX_EINTR seen (the signaller reads it) */
static task tasks[MAX_TASKS];
static size_t ntasks;
static char trail[64];
static size_t trail_len;

static void mark(char c) { trail[trail_len++] = c; trail[trail_len] = 0; }

/* Ends the turn of `me` (NULL: the root has none) and switches to the next
** fiber, or to the root once the run is over; returns in `me` when its turn
** comes again.  The root gets back what ended the run. */
static int pass(task *me, int status)
{
    void *ctx;
    int r;
    while ((r = px_sched_next(S, status, &ctx)) == PX_EINTR) {
        intrs++;
        status = 0;
    }
    ucontext_t *from = me ? &me->uc : &root;
    if (r == 1) {
        task *t = ctx;
        if (t != me)
            CHECK_EQ(swapcontext(from, &t->uc), 0);
        return me ? 1 : last;   /* the root is back once the run is over */
    }
    last = r;
    if (me)
        CHECK_EQ(swapcontext(from, &root), 0);
    return last;
}

/* The outcome of a park, sleep or yield that returned r: once resumed when it
** had to yield. */
static int outcome(task *me, int r)
{
    if (r != PX_EYIELD)
        return r;   /* it ended before it began: a scope had fired */
    pass(me, 0);
    return px_park_result();
}
#define PARKED(me, call) outcome((me), (call))
/* A call that is called again once resumed (join, the sync family). */
static int again_gate(task *me, gate *g)
{
    int r = gate_take(g);
    while (r == PX_EYIELD) {
        pass(me, 0);
        r = gate_take(g);
    }
    return r;
}

static void trampoline(unsigned lo, unsigned hi)
{
    task *t = (task *)(((uintptr_t)hi << 32) | lo);
    t->body(t);
    t->done = 1;
    pass(t, PX_HOST_DONE);   /* never returns: an ended fiber has no turn */
    CHECK(0);
}

static int pull_in_release = 0, release_pulls[MAX_TASKS];

static void release(void *ctx)
{
    task *t = ctx;
    if (pull_in_release) {   /* a host's release may not pull either */
        void *hc;
        release_pulls[t->released] = px_sched_next(S, 0, &hc);
    }
    t->released++;
}

static const px_host_ops pulled = { NULL, NULL, release };

static task *spawn(void (*body)(task *))
{
    task *t = &tasks[ntasks++];
    free(t->stack);
    memset(t, 0, sizeof *t);
    t->stack = malloc(TASK_STACK);
    CHECK(t->stack != NULL);
    t->body = body;
    CHECK_EQ(getcontext(&t->uc), 0);
    t->uc.uc_stack.ss_sp = t->stack;
    t->uc.uc_stack.ss_size = TASK_STACK;
    t->uc.uc_link = &root;
    uintptr_t p = (uintptr_t)t;
    makecontext(&t->uc, (void (*)(void))trampoline, 2, (unsigned)p, (unsigned)(p >> 32));
    t->f = px_spawn_hosted(S, &pulled, t);
    CHECK(t->f != NULL);
    return t;
}

static int waits_in, waits_out;   /* on_wait calls: entering, leaving */

static void on_wait(void *ctx, int entering)
{
    CHECK(ctx == &waits_in);
    CHECK_EQ(waits_in - waits_out, entering ? 0 : 1);   /* in pairs, in order */
    if (entering)
        waits_in++;
    else
        waits_out++;
}

static void fresh(void)
{
    px_sched_opts o = { .on_wait = on_wait, .on_wait_ctx = &waits_in };
    waits_in = waits_out = 0;
    S = px_sched_new(&o);
    CHECK(S != NULL);
    ntasks = 0;
    trail_len = 0;
    trail[0] = 0;
    last = 99;
}

/* -- turns: yields, parks, sleeps, joins, and C fibers in between ---------- */

static gate G;

static void yielder(task *me)
{
    for (int i = 0; i < 3; i++) {
        mark('a');
        CHECK_EQ(px_yield(), PX_EYIELD);
        pass(me, 0);
    }
}

static void other_yielder(task *me)
{
    for (int i = 0; i < 3; i++) {
        mark('b');
        CHECK_EQ(px_yield(), PX_EYIELD);
        pass(me, 0);
    }
}

static void *c_fiber(void *arg)
{
    (void)arg;
    mark('c');
    CHECK_EQ(gate_take(&G), 0);      /* a C fiber parks among pulled ones */
    mark('C');
    gate_give(&G);
    return NULL;
}

static void gate_keeper(task *me)
{
    CHECK_EQ(again_gate(me, &G), 0);
    CHECK_EQ(G.owner, px_self());
    CHECK_EQ(px_sched_post(S, c_fiber, NULL), 0);
    CHECK_EQ(PARKED(me, px_sleep(PX_MSEC(20))), 0);
    CHECK_EQ(gate_waiters(&G), 1);   /* the C fiber waits for us */
    mark('g');
    gate_give(&G);
}

static void joiner(task *me)
{
    px_fiber *keeper = tasks[2].f;
    int r;
    while ((r = px_join(keeper, NULL)) == PX_EYIELD)
        pass(me, 0);
    CHECK_EQ(r, 0);
    CHECK(tasks[2].done);
    mark('j');
}

SPEC(turns_in_fifo_order_with_c_fibers_between)
{
    fresh();
    spawn(yielder);
    spawn(other_yielder);
    spawn(gate_keeper);
    spawn(joiner);
    CHECK_EQ(px_sched_run(S), PX_EINVAL);   /* pulled fibers: px_sched_next only */
    CHECK_EQ(pass(NULL, 0), 0);
    /* j before C: the keeper's end hands its joiner the next turn */
    CHECK(strcmp(trail, "ababcabgjC") == 0);
    for (size_t i = 0; i < ntasks; i++)
        CHECK(tasks[i].done && tasks[i].released == 1);
    CHECK_EQ(px_self(), 0);                 /* the run is over: no fiber */
    px_sched_free(S);
}

/* -- deadlock, then cancel: every parked fiber unwinds ---------------------- */

static void stuck(task *me)
{
    int r = px_park("parked for good", NULL, NULL);
    CHECK_EQ(r, PX_EYIELD);
    CHECK_EQ(PARKED(me, r), PX_ECANCELED);
    CHECK_EQ(px_scope_push_timeout(PX_SEC(60)), 0);
    CHECK_EQ(px_sleep(PX_SEC(60)), PX_ECANCELED);   /* later waits end at once */
    CHECK_EQ(px_scope_pop(), 0);            /* no scope fired */
    CHECK_EQ(px_yield(), PX_EYIELD);        /* what does not wait goes on */
    pass(me, 0);
    mark('u');
}

static char dl_report[4096];

static void keep_report(void *ctx, const char *text)
{
    (void)ctx;
    snprintf(dl_report, sizeof dl_report, "%s", text);
}

SPEC(a_deadlock_ends_the_run_and_a_cancel_unwinds_the_fibers)
{
    px_sched_opts o = { .on_deadlock = keep_report };
    S = px_sched_new(&o);
    ntasks = trail_len = 0;
    spawn(stuck);
    CHECK_EQ(pass(NULL, 0), PX_EDEADLK);
    CHECK(strstr(dl_report, "parked for good") != NULL);
    CHECK_EQ(px_self(), 0);
    CHECK_EQ(px_sched_cancel(NULL), PX_EINVAL);
    CHECK_EQ(px_sched_cancel(S), 0);
    CHECK_EQ(pass(NULL, 0), 0);              /* a new run: it unwinds */
    CHECK(strcmp(trail, "u") == 0);
    CHECK(tasks[0].done);
    px_sched_free(S);
}

/* -- a signal while it waits: PX_EINTR, and the run goes on ----------------- */

static void on_signal(int sig) { (void)sig; }

static void *signaller(void *arg)
{
    pthread_t target = *(pthread_t *)arg;
    struct timespec ts = { 0, 50 * 1000 * 1000 };
    for (int i = 0; i < 200 && intrs == 0; i++) {
        nanosleep(&ts, NULL);
        pthread_kill(target, SIGUSR1);
    }
    return NULL;
}

static void sleeper(task *me)
{
    for (int i = 0; i < 400 && intrs == 0; i++)
        CHECK_EQ(PARKED(me, px_sleep(PX_MSEC(50))), 0);
    mark('s');
}

SPEC(a_signal_while_it_waits_returns_eintr_and_the_run_goes_on)
{
    struct sigaction sa = { .sa_handler = on_signal };   /* no SA_RESTART */
    CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
    fresh();
    intrs = 0;
    spawn(sleeper);
    pthread_t me = pthread_self(), th;
    CHECK_EQ(pthread_create(&th, NULL, signaller, &me), 0);
    CHECK_EQ(pass(NULL, 0), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_GE(intrs, 1);
    CHECK(strcmp(trail, "s") == 0);
    CHECK_GE(waits_in, 1);                  /* around each wait in the kernel */
    CHECK_EQ(waits_in, waits_out);
    px_sched_free(S);
}

/* -- refusals --------------------------------------------------------------- */

static void *pull_from_another_thread(void *arg)
{
    void *ctx;
    *(int *)arg = px_sched_next(S, 0, &ctx);
    return NULL;
}

static void *pull_from_a_c_fiber(void *arg)
{
    void *ctx;
    *(int *)arg = px_sched_next(S, 0, &ctx);
    return NULL;
}

static int from_thread, from_c_fiber, nested, spawn_refused;

static void prober(task *me)
{
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, pull_from_another_thread, &from_thread), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(px_sched_post(S, pull_from_a_c_fiber, &from_c_fiber), 0);
    px_sched *other = px_sched_new(NULL);
    void *ctx;
    nested = px_sched_next(other, 0, &ctx);
    px_sched_free(other);
    CHECK_EQ(px_yield(), PX_EYIELD);
    pass(me, 0);
}

static void *spawn_pulled_in_a_run(void *arg)
{
    px_sched *s = arg;
    spawn_refused = px_spawn_hosted(s, &pulled, NULL) == NULL;
    return NULL;
}

SPEC(refusals_change_nothing)
{
    void *ctx = (void *)1;
    CHECK_EQ(px_sched_next(NULL, 0, &ctx), PX_EINVAL);
    fresh();
    CHECK_EQ(px_sched_next(S, 0, NULL), PX_EINVAL);
    spawn(prober);
    CHECK_EQ(pass(NULL, 0), 0);
    CHECK_EQ(from_thread, PX_ETHREAD);
    CHECK_EQ(from_c_fiber, PX_EBUSY);
    CHECK_EQ(nested, PX_EBUSY);
    px_sched_free(S);

    px_sched *s = px_sched_new(NULL);       /* px_sched_run cannot run one */
    CHECK_EQ(px_sched_post(s, spawn_pulled_in_a_run, s), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK(spawn_refused);
    px_sched_free(s);
}

/* -- the hooks may not pull: no nested turn from on_wait or on_deadlock ----- */

static int hook_pulls[2], hook_posts, hook_calls;

static void *posted_from_hook(void *arg)
{
    (void)arg;
    mark('p');
    return NULL;
}

static void pulling_on_wait(void *ctx, int entering)
{
    (void)ctx;
    void *hc = (void *)1;
    hook_pulls[hook_calls++ & 1] = px_sched_next(S, 0, &hc);
    CHECK(hc == NULL || hc == (void *)1);
    if (entering && hook_posts++ == 0)   /* a post stays allowed (Lua's Ctrl-C) */
        CHECK_EQ(px_sched_post(S, posted_from_hook, NULL), 0);
}

static void naps(task *me)
{
    CHECK_EQ(PARKED(me, px_sleep(PX_MSEC(20))), 0);
    mark('n');
}

static void pulling_on_deadlock(void *ctx, const char *text)
{
    (void)ctx;
    (void)text;
    void *hc;
    hook_pulls[0] = px_sched_next(S, 0, &hc);
}

SPEC(hooks_may_not_pull)
{
    px_sched_opts o = { .on_wait = pulling_on_wait };
    S = px_sched_new(&o);
    CHECK(S != NULL);
    ntasks = trail_len = 0;
    trail[0] = 0;
    hook_calls = hook_posts = 0;
    hook_pulls[0] = hook_pulls[1] = 99;
    spawn(naps);
    CHECK_EQ(pass(NULL, 0), 0);              /* the run ends, no false deadlock */
    CHECK_GE(hook_calls, 2);
    CHECK_EQ(hook_pulls[0], PX_EBUSY);       /* entering */
    CHECK_EQ(hook_pulls[1], PX_EBUSY);       /* leaving */
    CHECK(strcmp(trail, "pn") == 0);         /* the post ran, then the sleeper */
    CHECK(tasks[0].done);
    px_sched_free(S);

    fresh();
    pull_in_release = 1;
    release_pulls[0] = 99;
    spawn(naps);
    CHECK_EQ(pass(NULL, 0), 0);
    pull_in_release = 0;
    CHECK_EQ(tasks[0].released, 1);
    CHECK_EQ(release_pulls[0], PX_EBUSY);
    px_sched_free(S);

    px_sched_opts d = { .on_deadlock = pulling_on_deadlock };
    S = px_sched_new(&d);
    CHECK(S != NULL);
    ntasks = 0;
    hook_pulls[0] = 99;
    spawn(stuck);
    CHECK_EQ(pass(NULL, 0), PX_EDEADLK);
    CHECK_EQ(hook_pulls[0], PX_EBUSY);
    px_sched_free(S);                        /* the stuck fiber is discarded */
}

/* -- a run given up between two pulls --------------------------------------- */

static void parks_forever(task *me)
{
    CHECK_EQ(again_gate(me, &G), 0);
    again_gate(me, &G);
    CHECK(0);   /* never resumed: the run is given up */
}

static void back_to_root(task *me)
{
    CHECK_EQ(swapcontext(&me->uc, &root), 0);   /* its turn, and the host quits */
    CHECK(0);
}

SPEC(a_free_between_pulls_gives_the_run_up)
{
    free(G.waiters);
    memset(&G, 0, sizeof G);
    fresh();
    spawn(parks_forever);
    spawn(back_to_root);
    CHECK_EQ(pass(NULL, 0), 99);             /* back while the second has its turn */
    CHECK_EQ(px_self(), tasks[1].f ? px_fiber_id(tasks[1].f) : 0);
    px_sched_free(S);                        /* from the root, between pulls */
    CHECK_EQ(tasks[0].released, 1);
    CHECK_EQ(tasks[1].released, 1);
    CHECK_EQ(px_self(), 0);
    S = px_sched_new(NULL);                  /* the thread may run another */
    CHECK_EQ(px_sched_run(S), 0);
    px_sched_free(S);
}

SPECS(turns_in_fifo_order_with_c_fibers_between,
      a_deadlock_ends_the_run_and_a_cancel_unwinds_the_fibers,
      a_signal_while_it_waits_returns_eintr_and_the_run_goes_on, refusals_change_nothing,
      hooks_may_not_pull, a_free_between_pulls_gives_the_run_up)
