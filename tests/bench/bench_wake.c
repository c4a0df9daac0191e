/*
** bench_wake.c -- how often the timer queue's worker wakes while a thread adds
** timers.  The count is the worker thread's voluntary context switches
** (/proc/self/task/TID/status): each is one sleep, so each one past the first is
** a wake.  Run it under `strace -f -c -e trace=futex` for the syscall view.
**
**   bench_wake [n]   (default 1e5)
**
** Case "later": one timer 10 s ahead, then n adds due later than it; the
** earliest deadline never moves, so the worker should not wake (~1).
** Case "earlier": each add is due before every previous one; the earliest
** deadline moves every time, so the worker may wake on each add (the contrast).
*/
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "parataxis.h"

#define MAX_TASKS 64

static int list_tasks(long *tid, int max)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL && n < max)
        if (e->d_name[0] != '.')
            tid[n++] = atol(e->d_name);
    if (d != NULL)
        closedir(d);
    return n;
}

/* The thread that appeared between two listings: the worker. */
static long new_task(const long *before, int nb, const long *after, int na)
{
    for (int i = 0; i < na; i++) {
        int seen = 0;
        for (int j = 0; j < nb; j++)
            seen |= after[i] == before[j];
        if (!seen)
            return after[i];
    }
    return -1;
}

static long switches(long tid)
{
    char path[64], line[128];
    long v = -1;
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
    FILE *f = fopen(path, "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return v;
}

static void nop(void *arg, int status)
{
    (void)arg;
    (void)status;
}

static void settle(void)
{
    struct timespec ts = { 0, 20 * 1000000 };   /* let the worker reach its sleep */
    nanosleep(&ts, NULL);
}

static void run_case(const char *name, int later, long n)
{
    long before[MAX_TASKS], after[MAX_TASKS];
    int nb = list_tasks(before, MAX_TASKS);
    px_timerq *q = px_timerq_new(NULL);
    int na = list_tasks(after, MAX_TASKS);
    long worker = new_task(before, nb, after, na);
    if (q == NULL || worker < 0) {
        fprintf(stderr, "bench_wake: no queue or no worker thread\n");
        exit(1);
    }
    int64_t base = px_now() + PX_SEC(10);
    px_timerq_add_at(q, later ? base : base + PX_SEC(10), nop, NULL);
    settle();
    long s0 = switches(worker);
    int64_t t0 = px_now();
    for (long i = 1; i <= n; i++)
        px_timerq_add_at(q, later ? base + i * 1000 : base + PX_SEC(10) - i * 1000, nop, NULL);
    int64_t t1 = px_now();
    settle();
    long s1 = switches(worker);
    printf("wakes %s: %ld worker wakes during %ld adds (%.1f ns/add)\n", name, s1 - s0, n,
           (double)(t1 - t0) / (double)n);
    px_timerq_cancel_all(q);
    px_timerq_free(q);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    run_case("later-than-first", 1, n);
    run_case("each-earlier", 0, n);
    return 0;
}
