/*
** fib_shared.c -- fibers on shared stacks (px_sched_opts.shared_stacks): each
** fiber's bytes are copied off its stack while another fiber of that stack
** runs and copied back before it runs again, so everything a fiber keeps on
** its stack must survive any interleaving, and everything the library keeps
** for others (scopes, waiters, hand-overs) must live off it.  One function per
** behaviour; an argument runs the one of that name only.
*/
#include <string.h>

#include "../spec.h"

static px_sched *running;   /* the scheduler of run_shared */

/* Runs main(arg) as the first fiber of a scheduler with `shared` shared
** stacks; returns what px_sched_run returned. */
static int run_shared(size_t shared, px_fiber_fn main, void *arg)
{
    px_sched_opts o;
    memset(&o, 0, sizeof o);
    o.shared_stacks = shared;
    px_sched *s = running = px_sched_new(&o);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, main, arg), 0);
    int r = px_sched_run(s);
    px_sched_free(s);
    return r;
}

/* -- options ---------------------------------------------------------------- */

SPEC(bad_options)
{
    px_sched_opts o;
    memset(&o, 0, sizeof o);
    o.shared_stacks = PX_SHARED_STACKS_MAX + 1;
    CHECK(px_sched_new(&o) == NULL);
    o.shared_stacks = (size_t)-1;
    CHECK(px_sched_new(&o) == NULL);
    o.shared_stacks = PX_SHARED_STACKS_MAX;
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    px_sched_free(s);
}

/* -- a fiber's own stack survives copies ------------------------------------- */

#define DEPTH 64       /* frames of FRAME bytes: 32 KiB of a 64 KiB stack (more under ASan) */
#define FRAME 512

static unsigned char pattern(int who, int depth, int i)
{
    return (unsigned char)(who * 131 + depth * 31 + i * 7 + 1);
}

static int deep(int who, int depth);
static int (*volatile deep_next)(int, int) = deep;   /* no tail call, no merging */

/* Fills a frame, recurses, yields at every level on the way down and up,
** and checks the frame and its address each time it is back. */
static int deep(int who, int depth)
{
    volatile unsigned char buf[FRAME];
    volatile unsigned char *self = buf;
    for (int i = 0; i < FRAME; i++)
        buf[i] = pattern(who, depth, i);
    CHECK_EQ(px_yield(), 0);
    int below = depth + 1 < DEPTH ? deep_next(who, depth + 1) : 0;
    CHECK_EQ(px_yield(), 0);
    CHECK(self == buf);
    for (int i = 0; i < FRAME; i++)
        CHECK_EQ(buf[i], pattern(who, depth, i));
    return below + 1;
}

static void *recurser(void *arg)
{
    return (void *)(intptr_t)deep((int)(intptr_t)arg, 0);
}

static void *recursion_main(void *arg)
{
    (void)arg;
    px_fiber *f[4];
    for (int i = 0; i < 4; i++)
        CHECK((f[i] = px_spawn(recurser, (void *)(intptr_t)i)) != NULL);
    for (int i = 0; i < 4; i++) {
        void *r;
        CHECK_EQ(px_join(f[i], &r), 0);
        CHECK_EQ((intptr_t)r, DEPTH);
        px_fiber_release(f[i]);
    }
    return NULL;
}

/* Four fibers 32 KiB deep on one stack, switching at every frame. */
SPEC(deep_recursion_across_switches)
{
    CHECK_EQ(run_shared(1, recursion_main, NULL), 0);
}

#define MANY 300
#define TURNS 50

static int finished;

/* A local array and a pointer to it, checked at every turn: each turn
** somebody else's bytes may have been on the stack in between. */
static void *interleaver(void *arg)
{
    int who = (int)(intptr_t)arg;
    uint64_t local[16];
    uint64_t *mine = local;
    for (int t = 0; t < TURNS; t++) {
        for (int i = 0; i < 16; i++)
            mine[i] = (uint64_t)who << 32 | (uint64_t)(t * 16 + i);
        for (int k = 0; k <= (who + t) % 3; k++)
            CHECK_EQ(px_yield(), 0);
        if ((who + t) % 7 == 0)
            CHECK_EQ(px_sleep(PX_USEC(10)), 0);
        for (int i = 0; i < 16; i++)
            CHECK_EQ(local[i], (uint64_t)who << 32 | (uint64_t)(t * 16 + i));
    }
    finished++;
    return NULL;
}

