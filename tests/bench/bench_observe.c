/*
** bench_observe.c -- what seeing into a run costs: a fiber-local value's get
** and set, naming a fiber, a dump of many parked fibers, and sleeps on the
** virtual clock (how fast a run of sleepers goes when time jumps).  Medians of
** `rounds` runs.
**
**   bench_observe [rounds]   (default 5)
*/
#include <stdio.h>
#include <stdlib.h>

#include "parataxis.h"

#define OPS 1000000
#define DUMPED 10000
#define SLEEPERS 1000
#define SLEEPS 100

static px_local *key;
static double row[4][16];

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

static int64_t since(int64_t t0)
{
    return px_now() - t0;
}

static void *locals(void *arg)
{
    int round = (int)(intptr_t)arg;
    int x = 0;
    int64_t t0 = px_now();
    for (int i = 0; i < OPS; i++)
        px_local_set(key, &x);
    row[0][round] = (double)since(t0) / OPS;
    t0 = px_now();
    void *sum = NULL;
    for (int i = 0; i < OPS; i++)
        sum = px_local_get(key);
    row[1][round] = (double)since(t0) / OPS;
    if (sum != &x)
        abort();
    t0 = px_now();
    for (int i = 0; i < OPS; i++)
        px_fiber_set_name(0, i & 1 ? "odd" : "even");
    row[2][round] = (double)since(t0) / OPS;
    return NULL;
}

static px_event *never;

static void *parks(void *arg)
{
    (void)arg;
    px_event_wait(never);
    return NULL;
}

static void *dumps(void *arg)
{
    int round = (int)(intptr_t)arg;
    px_event_clear(never);   /* set by the round before */
    for (int i = 0; i < DUMPED; i++)
        px_fiber_release(px_spawn(parks, NULL));
    px_yield();
    FILE *null = fopen("/dev/null", "w");
    int64_t t0 = px_now();
    px_dump(NULL, null);
    row[3][round] = (double)since(t0) / 1e6;
    fclose(null);
    px_event_set(never);
    return NULL;
}

static void *sleeps(void *arg)
{
    (void)arg;
    for (int i = 0; i < SLEEPS; i++)
        px_sleep(PX_SEC(3600));
    return NULL;
}

static void *sleepers(void *arg)
{
    (void)arg;
    for (int i = 0; i < SLEEPERS; i++)
        px_fiber_release(px_spawn(sleeps, NULL));
    return NULL;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (rounds < 1 || rounds > 16)
        rounds = 5;
    key = px_local_new(NULL, NULL);
    never = px_event_new();
    double virt[16];
    for (int r = 0; r < rounds; r++) {
        px_run(locals, (void *)(intptr_t)r, NULL);
        px_run(dumps, (void *)(intptr_t)r, NULL);
        px_sched_opts o = { .clock = PX_CLOCK_VIRTUAL };
        int64_t t0 = px_now();
        px_run_with(&o, sleepers, NULL, NULL);
        virt[r] = (double)since(t0) / (SLEEPERS * SLEEPS);
    }
    printf("px_local_set                    %8.1f ns\n", median(row[0], rounds));
    printf("px_local_get                    %8.1f ns\n", median(row[1], rounds));
    printf("px_fiber_set_name               %8.1f ns\n", median(row[2], rounds));
    printf("px_dump of %d parked fibers  %8.1f ms\n", DUMPED, median(row[3], rounds));
    printf("a 1-hour sleep, virtual clock   %8.1f ns real (%d fibers x %d sleeps)\n",
           median(virt, rounds), SLEEPERS, SLEEPS);
    px_event_free(never);
    px_local_free(key);
    return 0;
}
