/*
** pool.c -- the blocking pool (px_run_blocking, px_blocking_cancelled,
** px_blocking_set_max): one SPEC (one ctest io.<name>) per behaviour.  The
** pool is process-wide, so each spec leaves it as it found it: the default
** cap, no job blocked -- except the last, whose job never ends.  Jobs that
** must block wait on latches (check.h), never on a guess of how long.
*/
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../spec.h"
#include "io/pool.h"

#define DEFAULT_CAP 64

/* On a fiber: waits (1 ms sleeps) until cond holds; a hang fails the test. */
#define FIBER_WAIT_UNTIL(cond) do { \
    int64_t t0_ = px_now(); \
    while (!(cond)) { \
        CHECK(px_now() - t0_ < PX_TEST_TIMEOUT_NS); \
        CHECK_EQ(px_sleep(PX_MSEC(1)), 0); \
    } \
} while (0)

/* A job that blocks until its gate opens: `started` counts it in, and it
** returns `ret`.  While it waits it notes whether px_blocking_cancelled()
** turned 1 (`saw_cancel`). */
typedef struct gated {
    px_latch gate;
    px_latch started;
    atomic_int saw_cancel;
    atomic_int ran;
    void *ret;
} gated;

static void gated_init(gated *g, void *ret)
{
    ev_init(&g->gate);
    ev_init(&g->started);
    atomic_store(&g->saw_cancel, 0);
    atomic_store(&g->ran, 0);
    g->ret = ret;
}

static void *gated_job(void *arg)
{
    gated *g = arg;
    atomic_fetch_add(&g->ran, 1);
    CHECK_EQ(px_blocking_cancelled(), 0);
    ev_set(&g->started);
    while (!ev_wait_n_ns(&g->gate, 1, PX_MSEC(2)))
        if (px_blocking_cancelled())
            atomic_store(&g->saw_cancel, 1);
    if (px_blocking_cancelled())
        atomic_store(&g->saw_cancel, 1);
    return g->ret;
}

/* gated_job for a call whose arg is { gated *, released * } (count_release's). */
static void *gated_ctx_job(void *arg)
{
    return gated_job(((void **)arg)[0]);
}

/* A release that counts its calls and keeps the last result it got. */
typedef struct released {
    atomic_int calls;
    void *_Atomic result;
    atomic_int on_fiber;         /* px_self() was not 0 in the call */
} released;

static void count_release(void *arg, void *result)
{
    released *r = ((void **)arg)[1];
    atomic_store(&r->result, result);
    atomic_store(&r->on_fiber, px_self() != 0);
    atomic_fetch_add(&r->calls, 1);
}

/* -- 1,000 jobs from 100 fibers ----------------------------------------------- */

static void *square_job(void *arg)
{
    intptr_t n = (intptr_t)arg;
    return (void *)(n * n);
}

static atomic_int squares_done;

static void *square_fiber(void *arg)
{
    intptr_t base = (intptr_t)arg * 10;
    for (intptr_t i = base; i < base + 10; i++) {
        void *r = (void *)1;
        CHECK_EQ(px_run_blocking(square_job, (void *)i, NULL, 0, &r), 0);
        CHECK_EQ((intptr_t)r, i * i);
        atomic_fetch_add(&squares_done, 1);
    }
    return NULL;
}

static void *thousand_main(void *arg)
{
    (void)arg;
    px_fiber *f[100];
    for (intptr_t i = 0; i < 100; i++)
        CHECK((f[i] = px_spawn(square_fiber, (void *)i)) != NULL);
    for (int i = 0; i < 100; i++) {
        CHECK_EQ(px_join(f[i], NULL), 0);
        px_fiber_release(f[i]);
    }
    return NULL;
}

SPEC(pool_thousand_jobs_from_a_hundred_fibers_each_get_their_result)
{
    CHECK_EQ(px_run(thousand_main, NULL, NULL), 0);
    CHECK_EQ(atomic_load(&squares_done), 1000);
}

/* -- cancelled before it starts ------------------------------------------------- */

static atomic_int never_ran;

static void *never_job(void *arg)
{
    (void)arg;
    atomic_fetch_add(&never_ran, 1);
    return (void *)7;
}

static void *blocker_fiber(void *arg)
{
    void *r = NULL;
    CHECK_EQ(px_run_blocking(gated_job, arg, NULL, 0, &r), 0);
    CHECK(r == ((gated *)arg)->ret);
    return NULL;
}