static void *interleave_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < MANY; i++)
        px_fiber_release(px_spawn(interleaver, (void *)(intptr_t)i));
    return NULL;
}

/* 300 fibers on 3 stacks, in turns of varying length, some asleep. */
SPEC(many_fibers_interleave_on_few_stacks)
{
    finished = 0;
    CHECK_EQ(run_shared(3, interleave_main, NULL), 0);
    CHECK_EQ(finished, MANY);
}

/* -- fibers with a size of their own ------------------------------------------ */

static void *writes_through(void *arg)
{
    px_yield();
    *(int *)arg = 42;
    return NULL;
}

/* A sized fiber passes a local to a child on a shared stack and joins it: the
** sized fiber's stack is its own, so the child's write lands while it waits. */
static void *sized_parent(void *arg)
{
    (void)arg;
    int local = 0;
    px_fiber *c = px_spawn(writes_through, &local);
    CHECK(c != NULL);
    CHECK_EQ(px_join(c, NULL), 0);
    px_fiber_release(c);
    CHECK_EQ(local, 42);
    return NULL;
}

static void *sized_main(void *arg)
{
    (void)arg;
    px_fiber *f = px_spawn_sized(sized_parent, NULL, 64 * 1024);
    CHECK(f != NULL);
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
    return NULL;
}

SPEC(sized_fibers_keep_their_own_stack)
{
    CHECK_EQ(run_shared(1, sized_main, NULL), 0);
}

/* -- scopes and tokens ---------------------------------------------------------- */

static int park_body(void *arg)
{
    (void)arg;
    return px_park("waits for its scope", NULL, NULL);
}

static int nested_body(void *arg)
{
    return px_with_timeout(PX_SEC(30), park_body, arg);   /* the outer one is nearer */
}

static int timeouts_done;

static void *timeout_fiber(void *arg)
{
    int64_t ns = PX_MSEC(5) + (int64_t)(intptr_t)arg * PX_USEC(100), t0 = px_now();
    CHECK_EQ(px_with_timeout(ns, nested_body, NULL), PX_ETIMEDOUT);
    CHECK_GE(px_now() - t0, ns);
    timeouts_done++;
    return NULL;
}

/* Yields with a stack full of 0x5a where the waiters keep their frames: what
** reads a waiter's stack while this one is resident reads garbage. */
static void scribble_and_yield(void)
{
    volatile unsigned char buf[4096];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = 0x5a;
    px_yield();
    (void)buf[0];
}

static void *busy_fiber(void *arg)
{
    (void)arg;
    int64_t until = px_now() + PX_MSEC(20);
    while (px_now() < until)
        scribble_and_yield();   /* on the waiters' stacks: their bytes are away */
    return NULL;
}

static void *timeouts_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++)
        px_fiber_release(px_spawn(timeout_fiber, (void *)(intptr_t)i));
    px_fiber_release(px_spawn(busy_fiber, NULL));
    return NULL;
}

/* Nested timeout scopes of fibers whose stacks others use while they wait:
** the scheduler reads the scopes when the deadlines pass. */
SPEC(timeout_scopes_while_parked)
{
    timeouts_done = 0;
    CHECK_EQ(run_shared(2, timeouts_main, NULL), 0);
    CHECK_EQ(timeouts_done, 20);
}

#define CANCELLED 16

static px_token *tok;
static countdown parked_in_scope;
static int cancels;

static int cancel_body(void *arg)
{
    (void)arg;
    countdown_hit(&parked_in_scope);
    return px_park("waits for a cancel from another thread", NULL, NULL);
}

static int cancel_in_timeout(void *arg)
{
    return px_with_cancel(tok, cancel_body, arg);
}

