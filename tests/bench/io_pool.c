/*
** io_pool.c -- the blocking pool beside libuv's thread pool, one line per row.
**
**   io_pool [rounds]   (default 7; PXB_QUICK=1 in the environment: 3)
**
** Row 1, the empty-job round trip: a fiber hands an empty function to the pool
** and parks until it returned (px_run_blocking), one job at a time; libuv's
** loop queues an empty work item (uv_queue_work) whose after-work callback, back
** on the loop, queues the next.  Either way one hand-over to a pool thread and
** one wake-up of the waiting loop per job.  Row 2, 1,000 jobs of 10 ms each
** (nanosleep: a blocking call) all submitted at once -- 1,000 fibers, or 1,000
** work items -- on the same number of threads (UV_THREADPOOL_SIZE and
** px_blocking_set_max).  Each figure is the median of the rounds, which
** alternate between the two; the ratio is parataxis / libuv (< 1: faster).
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parataxis.h"
#ifdef PXB_HAVE_UV
#include <uv.h>
#endif

#define MAX_ROUNDS 31
#define THREADS 64
#define SLEEP_JOBS 1000
#define SLEEP_NS PX_MSEC(10)

static int rounds = 7;
static long trips = 20000;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void *empty(void *arg)
{
    return arg;
}

static void sleep_10ms(void)
{
    struct timespec ts = { 0, SLEEP_NS };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* -- parataxis -------------------------------------------------------------- */

static void *px_trips(void *arg)
{
    (void)arg;
    for (long i = 0; i < trips; i++)
        if (px_run_blocking(empty, NULL, NULL, 0, NULL) != 0)
            abort();
    return NULL;
}

static void *px_sleeper_job(void *arg)
{
    sleep_10ms();
    return arg;
}

static void *px_sleeper(void *arg)
{
    if (px_run_blocking(px_sleeper_job, arg, NULL, 0, NULL) != 0)
        abort();
    return NULL;
}

static void *px_sleepers(void *arg)
{
    (void)arg;
    for (int i = 0; i < SLEEP_JOBS; i++) {
        px_fiber *f = px_spawn(px_sleeper, NULL);
        if (f == NULL)
            abort();
        px_fiber_release(f);   /* detached: px_run waits for it all the same */
    }
    return NULL;
}

static double px_round_trip_ns(void)
{
    int64_t t0 = px_now();
    if (px_run(px_trips, NULL, NULL) != 0)
        abort();
    return (double)(px_now() - t0) / (double)trips;
}

static double px_sleep_ms(void)
{
    int64_t t0 = px_now();
    if (px_run(px_sleepers, NULL, NULL) != 0)
        abort();
    return (double)(px_now() - t0) / 1e6;
}

/* -- libuv ------------------------------------------------------------------ */

#ifdef PXB_HAVE_UV
static uv_loop_t loop;
static uv_work_t work;
static long uv_left;

static void uv_empty(uv_work_t *w)
{
    (void)w;
}

static void uv_next(uv_work_t *w, int status)
{
    (void)status;
    if (--uv_left > 0 && uv_queue_work(&loop, w, uv_empty, uv_next) != 0)
        abort();
}

static double uv_round_trip_ns(void)
{
    uv_left = trips;
    int64_t t0 = px_now();
    if (uv_queue_work(&loop, &work, uv_empty, uv_next) != 0)
        abort();
    uv_run(&loop, UV_RUN_DEFAULT);
    return (double)(px_now() - t0) / (double)trips;
}

static uv_work_t sleepers[SLEEP_JOBS];

static void uv_sleeper(uv_work_t *w)
{
    (void)w;
    sleep_10ms();
}

static void uv_done(uv_work_t *w, int status)
{
    (void)w;
    (void)status;
}

static double uv_sleep_ms(void)
{
    int64_t t0 = px_now();
    for (int i = 0; i < SLEEP_JOBS; i++)
        if (uv_queue_work(&loop, &sleepers[i], uv_sleeper, uv_done) != 0)
            abort();
    uv_run(&loop, UV_RUN_DEFAULT);
    return (double)(px_now() - t0) / 1e6;
}
#endif

static void row(const char *what, const char *unit, double px, double uv, int have_uv)
{
    if (have_uv)
        printf("pool %s: parataxis %.2f %s, libuv %.2f %s, ratio %.2f (median of %d)\n",
               what, px, unit, uv, unit, px / uv, rounds);
    else
        printf("pool %s: parataxis %.2f %s (libuv not built in) (median of %d)\n",
               what, px, unit, rounds);
}

int main(int argc, char **argv)
{
    const char *quick = getenv("PXB_QUICK");
    if (quick && strcmp(quick, "1") == 0) {
        rounds = 3;
        trips = 5000;
    }
    if (argc > 1)
        rounds = atoi(argv[1]);
    if (rounds < 1 || rounds > MAX_ROUNDS)
        rounds = 7;
    int have_uv = 0;
    char n[16];
    snprintf(n, sizeof n, "%d", THREADS);
    setenv("UV_THREADPOOL_SIZE", n, 1);   /* read once, at libuv's first work item */
    if (px_blocking_set_max(THREADS) != 0)
        abort();
#ifdef PXB_HAVE_UV
    have_uv = 1;
    if (uv_loop_init(&loop) != 0)
        abort();
#endif
    double px[MAX_ROUNDS], uv[MAX_ROUNDS];

    /* Warm both pools: threads started, pages touched. */
    px_round_trip_ns();
#ifdef PXB_HAVE_UV
    uv_round_trip_ns();
#endif
    for (int r = 0; r < rounds; r++) {
        px[r] = px_round_trip_ns();
#ifdef PXB_HAVE_UV
        uv[r] = uv_round_trip_ns();
#endif
    }
    row("empty-job round trip", "us", median(px, rounds) / 1e3,
        have_uv ? median(uv, rounds) / 1e3 : 0, have_uv);
    fflush(stdout);

    for (int r = 0; r < rounds; r++) {
        px[r] = px_sleep_ms();
#ifdef PXB_HAVE_UV
        uv[r] = uv_sleep_ms();
#endif
    }
    char what[96];
    snprintf(what, sizeof what, "%d x 10 ms jobs on %d threads (ideal %d ms)", SLEEP_JOBS,
             THREADS, (SLEEP_JOBS + THREADS - 1) / THREADS * 10);
    row(what, "ms", median(px, rounds), have_uv ? median(uv, rounds) : 0, have_uv);
#ifdef PXB_HAVE_UV
    uv_loop_close(&loop);
#endif
    return 0;
}