typedef struct queued_call {
    void *ctx[2];                /* count_release's arg: { unused, &released } */
    released rel;
    unsigned flags;
} queued_call;

static int queued_body(void *arg)
{
    queued_call *q = arg;
    void *r = (void *)1;
    int rc = px_run_blocking(never_job, q->ctx, count_release, q->flags, &r);
    CHECK(r == NULL);
    return rc;
}

static void *before_start_main(void *arg)
{
    (void)arg;
    gated g;
    gated_init(&g, (void *)3);
    CHECK_EQ(px_blocking_set_max(1), 0);
    px_fiber *b = px_spawn(blocker_fiber, &g);
    CHECK(b != NULL);
    FIBER_WAIT_UNTIL(ev_count(&g.started) == 1);
    for (unsigned flags = 0; flags <= PX_BLOCKING_ABANDON; flags++) {
        queued_call q = { .flags = flags };
        q.ctx[1] = &q.rel;
        CHECK_EQ(px_with_timeout(PX_MSEC(20), queued_body, &q), PX_ETIMEDOUT);
        /* Released once, with NULL, on the calling fiber before the return. */
        CHECK_EQ(atomic_load(&q.rel.calls), 1);
        CHECK(atomic_load(&q.rel.result) == NULL);
        CHECK_EQ(atomic_load(&q.rel.on_fiber), 1);
    }
    ev_set(&g.gate);
    CHECK_EQ(px_join(b, NULL), 0);
    px_fiber_release(b);
    CHECK_EQ(px_blocking_set_max(DEFAULT_CAP), 0);
    return NULL;
}

SPEC(pool_cancelled_before_start_never_runs_and_is_released_with_null)
{
    CHECK_EQ(px_run(before_start_main, NULL, NULL), 0);
    CHECK_EQ(atomic_load(&never_ran), 0);
}

/* A scope that fired before the call: the job is never submitted, so no idle
** pool thread can take it before the park looks at the scope.  Many rounds,
** with idle threads waiting, for the race to show if it is there. */
static void *noop_job(void *arg) { return arg; }

static void *fired_main(void *arg)
{
    (void)arg;
    void *r;
    CHECK_EQ(px_run_blocking(noop_job, NULL, NULL, 0, &r), 0);   /* an idle thread */
    px_token *tok = px_token_new();
    CHECK(tok != NULL);
    CHECK_EQ(px_token_cancel(tok), 1);
    CHECK_EQ(px_scope_push_cancel(tok), 0);
    for (int i = 0; i < 200; i++) {
        for (unsigned flags = 0; flags <= PX_BLOCKING_ABANDON; flags++) {
            queued_call q = { .flags = flags };
            q.ctx[1] = &q.rel;
            CHECK_EQ(queued_body(&q), PX_ECANCELED);
            CHECK_EQ(atomic_load(&q.rel.calls), 1);     /* released, with NULL */
            CHECK(atomic_load(&q.rel.result) == NULL);
        }
    }
    CHECK_EQ(px_scope_pop(), PX_ECANCELED);
    px_token_free(tok);
    return NULL;
}

SPEC(pool_a_scope_fired_before_the_call_runs_no_job)
{
    CHECK_EQ(px_run(fired_main, NULL, NULL), 0);
    CHECK_EQ(atomic_load(&never_ran), 0);
}

/* -- cancelled while it runs ---------------------------------------------------- */

typedef struct running_call {
    gated g;
    void *ctx[2];
    released rel;
    unsigned flags;
    px_token *tok;
    int rc;
    void *result;
    atomic_int returned;
    int64_t took;
} running_call;

static void *running_waiter(void *arg)
{
    running_call *c = arg;
    CHECK_EQ(px_scope_push_cancel(c->tok), 0);
    int64_t t0 = px_now();
    c->rc = px_run_blocking(gated_ctx_job, c->ctx, count_release, c->flags, &c->result);
    c->took = px_now() - t0;
    atomic_store(&c->returned, 1);
    CHECK_EQ(px_scope_pop(), PX_ECANCELED);   /* the scope fired either way */
    return NULL;
}

/* gated_job's arg is the gated record, which starts the running_call. */
static void running_init(running_call *c, unsigned flags)
{
    memset(c, 0, sizeof *c);
    gated_init(&c->g, (void *)11);
    c->ctx[1] = &c->rel;
    c->flags = flags;
    CHECK((c->tok = px_token_new()) != NULL);
}