static void *cancel_fiber(void *arg)
{
    (void)arg;
    CHECK_EQ(px_with_timeout(PX_SEC(60), cancel_in_timeout, NULL), PX_ECANCELED);
    cancels++;
    return NULL;
}

static void *cancel_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < CANCELLED; i++)
        px_fiber_release(px_spawn(cancel_fiber, NULL));
    px_fiber_release(px_spawn(busy_fiber, NULL));
    return NULL;
}

static void *canceller(void *arg)
{
    EV_WAIT(&parked_in_scope.latch, 1);
    sleep_ns(PX_MSEC(5));   /* while the busy fiber runs on their stacks */
    CHECK_EQ(px_token_cancel(tok), 1);
    CHECK_EQ(px_sched_unhold(arg), 0);
    return NULL;
}

/* A thread cancels a token whose watchers are the scopes of fibers parked on
** shared stacks: it walks and unlinks them while other fibers run there. */
SPEC(token_cancel_from_another_thread)
{
    px_sched_opts o;
    memset(&o, 0, sizeof o);
    o.shared_stacks = 2;
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    tok = px_token_new();
    CHECK(tok != NULL);
    countdown_init(&parked_in_scope, CANCELLED);
    cancels = 0;
    CHECK_EQ(px_sched_hold(s), 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, canceller, s) == 0);
    CHECK_EQ(px_sched_post(s, cancel_main, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    pthread_join(th, NULL);
    CHECK_EQ(cancels, CANCELLED);
    px_sched_free(s);
    px_token_free(tok);
    ev_destroy(&parked_in_scope.latch);
}

/* px_sched_free discards fibers parked in scopes on shared stacks: those
** scopes are on the heap, and freed (the ASan build's leak check would see
** them otherwise). */
static int scoped_deeper(void *arg)
{
    (void)arg;
    return px_with_cancel(tok, park_body, NULL);
}

static void *scoped_parker(void *arg)
{
    (void)arg;
    px_with_cancel(tok, scoped_deeper, NULL);   /* discarded while it waits */
    return NULL;
}

static void quiet(void *ctx, const char *text)
{
    (void)ctx;
    (void)text;
}

SPEC(free_discards_parked_scopes)
{
    px_sched_opts o;
    memset(&o, 0, sizeof o);
    o.shared_stacks = 1;
    o.on_deadlock = quiet;
    px_sched *s = px_sched_new(&o);
    tok = px_token_new();
    CHECK(s != NULL && tok != NULL);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(px_sched_post(s, scoped_parker, NULL), 0);
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);   /* nobody holds it for a cancel */
    px_sched_free(s);
    px_token_free(tok);
}

/* -- the sync family -------------------------------------------------------- */

static px_mutex *mu;
static px_chan *ch, *bch;
static px_rwlock *rw;
static px_waitgroup *wg;
static px_barrier *bar;
static px_sem *sem;
static px_event *ev;
static px_once *once;
static long counter, sum, readers_seen, once_runs, at_event;

static int once_action(void *arg)
{
    (void)arg;
    px_yield();   /* late callers park meanwhile */
    once_runs++;
    return 0;
}

/* Every primitive in turn, by fibers of few shared stacks: each hand-off
** goes to a fiber whose bytes are elsewhere. */
static void *family_member(void *arg)
{
    long who = (long)(intptr_t)arg;
    for (int i = 0; i < 20; i++) {
        CHECK_EQ(px_mutex_lock(mu), 0);
        long c = counter;
        px_yield();
        counter = c + 1;
        CHECK_EQ(px_mutex_unlock(mu), 0);
    }
    CHECK_EQ(px_chan_send(ch, (void *)(intptr_t)(who + 1)), 0);
    void *v;
    CHECK_EQ(px_chan_recv(bch, &v), 0);
    sum += (long)(intptr_t)v;
    if (who % 4 == 0) {
        CHECK_EQ(px_rwlock_wrlock(rw), 0);
        px_yield();
        CHECK_EQ(px_rwlock_wrunlock(rw), 0);
    } else {
        CHECK_EQ(px_rwlock_rdlock(rw), 0);
        readers_seen++;
        px_yield();
        CHECK_EQ(px_rwlock_rdunlock(rw), 0);
    }
    CHECK_EQ(px_sem_acquire(sem), 0);
    px_yield();
    CHECK_EQ(px_sem_release(sem), 0);
    CHECK(px_barrier_arrive_and_wait(bar) >= 0);
    at_event++;   /* and parks at once, with no switch between */
    CHECK_EQ(px_event_wait(ev), 0);
    CHECK_EQ(px_once_do(once, once_action, NULL), 0);
    CHECK_EQ(px_waitgroup_done(wg), 0);
    return NULL;
}

