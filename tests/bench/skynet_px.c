/*
** skynet_px -- the parataxis side of skynet.py's cold rows (one case per
** process, so that no run starts on stacks or pages another one left):
**
**   skynet_px LEAVES SHARED skynet   skynet: each fiber spawns ten children
**                                    until there are LEAVES leaves (a power of
**                                    ten), joins them in spawn order and
**                                    returns the sum of its leaves' numbers
**                                    (0 .. LEAVES-1); the sum is checked.
**   skynet_px N SHARED parked        N fibers, each spawned (detached) and
**                                    parked on one px_event until the main
**                                    fiber, told by a wait group that all are
**                                    parked, sets it; a second wait group says
**                                    when all have ended.
**
** SHARED is px_sched_opts.shared_stacks (0: a stack of its own per fiber).
** Prints one line, "<seconds> <peak RSS KiB> <minor faults>": the time on
** CLOCK_MONOTONIC from px_sched_new to the return of px_sched_run (the
** scheduler's free, after the answer is known, is not counted, as Go's program
** does not count its exit); the peak RSS of this program's image, VmHWM of
** /proc/self/status; ru_minflt of getrusage(RUSAGE_SELF).  Not ru_maxrss:
** Linux carries it across execve, so a child of a Python driver (spawned by
** vfork) starts with the driver's peak, some 10 MB, as its floor.
** tests/bench/go_skynet is the same two programs in Go.
*/
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "parataxis.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* VmHWM of /proc/self/status in KiB (-1 if it cannot be read). */
static long peak_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

static _Noreturn void die(const char *what, int err)
{
    fprintf(stderr, "skynet_px: %s: %s\n", what, px_strerror(err));
    exit(1);
}

/* A node's (first leaf number, leaves under it), packed into the fiber's
** argument: 32 bits each.  A pointer to a struct on the parent's stack would
** break the shared-stack rule (the parent's stack holds another fiber's bytes
** while it waits in px_join), and a malloc per node would add to what is
** measured. */
#define PACK(num, size) ((void *)(((uintptr_t)(num) << 32) | (uintptr_t)(size)))

static void *node(void *arg)
{
    uintptr_t num = (uintptr_t)arg >> 32, size = (uintptr_t)arg & 0xffffffffu;
    if (size == 1)
        return (void *)num;
    px_fiber *kids[10];
    uintptr_t step = size / 10, sum = 0;
    for (uintptr_t i = 0; i < 10; i++)
        if ((kids[i] = px_spawn(node, PACK(num + i * step, step))) == NULL)
            die("px_spawn", PX_ENOMEM);
    for (int i = 0; i < 10; i++) {
        void *r;
        int err = px_join(kids[i], &r);
        if (err != 0)
            die("px_join", err);
        px_fiber_release(kids[i]);
        sum += (uintptr_t)r;
    }
    return (void *)sum;
}

/* The parked case: the wait groups and the event are the main fiber's, made
** before the run, so no fiber keeps them on its stack. */
static px_waitgroup *all_parked, *all_ended;
static px_event *release;

static void *parker(void *arg)
{
    (void)arg;
    px_waitgroup_done(all_parked);
    int err = px_event_wait(release);
    if (err != 0)
        die("px_event_wait", err);
    px_waitgroup_done(all_ended);
    return NULL;
}

static void *parked_main(void *arg)
{
    long n = (long)(intptr_t)arg;
    px_waitgroup_add(all_parked, n);
    px_waitgroup_add(all_ended, n);
    for (long i = 0; i < n; i++) {
        px_fiber *f = px_spawn(parker, NULL);
        if (f == NULL)
            die("px_spawn", PX_ENOMEM);
        px_fiber_release(f);
    }
    int err = px_waitgroup_wait(all_parked);
    if (err == 0)
        px_event_set(release);
    if (err == 0)
        err = px_waitgroup_wait(all_ended);
    if (err != 0)
        die("px_waitgroup_wait", err);
    return NULL;
}

/* The first fiber is a posted one, so that it has the scheduler's default
** stack (a shared one when SHARED > 0); its function and result pass through
** these, as a post drops the result. */
static px_fiber_fn first_fn;
static void *first_arg, *first_result;

static void *first(void *arg)
{
    (void)arg;
    first_result = first_fn(first_arg);
    return NULL;
}

/* Runs fn(arg) as the first fiber of a fresh scheduler with `shared` shared
** stacks; returns the seconds it took and stores fn's result in *result. */
static double run(size_t shared, px_fiber_fn fn, void *arg, void **result)
{
    px_sched_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.shared_stacks = shared;
    first_fn = fn;
    first_arg = arg;
    double t0 = now();
    px_sched *s = px_sched_new(&opts);
    if (s == NULL)
        die("px_sched_new", PX_ENOMEM);
    int err = px_sched_post(s, first, NULL);
    if (err == 0)
        err = px_sched_run(s);
    double t = now() - t0;
    if (err != 0)
        die("px_sched_run", err);
    px_sched_free(s);
    *result = first_result;
    return t;
}

static _Noreturn void usage(void)
{
    fprintf(stderr, "usage: skynet_px LEAVES|N SHARED skynet|parked\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc != 4)
        usage();
    char *end;
    unsigned long long n = strtoull(argv[1], &end, 10);
    if (*end != '\0' || n == 0 || n > UINT32_MAX)
        usage();
    unsigned long long shared = strtoull(argv[2], &end, 10);
    if (*end != '\0' || shared > PX_SHARED_STACKS_MAX)
        usage();
    void *r = NULL;
    double t;
    if (strcmp(argv[3], "skynet") == 0) {
        for (unsigned long long p = n; p > 1; p /= 10)
            if (p % 10 != 0)
                usage(); /* LEAVES must be a power of ten */
        t = run((size_t)shared, node, PACK(0, n), &r);
        unsigned long long want = n * (n - 1) / 2;
        if ((unsigned long long)(uintptr_t)r != want) {
            fprintf(stderr, "skynet_px: sum %llu, want %llu\n",
                    (unsigned long long)(uintptr_t)r, want);
            return 1;
        }
    } else if (strcmp(argv[3], "parked") == 0) {
        all_parked = px_waitgroup_new();
        all_ended = px_waitgroup_new();
        release = px_event_new();
        if (all_parked == NULL || all_ended == NULL || release == NULL)
            die("px_waitgroup_new / px_event_new", PX_ENOMEM);
        t = run((size_t)shared, parked_main, (void *)(intptr_t)n, &r);
        if (px_waitgroup_count(all_ended) != 0)
            die("parked", PX_EINVAL);
        px_waitgroup_free(all_parked);
        px_waitgroup_free(all_ended);
        px_event_free(release);
    } else {
        usage();
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%.6f %ld %ld\n", t, peak_rss_kib(), ru.ru_minflt);
    return 0;
}