static void *wait_default_main(void *arg)
{
    running_call *c = arg;
    px_fiber *w = px_spawn(running_waiter, c);
    CHECK(w != NULL);
    FIBER_WAIT_UNTIL(ev_count(&c->g.started) == 1);
    CHECK_EQ(px_token_cancel(c->tok), 1);
    /* The scope fired while the job ran: the job sees it, the waiter waits. */
    FIBER_WAIT_UNTIL(atomic_load(&c->g.saw_cancel));
    CHECK_EQ(atomic_load(&c->returned), 0);
    ev_set(&c->g.gate);
    CHECK_EQ(px_join(w, NULL), 0);
    px_fiber_release(w);
    return NULL;
}

SPEC(pool_cancelled_while_running_waits_for_the_result_by_default)
{
    static running_call c;
    running_init(&c, 0);
    c.ctx[0] = &c.g;
    CHECK_EQ(px_run(wait_default_main, &c, NULL), 0);
    CHECK_EQ(c.rc, 0);
    CHECK(c.result == (void *)11);
    CHECK_EQ(atomic_load(&c.rel.calls), 0);   /* the caller got the result */
    px_token_free(c.tok);
}

static void *abandon_main(void *arg)
{
    running_call *c = arg;
    px_fiber *w = px_spawn(running_waiter, c);
    CHECK(w != NULL);
    FIBER_WAIT_UNTIL(ev_count(&c->g.started) == 1);
    CHECK_EQ(px_token_cancel(c->tok), 1);
    CHECK_EQ(px_join(w, NULL), 0);   /* returns while the job still runs */
    px_fiber_release(w);
    CHECK_EQ(ev_count(&c->g.gate), 0);
    CHECK_EQ(atomic_load(&c->rel.calls), 0);
    ev_set(&c->g.gate);
    FIBER_WAIT_UNTIL(atomic_load(&c->rel.calls) == 1);
    return NULL;
}

SPEC(pool_cancelled_while_running_with_abandon_returns_at_once_and_releases_later)
{
    static running_call c;
    running_init(&c, PX_BLOCKING_ABANDON);
    c.ctx[0] = &c.g;
    CHECK_EQ(px_run(abandon_main, &c, NULL), 0);
    CHECK_EQ(c.rc, PX_ECANCELED);
    CHECK(c.result == NULL);
    CHECK(c.took < PX_SEC(5));
    CHECK_EQ(atomic_load(&c.g.saw_cancel), 1);
    /* Released once, with fn's result, on the pool thread. */
    CHECK_EQ(atomic_load(&c.rel.calls), 1);
    CHECK(atomic_load(&c.rel.result) == (void *)11);
    CHECK_EQ(atomic_load(&c.rel.on_fiber), 0);
    px_token_free(c.tok);
}

/* -- px_blocking_cancelled lets fn stop early ------------------------------------ */

static void *until_cancelled_job(void *arg)
{
    px_latch *started = arg;
    CHECK_EQ(px_blocking_cancelled(), 0);
    ev_set(started);
    int64_t t0 = px_now();
    while (!px_blocking_cancelled()) {
        CHECK(px_now() - t0 < PX_TEST_TIMEOUT_NS);
        sleep_ns(PX_USEC(200));
    }
    return (void *)5;
}

static int until_cancelled_body(void *arg)
{
    void *r = NULL;
    int rc = px_run_blocking(until_cancelled_job, arg, NULL, 0, &r);
    CHECK(r == (void *)5);
    return rc;
}

typedef struct cancel_ctx {
    px_token *tok;
    px_latch started;
    int rc;
} cancel_ctx;

static void *cancelled_waiter(void *arg)
{
    cancel_ctx *c = arg;
    c->rc = px_with_cancel(c->tok, until_cancelled_body, &c->started);
    return NULL;
}

static void *cancelled_main(void *arg)
{
    cancel_ctx *c = arg;
    px_fiber *w = px_spawn(cancelled_waiter, c);
    CHECK(w != NULL);
    FIBER_WAIT_UNTIL(ev_count(&c->started) == 1);
    CHECK_EQ(px_token_cancel(c->tok), 1);
    CHECK_EQ(px_join(w, NULL), 0);
    px_fiber_release(w);
    return NULL;
}

SPEC(pool_fn_sees_px_blocking_cancelled_and_may_stop_early)
{
    CHECK_EQ(px_blocking_cancelled(), 0);   /* not a pool thread */
    cancel_ctx c;
    CHECK((c.tok = px_token_new()) != NULL);
    ev_init(&c.started);
    CHECK_EQ(px_run(cancelled_main, &c, NULL), 0);
    CHECK_EQ(c.rc, 0);   /* by default the result is delivered */
    px_token_free(c.tok);
}