#define MEMBERS 12

static void *family_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_waitgroup_add(wg, MEMBERS), 0);
    for (long i = 0; i < MEMBERS; i++)
        px_fiber_release(px_spawn(family_member, (void *)(intptr_t)i));
    long got = 0;
    for (int i = 0; i < MEMBERS; i++) {   /* unbuffered: each send waits for this */
        void *v;
        CHECK_EQ(px_chan_recv(ch, &v), 0);
        got += (long)(intptr_t)v;
        CHECK_EQ(px_chan_send(bch, v), 0);
    }
    CHECK_EQ(got, MEMBERS * (MEMBERS + 1) / 2);
    while (at_event < MEMBERS)   /* every member parked in px_event_wait */
        CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_event_set(ev), MEMBERS);
    CHECK_EQ(px_waitgroup_wait(wg), 0);
    return NULL;
}

SPEC(sync_family)
{
    CHECK((mu = px_mutex_new()) != NULL);
    CHECK((ch = px_chan_new(0)) != NULL);
    CHECK((bch = px_chan_new(2)) != NULL);
    CHECK((rw = px_rwlock_new()) != NULL);
    CHECK((wg = px_waitgroup_new()) != NULL);
    CHECK((bar = px_barrier_new(MEMBERS)) != NULL);
    CHECK((sem = px_sem_new(2)) != NULL);
    CHECK((ev = px_event_new()) != NULL);
    CHECK((once = px_once_new()) != NULL);
    counter = sum = readers_seen = once_runs = at_event = 0;
    CHECK_EQ(run_shared(2, family_main, NULL), 0);
    CHECK_EQ(counter, 20 * MEMBERS);
    CHECK_EQ(sum, MEMBERS * (MEMBERS + 1) / 2);
    CHECK_EQ(readers_seen, MEMBERS - MEMBERS / 4);
    CHECK_EQ(once_runs, 1);
    CHECK_EQ(px_mutex_free(mu), 0);
    CHECK_EQ(px_chan_free(ch), 0);
    CHECK_EQ(px_chan_free(bch), 0);
    CHECK_EQ(px_rwlock_free(rw), 0);
    CHECK_EQ(px_waitgroup_free(wg), 0);
    CHECK_EQ(px_barrier_free(bar), 0);
    CHECK_EQ(px_sem_free(sem), 0);
    CHECK_EQ(px_event_free(ev), 0);
    CHECK_EQ(px_once_free(once), 0);
}

/* -- the deadlock report ------------------------------------------------------- */

static char dl_report[4096];

static void keep_report(void *ctx, const char *text)
{
    (void)ctx;
    snprintf(dl_report, sizeof dl_report, "%s", text);
}

static px_mutex *dm[2];

static void *lock_both(void *arg)
{
    int i = (int)(intptr_t)arg;
    CHECK_EQ(px_mutex_lock(dm[i]), 0);
    px_yield();
    px_mutex_lock(dm[1 - i]);
    return NULL;
}

static void *deadlock_main(void *arg)
{
    (void)arg;
    px_fiber_release(px_spawn(lock_both, (void *)0));
    px_fiber_release(px_spawn(lock_both, (void *)1));
    return NULL;
}

