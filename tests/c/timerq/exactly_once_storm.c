/*
** exactly_once_storm -- under a storm of add/cancel/cancel_all from many threads,
** every accepted handler is called exactly once, with PX_ECANCELED exactly when a
** cancel or cancel_all won, and nothing runs after px_timerq_free returns.
**
** Usage: exactly_once_storm [ops]   (or PX_STORM_OPS=n; default 200000)
*/
#include <stdatomic.h>
#include <string.h>

#include "../check.h"

#define THREADS 4

typedef struct slot {
    atomic_uint_fast64_t id;     /* 0 until add returned */
    atomic_int calls;
    atomic_int status;
    atomic_int cancel_wins;      /* px_timerq_cancel returned 1 for this id */
} slot;

static slot *slots;
static atomic_size_t nslots;
static size_t ops_per_thread;
static px_timerq *q;
static atomic_size_t all_wins;   /* sum of cancel_all return values */
static atomic_int freed;         /* px_timerq_free returned */
static atomic_int late_calls;    /* handler calls after free returned */
static atomic_int extra_calls;   /* second (or later) calls of one handler */

static void on_timer(void *arg, int status)
{
    slot *s = arg;
    if (atomic_load(&freed))
        atomic_fetch_add(&late_calls, 1);
    atomic_store(&s->status, status);
    if (atomic_fetch_add(&s->calls, 1) != 0)
        atomic_fetch_add(&extra_calls, 1);
}

static void cancel_random(uint64_t *rng)
{
    size_t n = atomic_load(&nslots);
    if (n == 0)
        return;
    /* Recent timers: pending or just expired, where cancel races the worker. */
    size_t window = n < 256 ? n : 256;
    slot *s = &slots[n - 1 - rng_next(rng) % window];
    uint64_t id = atomic_load(&s->id);
    if (id == 0)
        return;
    int rc = px_timerq_cancel(q, id);
    CHECK(rc == 0 || rc == 1);
    if (rc == 1)
        atomic_fetch_add(&s->cancel_wins, 1);
}

static void *storm(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg * 7919u + 1;
    for (size_t i = 0; i < ops_per_thread; i++) {
        uint64_t r = rng_next(&rng) % 10000;
        if (i % 100 == 99)
            sleep_ns(PX_USEC(500));   /* pace the storm so that timers also expire */
        if (r < 5500) {
            size_t k = atomic_fetch_add(&nslots, 1);
            int64_t delay = (int64_t)(rng_next(&rng) % (uint64_t)PX_MSEC(5) + 1);
            uint64_t id = px_timerq_add(q, delay, on_timer, &slots[k]);
            CHECK(id != 0);
            atomic_store(&slots[k].id, id);
        } else if (r < 9998) {
            cancel_random(&rng);
        } else {
            atomic_fetch_add(&all_wins, px_timerq_cancel_all(q));
        }
    }
    return NULL;
}

static size_t total_ops(int argc, char **argv)
{
    const char *s = argc > 1 ? argv[1] : getenv("PX_STORM_OPS");
    long long n = s ? atoll(s) : 200000;
    return n > 0 ? (size_t)n : 200000;
}

int main(int argc, char **argv)
{
    size_t ops = total_ops(argc, argv);
    ops_per_thread = (ops + THREADS - 1) / THREADS;
    slots = calloc(ops_per_thread * THREADS, sizeof *slots);
    CHECK(slots != NULL);
    q = px_timerq_new(NULL);
    CHECK(q != NULL);

    int64_t t0 = px_now();
    pthread_t th[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, storm, (void *)i) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);

    /* Everything not started yet is cancelled here, so free aborts nothing. */
    size_t final_wins = px_timerq_cancel_all(q);
    atomic_fetch_add(&all_wins, final_wins);
    px_timerq_free(q);
    atomic_store(&freed, 1);
    int64_t t1 = px_now();

    size_t n = atomic_load(&nslots), aborted = 0, single_wins = 0;
    for (size_t i = 0; i < n; i++) {
        slot *s = &slots[i];
        CHECK_EQ(atomic_load(&s->calls), 1);
        int st = atomic_load(&s->status), wins = atomic_load(&s->cancel_wins);
        CHECK(st == 0 || st == PX_ECANCELED);
        CHECK(wins <= 1);
        if (wins == 1)
            CHECK_EQ(st, PX_ECANCELED);     /* a won cancel means an aborted call */
        if (st == PX_ECANCELED)
            aborted++;
        single_wins += (size_t)wins;
    }
    /* Aborted calls not explained by a cancel() win were won by cancel_all. */
    CHECK_EQ(aborted, single_wins + atomic_load(&all_wins));
    CHECK_EQ(atomic_load(&extra_calls), 0);

    sleep_ns(PX_MSEC(20));   /* a negative check: give a rogue call time to show */
    CHECK_EQ(atomic_load(&late_calls), 0);
    for (size_t i = 0; i < n; i++)
        CHECK_EQ(atomic_load(&slots[i].calls), 1);

    printf("ops %zu, timers %zu, fired %zu, cancel wins %zu, cancel_all wins %zu, %.2f s\n",
           ops_per_thread * THREADS, n, n - aborted, single_wins,
           (size_t)atomic_load(&all_wins), (double)(t1 - t0) / 1e9);
    free(slots);
    return 0;
}