/* -- a stray wake does not end the wait ------------------------------------------ */

typedef struct stray_ctx {
    gated g;
    atomic_int returned;
} stray_ctx;

static void *stray_waiter(void *arg)
{
    stray_ctx *c = arg;
    void *r = NULL;
    CHECK_EQ(px_run_blocking(gated_job, &c->g, NULL, 0, &r), 0);
    CHECK(r == (void *)9);
    atomic_store(&c->returned, 1);
    return NULL;
}

static void *stray_main(void *arg)
{
    stray_ctx *c = arg;
    px_fiber *w = px_spawn(stray_waiter, c);
    CHECK(w != NULL);
    FIBER_WAIT_UNTIL(ev_count(&c->g.started) == 1);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(px_wake(px_fiber_id(w)), 1);
        CHECK_EQ(px_yield(), 0);   /* it runs, looks, parks again */
        CHECK_EQ(atomic_load(&c->returned), 0);
    }
    ev_set(&c->g.gate);
    CHECK_EQ(px_join(w, NULL), 0);
    CHECK_EQ(atomic_load(&c->returned), 1);
    px_fiber_release(w);
    return NULL;
}

SPEC(pool_stray_wake_does_not_end_the_wait)
{
    stray_ctx c;
    gated_init(&c.g, (void *)9);
    atomic_store(&c.returned, 0);
    CHECK_EQ(px_run(stray_main, &c, NULL), 0);
}

/* -- release exactly once --------------------------------------------------------- */

#define ONCE_JOBS 400

typedef struct once_job {
    atomic_int releases;
    atomic_int ran;
    int rc;                      /* what the call returned */
    void *got;
} once_job;

static once_job once_jobs[ONCE_JOBS];
static atomic_int once_released;

static void *once_fn(void *arg)
{
    once_job *j = arg;
    atomic_fetch_add(&j->ran, 1);
    sleep_ns(PX_USEC((j - once_jobs) % 7 * 150));
    return j;
}

static void once_release(void *arg, void *result)
{
    once_job *j = arg;
    CHECK(result == NULL || result == j);
    CHECK(result != NULL || atomic_load(&j->ran) == 0);
    atomic_fetch_add(&j->releases, 1);
    atomic_fetch_add(&once_released, 1);
}

static int once_body(void *arg)
{
    once_job *j = arg;
    unsigned flags = (j - once_jobs) % 2 ? PX_BLOCKING_ABANDON : 0;
    return px_run_blocking(once_fn, j, once_release, flags, &j->got);
}

static void *once_fiber(void *arg)
{
    intptr_t k = (intptr_t)arg;
    for (intptr_t i = k; i < ONCE_JOBS; i += 40) {
        once_job *j = &once_jobs[i];
        j->rc = px_with_timeout(PX_USEC(i % 11 * 100), once_body, j);
        CHECK(j->rc == 0 || j->rc == PX_ETIMEDOUT);
    }
    return NULL;
}

static void *once_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_blocking_set_max(4), 0);
    px_fiber *f[40];
    for (intptr_t i = 0; i < 40; i++)
        CHECK((f[i] = px_spawn(once_fiber, (void *)i)) != NULL);
    for (int i = 0; i < 40; i++) {
        CHECK_EQ(px_join(f[i], NULL), 0);
        px_fiber_release(f[i]);
    }
    int owed = 0;
    for (int i = 0; i < ONCE_JOBS; i++)
        owed += once_jobs[i].rc != 0;
    FIBER_WAIT_UNTIL(atomic_load(&once_released) == owed);
    CHECK_EQ(px_blocking_set_max(DEFAULT_CAP), 0);
    return (void *)(intptr_t)owed;
}

SPEC(pool_release_runs_exactly_once_for_every_job_the_caller_did_not_get)
{
    void *owed;
    CHECK_EQ(px_run(once_main, NULL, &owed), 0);
    int got = 0, cancelled_unrun = 0, abandoned = 0;
    for (int i = 0; i < ONCE_JOBS; i++) {
        once_job *j = &once_jobs[i];
        CHECK(atomic_load(&j->ran) <= 1);
        if (j->rc == 0) {
            got++;
            CHECK(j->got == j);
            CHECK_EQ(atomic_load(&j->ran), 1);
            CHECK_EQ(atomic_load(&j->releases), 0);
        } else {
            CHECK(j->got == NULL);
            CHECK_EQ(atomic_load(&j->releases), 1);
            cancelled_unrun += atomic_load(&j->ran) == 0;
            abandoned += atomic_load(&j->ran) == 1;
        }
    }
    CHECK_EQ(got + cancelled_unrun + abandoned, ONCE_JOBS);
    CHECK_EQ(cancelled_unrun + abandoned, (intptr_t)owed);
    printf("collected %d, cancelled before start %d, abandoned %d\n", got, cancelled_unrun,
           abandoned);
}