/* Two fibers of one shared stack lock in opposite orders: the report names
** the cycle from the records alone, with neither fiber's bytes resident. */
SPEC(deadlock_report)
{
    px_sched_opts o;
    memset(&o, 0, sizeof o);
    o.shared_stacks = 1;
    o.on_deadlock = keep_report;
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    dm[0] = px_mutex_new();
    dm[1] = px_mutex_new();
    CHECK_EQ(px_sched_post(s, deadlock_main, NULL), 0);
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);
    CHECK(strstr(dl_report, "Mutex lock") != NULL);
    CHECK(strstr(dl_report, "cycle") != NULL);
    px_sched_free(s);
    px_mutex_free(dm[0]);
    px_mutex_free(dm[1]);
}

/* -- hosted fibers -------------------------------------------------------------- */

/* A host that cannot switch inside C (as Lua): each resume runs to the next
** park, which returns PX_EYIELD. */
typedef struct host {
    int step, released;
    void *got;
} host;

static px_chan *hch;

static int host_resume(void *ctx)
{
    host *h = ctx;
    switch (h->step++) {
    case 0:
        CHECK_EQ(px_chan_recv(hch, &h->got), PX_EYIELD);   /* a C fiber sends */
        return 0;
    case 1:
        CHECK_EQ(px_chan_recv(hch, &h->got), 0);           /* collects it */
        CHECK_EQ(px_sleep(PX_MSEC(1)), PX_EYIELD);
        return 0;
    default:
        CHECK_EQ(px_park_result(), 0);
        return PX_HOST_DONE;
    }
}

static void host_release(void *ctx)
{
    ((host *)ctx)->released++;
}

static void *host_sender(void *arg)
{
    scribble_and_yield();   /* a stack full of 0x5a while the host waits */
    CHECK_EQ(px_chan_send(hch, arg), 0);
    return NULL;
}

static void *hosted_main(void *arg)
{
    host *h = arg;
    px_host_ops ops = { host_resume, NULL, host_release };
    px_fiber *hf = px_spawn_hosted(running, &ops, h);
    CHECK(hf != NULL);
    px_fiber *c = px_spawn(host_sender, &hch);
    CHECK(c != NULL);
    void *r = &r;
    CHECK_EQ(px_join(hf, &r), 0);
    CHECK(r == NULL);                   /* a hosted fiber's result */
    CHECK_EQ(px_join(c, NULL), 0);
    px_fiber_release(hf);
    px_fiber_release(c);
    return NULL;
}

/* A scheduler with shared stacks runs hosted fibers as any: they have no C
** stack of the library's, and their record keeps the host's ops where a C
** fiber keeps its stack. */
SPEC(hosted_fibers_beside_shared_stacks)
{
    host h = { 0, 0, NULL };
    CHECK((hch = px_chan_new(0)) != NULL);
    CHECK_EQ(run_shared(1, hosted_main, &h), 0);
    CHECK_EQ(h.step, 3);
    CHECK(h.got == &hch);
    CHECK_EQ(h.released, 1);
    CHECK_EQ(px_chan_free(hch), 0);
}

/* -- out of memory for a saved copy ------------------------------------------- */

/* shared.c's allocator of saved copies (fiber.h): the test fails it on demand. */
extern void *(*px__shared_realloc)(void *p, size_t n);

static int nomem;   /* while set, no buffer for a saved copy can be had */

static void *failing_realloc(void *p, size_t n)
{
    return nomem ? NULL : realloc(p, n);
}

static px_mutex *om;
static px_chan *oc;
static int ophase;
static void *ogot;

static int op_lock(void) { return px_mutex_lock(om); }
static int op_recv(void) { return px_chan_recv(oc, &ogot); }
static int op_yield(void) { return px_yield(); }
static int op_sleep(void) { return px_sleep(PX_USEC(10)); }

static px_fiber *ochild;
static int op_join(void) { return px_join(ochild, NULL); }

/* Runs shallow (its copy never grows) until the victim is done failing. */
static void *nomem_child(void *arg)
{
    (void)arg;
    while (ophase < 1)
        CHECK_EQ(px_yield(), 0);
    return &ochild;
}

static int deep_op(int depth, int (*op)(void));
static int (*volatile deep_op_next)(int, int (*)(void)) = deep_op;

