/*
** check.h -- the few helpers every C test shares.
**
** CHECK* print file:line and exit(1) on failure: a test stops at its first broken
** promise.  px_latch is a one-way latch (mutex + condvar) whose wait gives up
** after a generous timeout, so a broken contract fails a test instead of hanging it.
*/
#ifndef PX_TEST_CHECK_H
#define PX_TEST_CHECK_H

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* PX_TEST_TSAN: this build runs under ThreadSanitizer, which counts every
** fiber as a thread (8128 live at most) and shadows memory: tests scale down
** or skip there.  A build may define it too (tests/c/fork/CMakeLists.txt). */
#ifndef PX_TEST_TSAN
#  if defined(__SANITIZE_THREAD__)
#    define PX_TEST_TSAN 1
#  elif defined(__has_feature)
#    if __has_feature(thread_sanitizer)
#      define PX_TEST_TSAN 1
#    endif
#  endif
#endif

#include "parataxis.h"

#define CHECK(c) do { \
    if (!(c)) { \
        fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
        exit(1); \
    } \
} while (0)

#define CHECK_EQ(a, b) do { \
    long long px_a_ = (long long)(a), px_b_ = (long long)(b); \
    if (px_a_ != px_b_) { \
        fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld != %lld)\n", \
                __FILE__, __LINE__, #a, #b, px_a_, px_b_); \
        exit(1); \
    } \
} while (0)

#define CHECK_GE(a, b) do { \
    long long px_a_ = (long long)(a), px_b_ = (long long)(b); \
    if (px_a_ < px_b_) { \
        fprintf(stderr, "%s:%d: CHECK_GE failed: %s >= %s (%lld < %lld)\n", \
                __FILE__, __LINE__, #a, #b, px_a_, px_b_); \
        exit(1); \
    } \
} while (0)

/* How long a wait may last before the test calls it a hang (sanitizers are slow). */
#define PX_TEST_TIMEOUT_NS PX_SEC(30)

typedef struct px_latch {
    pthread_mutex_t m;
    pthread_cond_t c;
    int count;               /* how many times it was set */
} px_latch;

static inline void ev_init(px_latch *e)
{
    CHECK(pthread_mutex_init(&e->m, NULL) == 0);
    CHECK(pthread_cond_init(&e->c, NULL) == 0);
    e->count = 0;
}

static inline void ev_destroy(px_latch *e)
{
    pthread_cond_destroy(&e->c);
    pthread_mutex_destroy(&e->m);
}

static inline void ev_set(px_latch *e)
{
    pthread_mutex_lock(&e->m);
    e->count++;
    pthread_cond_broadcast(&e->c);
    pthread_mutex_unlock(&e->m);
}

static inline int ev_count(px_latch *e)
{
    pthread_mutex_lock(&e->m);
    int n = e->count;
    pthread_mutex_unlock(&e->m);
    return n;
}

/* Waits until the event was set `n` times; returns 0 on timeout. */
static inline int ev_wait_n_ns(px_latch *e, int n, int64_t timeout_ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t t = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + timeout_ns;
    ts.tv_sec = (time_t)(t / 1000000000);
    ts.tv_nsec = (long)(t % 1000000000);
    pthread_mutex_lock(&e->m);
    int rc = 0;
    while (e->count < n && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&e->c, &e->m, &ts);
    int ok = e->count >= n;
    pthread_mutex_unlock(&e->m);
    return ok;
}

static inline int ev_wait_n(px_latch *e, int n)
{
    return ev_wait_n_ns(e, n, PX_TEST_TIMEOUT_NS);
}

#define EV_WAIT(e, n) CHECK(ev_wait_n((e), (n)))

/* A latch set by the n-th of the calls it counts, from any thread. */
typedef struct countdown {
    atomic_int count;
    int n;
    px_latch latch;
} countdown;

static inline void countdown_init(countdown *c, int n)
{
    atomic_store(&c->count, 0);
    c->n = n;
    ev_init(&c->latch);
}

static inline void countdown_hit(countdown *c)
{
    if (atomic_fetch_add(&c->count, 1) + 1 == c->n)
        ev_set(&c->latch);
}

/* A real sleep, for handlers that must outlast a period; never for synchronizing. */
static inline void sleep_ns(int64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* On a fiber: body(arg) under px_with_timeout(ns) ends PX_ETIMEDOUT, and
** not before ns went by. */
static inline void check_times_out(int64_t ns, px_scope_fn body, void *arg)
{
    int64_t t0 = px_now();
    CHECK_EQ(px_with_timeout(ns, body, arg), PX_ETIMEDOUT);
    CHECK_GE(px_now() - t0, ns);
}

/* A small deterministic generator (splitmix64): tests replay the same way. */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* -- a handler that records its calls ------------------------------------ */

/* What one handler argument saw: how many calls, the status and thread of the last. */
typedef struct call_rec {
    int calls, status;
    pthread_t thread;
} call_rec;

/* Set once per record_call, whichever call_rec it was for (ev_init it first). */
static px_latch calls_made;

/* A px_handler_fn whose arg is a call_rec. */
static inline void record_call(void *arg, int status)
{
    call_rec *c = arg;
    c->calls++;
    c->status = status;
    c->thread = pthread_self();
    ev_set(&calls_made);
}

/* A latch that keeps the status of the call that last set it. */
typedef struct status_latch {
    px_latch latch;
    int status;              /* 1 until the first call */
} status_latch;

static inline void status_latch_init(status_latch *l)
{
    ev_init(&l->latch);
    l->status = 1;
}

static inline void status_latch_set(status_latch *l, int status)
{
    l->status = status;
    ev_set(&l->latch);
}

/* -- deadlock reports ------------------------------------------------------ */

/* The last report of a scheduler whose opts.on_deadlock is on_deadlock, and how
** many it wrote. */
static char report[8192];
static int reports;

static inline void on_deadlock(void *ctx, const char *text)
{
    (void)ctx;
    reports++;
    snprintf(report, sizeof report, "%s", text);
}

/* Fails, showing the report, unless it holds the line fmt formats. */
static inline void check_has(const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (strstr(report, line) == NULL) {
        fprintf(stderr, "missing \"%s\" in:\n%s", line, report);
        exit(1);
    }
}

/* Runs a new scheduler, reporting to on_deadlock, on a NULL-ended list of fibers
** that must deadlock; returns it, for the caller to look at and then free. */
static inline px_sched *run_to_deadlock(const px_fiber_fn *fns)
{
    px_sched_opts o = { .on_deadlock = on_deadlock };
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    for (; *fns; fns++)
        CHECK_EQ(px_sched_post(s, *fns, NULL), 0);
    report[0] = 0;
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);
    return s;
}

#endif /* PX_TEST_CHECK_H */