/* -- fiber calls from fn ----------------------------------------------------------- */

static void *fiber_calls_job(void *arg)
{
    (void)arg;
    CHECK_EQ(px_self(), 0);
    CHECK_EQ(px_yield(), PX_ENOFIBER);
    CHECK_EQ(px_sleep(PX_MSEC(1)), PX_ENOFIBER);
    CHECK_EQ(px_park("no", NULL, NULL), PX_ENOFIBER);
    CHECK(px_spawn(square_job, NULL) == NULL);
    void *r = (void *)1;
    CHECK_EQ(px_run_blocking(square_job, NULL, NULL, 0, &r), PX_ENOFIBER);
    CHECK(r == NULL);
    return (void *)1;
}

static void *fiber_calls_main(void *arg)
{
    (void)arg;
    void *r = NULL;
    CHECK_EQ(px_run_blocking(fiber_calls_job, NULL, NULL, 0, &r), 0);
    CHECK(r == (void *)1);
    return NULL;
}

SPEC(pool_fiber_calls_from_a_job_get_enofiber)
{
    CHECK_EQ(px_run(fiber_calls_main, NULL, NULL), 0);
}

/* -- the cap --------------------------------------------------------------------- */

static atomic_int concurrent, most, cap_released;

static void *cap_job(void *arg)
{
    int cap = (int)(intptr_t)arg;
    int n = atomic_fetch_add(&concurrent, 1) + 1;
    int m = atomic_load(&most);
    while (n > m && !atomic_compare_exchange_weak(&most, &m, n))
        ;
    if (n == cap)
        atomic_store(&cap_released, 1);
    /* The first jobs wait until the cap is reached: it is, then, for sure. */
    int64_t t0 = px_now();
    while (!atomic_load(&cap_released)) {
        CHECK(px_now() - t0 < PX_TEST_TIMEOUT_NS);
        sleep_ns(PX_USEC(100));
    }
    sleep_ns(PX_USEC(300));
    atomic_fetch_sub(&concurrent, 1);
    return NULL;
}

static void *cap_fiber(void *arg)
{
    CHECK_EQ(px_run_blocking(cap_job, arg, NULL, 0, NULL), 0);
    return NULL;
}

static void *cap_main(void *arg)
{
    intptr_t cap = (intptr_t)arg;
    CHECK_EQ(px_blocking_set_max((size_t)cap), 0);
    px_fiber *f[60];
    for (int i = 0; i < 60; i++)
        CHECK((f[i] = px_spawn(cap_fiber, arg)) != NULL);
    for (int i = 0; i < 60; i++) {
        CHECK_EQ(px_join(f[i], NULL), 0);
        px_fiber_release(f[i]);
    }
    CHECK_EQ(px_blocking_set_max(DEFAULT_CAP), 0);
    return NULL;
}

SPEC(pool_never_runs_more_jobs_at_once_than_its_cap)
{
    for (intptr_t cap = 1; cap <= 5; cap += 2) {
        atomic_store(&most, 0);
        atomic_store(&cap_released, 0);
        CHECK_EQ(px_run(cap_main, (void *)cap, NULL), 0);
        CHECK_EQ(atomic_load(&most), cap);
    }
}

/* -- a higher cap starts threads for the jobs that wait ------------------------------ */

static atomic_int raise_in;

static void *raise_job(void *arg)
{
    (void)arg;
    atomic_fetch_add(&raise_in, 1);
    int64_t t0 = px_now();
    while (atomic_load(&raise_in) < 4) {   /* all four at once, or the test fails */
        CHECK(px_now() - t0 < PX_TEST_TIMEOUT_NS);
        sleep_ns(PX_USEC(100));
    }
    return NULL;
}

static void *raise_fiber(void *arg)
{
    (void)arg;
    CHECK_EQ(px_run_blocking(raise_job, NULL, NULL, 0, NULL), 0);
    return NULL;
}