/* `depth` frames of FRAME bytes, then op: its switch must save all of them. */
static int deep_op(int depth, int (*op)(void))
{
    volatile unsigned char buf[FRAME];
    for (int i = 0; i < FRAME; i++)
        buf[i] = pattern(9, depth, i);
    int r = depth > 0 ? deep_op_next(depth - 1, op) : op();
    for (int i = 0; i < FRAME; i++)
        CHECK_EQ(buf[i], pattern(9, depth, i));
    return r;
}

/* Shallow first, so its copy is small; then 8 KiB deeper, where every way of
** leaving the CPU needs a bigger copy and none can be had. */
static void *nomem_victim(void *arg)
{
    (void)arg;
    CHECK((ochild = px_spawn(nomem_child, NULL)) != NULL);
    CHECK_EQ(px_yield(), 0);
    nomem = 1;
    CHECK_EQ(deep_op(16, op_lock), PX_ENOMEM);    /* om is main's */
    CHECK_EQ(deep_op(16, op_recv), PX_ENOMEM);    /* nobody sends */
    CHECK_EQ(deep_op(16, op_yield), PX_ENOMEM);
    CHECK_EQ(deep_op(16, op_sleep), PX_ENOMEM);
    CHECK_EQ(deep_op(16, op_join), PX_ENOMEM);    /* the child runs on */
    nomem = 0;
    ophase = 1;
    while (ophase < 2)   /* main looks at what the failed waits left */
        CHECK_EQ(px_yield(), 0);
    CHECK_EQ(deep_op(16, op_lock), 0);            /* now it waits, and gets it */
    CHECK_EQ(px_mutex_unlock(om), 0);
    CHECK_EQ(deep_op(16, op_recv), 0);
    CHECK(ogot == (void *)&ophase);
    void *r;
    CHECK_EQ(deep_op(16, op_join), 0);            /* no joiner left behind */
    CHECK_EQ(px_join(ochild, &r), 0);
    CHECK(r == &ochild);
    px_fiber_release(ochild);
    ophase = 3;
    return NULL;
}

static void *nomem_main(void *arg)
{
    (void)arg;
    CHECK((om = px_mutex_new()) != NULL);
    CHECK((oc = px_chan_new(0)) != NULL);
    CHECK_EQ(px_mutex_lock(om), 0);
    px_fiber *v = px_spawn(nomem_victim, NULL);
    CHECK(v != NULL);
    while (ophase < 1)
        CHECK_EQ(px_yield(), 0);
    /* The failed lock left no waiter: unlocking frees om, nobody gets it. */
    CHECK_EQ(px_mutex_unlock(om), 0);
    CHECK_EQ(px_mutex_trylock(om), 0);
    ophase = 2;
    for (int i = 0; i < 3; i++)   /* the victim parks on om, for real now */
        CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_mutex_unlock(om), 0);
    /* The failed receive left no receiver to swallow this: the victim's
    ** second receive gets it. */
    CHECK_EQ(px_chan_send(oc, &ophase), 0);
    CHECK_EQ(px_join(v, NULL), 0);
    px_fiber_release(v);
    CHECK_EQ(ophase, 3);
    CHECK_EQ(px_mutex_free(om), 0);
    CHECK_EQ(px_chan_free(oc), 0);
    return NULL;
}

/* Memory for a parked fiber's copy runs out: the park (lock, receive, yield,
** sleep, join) returns PX_ENOMEM at once, leaves nothing queued, and the program
** goes on -- three fibers on one stack, so every switch is an eviction. */
SPEC(park_out_of_memory)
{
    px__shared_realloc = failing_realloc;
    CHECK_EQ(run_shared(1, nomem_main, NULL), 0);
    px__shared_realloc = realloc;
}

SPECS(bad_options, deep_recursion_across_switches, many_fibers_interleave_on_few_stacks,
      sized_fibers_keep_their_own_stack, timeout_scopes_while_parked,
      token_cancel_from_another_thread, free_discards_parked_scopes, sync_family,
      deadlock_report, hosted_fibers_beside_shared_stacks, park_out_of_memory)