static void *raise_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_blocking_set_max(1), 0);
    px_fiber *f[4];
    for (int i = 0; i < 4; i++)
        CHECK((f[i] = px_spawn(raise_fiber, NULL)) != NULL);
    FIBER_WAIT_UNTIL(atomic_load(&raise_in) == 1);
    CHECK_EQ(px_blocking_set_max(4), 0);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(px_join(f[i], NULL), 0);
        px_fiber_release(f[i]);
    }
    CHECK_EQ(px_blocking_set_max(DEFAULT_CAP), 0);
    return NULL;
}

SPEC(pool_a_higher_cap_starts_threads_for_waiting_jobs)
{
    CHECK_EQ(px_run(raise_main, NULL, NULL), 0);
}

/* -- a burst right after a job: a thread that looks for more takes one --------------- */

static atomic_int burst_in;

static void *burst_job(void *arg)
{
    (void)arg;
    atomic_fetch_add(&burst_in, 1);
    int64_t t0 = px_now();
    while (atomic_load(&burst_in) < 4) {   /* all four at once, or the test fails */
        CHECK(px_now() - t0 < PX_TEST_TIMEOUT_NS);
        sleep_ns(PX_USEC(100));
    }
    return NULL;
}

static void *burst_fiber(void *arg)
{
    (void)arg;
    CHECK_EQ(px_run_blocking(burst_job, NULL, NULL, 0, NULL), 0);
    return NULL;
}

static void *burst_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_blocking_set_max(4), 0);
    for (int round = 0; round < 20; round++) {
        atomic_store(&burst_in, 0);
        /* The thread that ran it looks for the next job as the burst comes. */
        CHECK_EQ(px_run_blocking(square_job, NULL, NULL, 0, NULL), 0);
        px_fiber *f[4];
        for (int i = 0; i < 4; i++)
            CHECK((f[i] = px_spawn(burst_fiber, NULL)) != NULL);
        for (int i = 0; i < 4; i++) {
            CHECK_EQ(px_join(f[i], NULL), 0);
            px_fiber_release(f[i]);
        }
    }
    CHECK_EQ(px_blocking_set_max(DEFAULT_CAP), 0);
    return NULL;
}

SPEC(pool_a_burst_right_after_a_job_runs_side_by_side)
{
    CHECK_EQ(px_run(burst_main, NULL, NULL), 0);
}

/* -- refusals ---------------------------------------------------------------------- */

static void *refusals_main(void *arg)
{
    (void)arg;
    void *r = (void *)1;
    CHECK_EQ(px_run_blocking(NULL, NULL, NULL, 0, &r), PX_EINVAL);
    CHECK(r == NULL);
    CHECK_EQ(px_run_blocking(square_job, NULL, NULL, 2, NULL), PX_EINVAL);
    CHECK_EQ(px_run_blocking(square_job, NULL, NULL, ~0u, NULL), PX_EINVAL);
    return NULL;
}

SPEC(pool_refuses_off_fiber_a_null_fn_bad_flags_and_a_zero_cap)
{
    void *r = (void *)1;
    CHECK_EQ(px_run_blocking(square_job, NULL, NULL, 0, &r), PX_ENOFIBER);
    CHECK(r == NULL);
    CHECK_EQ(px_blocking_set_max(0), PX_EINVAL);
    CHECK_EQ(px_run(refusals_main, NULL, NULL), 0);
}

/* -- hosted fibers whose host cannot switch inside C --------------------------------- */

typedef struct host {
    gated g;
    void *ctx[2];
    released rel;
    unsigned flags;
    px_token *tok;               /* a push_cancel around the call; NULL: none */
    int give_up;                 /* end at the second turn, without calling again */
    int turns;
    int calls[8];                /* what each call returned */
    int ncalls;
    void *result;
    int popped;
} host;

static int host_resume(void *ctx)
{
    host *h = ctx;
    if (h->turns++ == 0 && h->tok)
        CHECK_EQ(px_scope_push_cancel(h->tok), 0);
    if (h->turns > 1 && h->give_up)
        return PX_HOST_DONE;
    CHECK(h->ncalls < 8);
    int r = px_run_blocking(gated_ctx_job, h->ctx, count_release, h->flags, &h->result);
    h->calls[h->ncalls++] = r;
    if (r == PX_EYIELD)
        return 0;
    if (h->tok)
        h->popped = px_scope_pop();
    return PX_HOST_DONE;
}

static const px_host_ops host_ops = { host_resume, NULL, NULL };

static px_sched *HS;

static void *host_driver(void *arg)
{
    host *h = arg;
    px_fiber *f = px_spawn_hosted(HS, &host_ops, h);
    CHECK(f != NULL);
    FIBER_WAIT_UNTIL(ev_count(&h->g.started) == 1);
    if (!h->tok && !h->give_up) {
        CHECK_EQ(px_wake(px_fiber_id(f)), 1);   /* a stray wake: it calls again */
        FIBER_WAIT_UNTIL(h->ncalls == 2);
    }
    if (h->tok) {
        CHECK_EQ(px_token_cancel(h->tok), 1);
        FIBER_WAIT_UNTIL(h->ncalls == 2);       /* it gave the job up */
    }
    ev_set(&h->g.gate);
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
    if (h->flags & PX_BLOCKING_ABANDON)
        FIBER_WAIT_UNTIL(atomic_load(&h->rel.calls) == 1);
    return NULL;
}

static void run_host(host *h)
{
    CHECK((HS = px_sched_new(NULL)) != NULL);
    CHECK_EQ(px_sched_post(HS, host_driver, h), 0);
    CHECK_EQ(px_sched_run(HS), 0);
    px_sched_free(HS);
}

static void host_init(host *h, unsigned flags)
{
    memset(h, 0, sizeof *h);
    gated_init(&h->g, (void *)13);
    h->ctx[1] = &h->rel;
    h->flags = flags;
}

SPEC(pool_hosted_fiber_collects_its_job_by_calling_again)
{
    static host h;
    host_init(&h, 0);
    h.ctx[0] = &h.g;
    run_host(&h);
    /* Parked (PX_EYIELD), a stray wake (PX_EYIELD again), then the outcome. */
    CHECK_EQ(h.ncalls, 3);
    CHECK_EQ(h.calls[0], PX_EYIELD);
    CHECK_EQ(h.calls[1], PX_EYIELD);
    CHECK_EQ(h.calls[2], 0);
    CHECK(h.result == (void *)13);
    CHECK_EQ(atomic_load(&h.rel.calls), 0);
}

SPEC(pool_hosted_fiber_abandons_its_job_when_a_scope_fires)
{
    static host h;
    host_init(&h, PX_BLOCKING_ABANDON);
    h.ctx[0] = &h.g;
    CHECK((h.tok = px_token_new()) != NULL);
    run_host(&h);
    px_token_free(h.tok);
    CHECK_EQ(h.ncalls, 2);
    CHECK_EQ(h.calls[0], PX_EYIELD);
    CHECK_EQ(h.calls[1], PX_ECANCELED);
    CHECK_EQ(h.popped, PX_ECANCELED);
    CHECK(h.result == NULL);
    CHECK_EQ(atomic_load(&h.rel.calls), 1);
    CHECK(atomic_load(&h.rel.result) == (void *)13);
}

SPEC(pool_hosted_fiber_ending_before_it_collects_releases_its_job)
{
    static host h;
    host_init(&h, 0);
    h.ctx[0] = &h.g;
    h.give_up = 1;
    run_host(&h);
    CHECK_EQ(h.ncalls, 1);
    CHECK_EQ(h.calls[0], PX_EYIELD);
    /* The job ended, woke the fiber, which ended: its end released the job. */
    CHECK_EQ(atomic_load(&h.rel.calls), 1);
    CHECK(atomic_load(&h.rel.result) == (void *)13);
}

/* -- idle threads exit ------------------------------------------------------------- */

static void *idle_main(void *arg)
{
    (void)arg;
    void *r = NULL;
    CHECK_EQ(px_run_blocking(square_job, (void *)3, NULL, 0, &r), 0);
    CHECK(r == (void *)9);
    return NULL;
}

SPEC(pool_idle_threads_exit_and_new_jobs_start_new_ones)
{
    /* Threads of earlier specs (all of them in one process) go first. */
    for (int64_t t0 = px_now(); px__pool_threads() > 0;) {
        CHECK(px_now() - t0 < PX_TEST_TIMEOUT_NS);
        sleep_ns(PX_MSEC(5));
    }
    px__pool_idle_ns = PX_SEC(2);
    for (int round = 0; round < 2; round++) {
        int64_t t0 = px_now();
        CHECK_EQ(px_run(idle_main, NULL, NULL), 0);
        if (px_now() - t0 < PX_SEC(1))
            CHECK_EQ(px__pool_threads(), 1);   /* it waits idle a while first */
        for (t0 = px_now(); px__pool_threads() > 0;) {   /* then goes */
            CHECK(px_now() - t0 < PX_TEST_TIMEOUT_NS);
            sleep_ns(PX_MSEC(5));
        }
    }
    px__pool_idle_ns = PX_SEC(5);
}

/* -- fork -------------------------------------------------------------------------- */

static void *child_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_run_blocking(square_job, NULL, NULL, 0, NULL), PX_EFORKED);
    return NULL;
}

typedef struct fork_ctx {
    gated running, queued;
    int child_status;
} fork_ctx;

static void *fork_main(void *arg)
{
    fork_ctx *c = arg;
    CHECK_EQ(px_blocking_set_max(1), 0);
    px_fiber *a = px_spawn(blocker_fiber, &c->running);
    px_fiber *b = px_spawn(blocker_fiber, &c->queued);
    CHECK(a != NULL && b != NULL);
    FIBER_WAIT_UNTIL(ev_count(&c->running.started) == 1);
    CHECK_EQ(px_yield(), 0);   /* b has queued its job */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* The child: no fiber here any more; the pool refuses. */
        int ok = px_run_blocking(square_job, NULL, NULL, 0, NULL) == PX_ENOFIBER &&
                 px_blocking_set_max(3) == PX_EFORKED &&
                 px_run(child_main, NULL, NULL) == 0;
        _exit(ok ? 0 : 1);
    }
    CHECK_EQ(waitpid(pid, &c->child_status, 0), pid);
    /* The parent: both jobs, running and queued at the fork, complete. */
    ev_set(&c->running.gate);
    ev_set(&c->queued.gate);
    CHECK_EQ(px_join(a, NULL), 0);
    CHECK_EQ(px_join(b, NULL), 0);
    px_fiber_release(a);
    px_fiber_release(b);
    CHECK_EQ(atomic_load(&c->queued.ran), 1);
    CHECK_EQ(px_blocking_set_max(DEFAULT_CAP), 0);
    return NULL;
}

SPEC(pool_fork_child_refuses_while_the_parent_completes_its_jobs)
{
    static fork_ctx c;
    gated_init(&c.running, (void *)21);
    gated_init(&c.queued, (void *)22);
    CHECK_EQ(px_run(fork_main, &c, NULL), 0);
    CHECK(WIFEXITED(c.child_status));
    CHECK_EQ(WEXITSTATUS(c.child_status), 0);
}

/* -- a job that never ends ------------------------------------------------------- */

static void *forever_job(void *arg)
{
    (void)arg;
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    pthread_mutex_lock(&m);
    for (;;)
        pthread_cond_wait(&c, &m);   /* nobody signals it */
    return NULL;
}

static int forever_body(void *arg)
{
    (void)arg;
    return px_run_blocking(forever_job, NULL, NULL, PX_BLOCKING_ABANDON, NULL);
}

static void *forever_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_with_timeout(PX_MSEC(20), forever_body, NULL), PX_ETIMEDOUT);
    return NULL;
}

/* Last: its thread stays blocked until the process exits, which must end it
** without a hang or a crash (ctest sees the exit code). */
SPEC(pool_job_that_never_ends_is_abandoned_and_the_process_exits)
{
    CHECK_EQ(px_run(forever_main, NULL, NULL), 0);
}

SPECS(pool_thousand_jobs_from_a_hundred_fibers_each_get_their_result,
      pool_cancelled_before_start_never_runs_and_is_released_with_null,
      pool_a_scope_fired_before_the_call_runs_no_job,
      pool_cancelled_while_running_waits_for_the_result_by_default,
      pool_cancelled_while_running_with_abandon_returns_at_once_and_releases_later,
      pool_fn_sees_px_blocking_cancelled_and_may_stop_early,
      pool_stray_wake_does_not_end_the_wait,
      pool_release_runs_exactly_once_for_every_job_the_caller_did_not_get,
      pool_fiber_calls_from_a_job_get_enofiber,
      pool_never_runs_more_jobs_at_once_than_its_cap,
      pool_a_higher_cap_starts_threads_for_waiting_jobs,
      pool_a_burst_right_after_a_job_runs_side_by_side,
      pool_refuses_off_fiber_a_null_fn_bad_flags_and_a_zero_cap,
      pool_hosted_fiber_collects_its_job_by_calling_again,
      pool_hosted_fiber_abandons_its_job_when_a_scope_fires,
      pool_hosted_fiber_ending_before_it_collects_releases_its_job,
      pool_idle_threads_exit_and_new_jobs_start_new_ones,
      pool_fork_child_refuses_while_the_parent_completes_its_jobs,
      pool_job_that_never_ends_is_abandoned_and_the_process_exits)
