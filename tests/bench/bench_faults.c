/*
** bench_faults.c -- what first-touch memory costs on this machine, the ways the
** record arena could get it (docs/performance.md, "Cold adds").
**
**   bench_faults [idle_ms]
**
** For each way, a fresh 48 MiB mapping aligned to 2 MiB is written once, one
** 48-byte record after the other as the adds write them, and the time of
** preparing plus writing is given per 4 KiB page and per record.  The ways:
**   small      4 KiB pages, one fault per page (the first arena today)
**   huge       MADV_HUGEPAGE, one fault per 2 MiB (the arenas after the first)
**   small+pop  4 KiB pages, all faulted in first by one MADV_POPULATE_WRITE
**   huge+pop   MADV_HUGEPAGE, then one MADV_POPULATE_WRITE
**   map_pop    mmap(MAP_POPULATE), 4 KiB pages
**   collapse   4 KiB pages written, then MADV_COLLAPSE per 2 MiB (timed apart)
** Each way runs in rotated order, 5 rounds, medians.  With idle_ms, the program
** sleeps that long before each run: this VM hands free 2 MiB blocks back to its
** host (free page reporting) a few seconds after they were freed, and a block
** that went back costs far more to fault in again.
*/
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define TOTAL  ((size_t)48 << 20)
#define HUGE   ((size_t)2 << 20)
#define PAGE   ((size_t)4096)
#define REC    ((size_t)48)
#define ROUNDS 5

enum { SMALL, HUGE_FAULT, SMALL_POP, HUGE_POP, MAP_POP, COLLAPSE, WAYS };
static const char *const names[WAYS] = { "small", "huge", "small+pop", "huge+pop", "map_pop", "collapse" };

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static char *map_aligned(int populate)
{
    size_t span = TOTAL + HUGE;
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0),
                   -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    char *m = (char *)(((uintptr_t)p + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    if (m > p)
        munmap(p, (size_t)(m - p));
    munmap(m + TOTAL, (size_t)(p + span - (m + TOTAL)));
    return m;
}

/* ns for one way: prepare + write every record; *collapse_ns the collapse alone. */
static double run(int way, double *collapse_ns, int *failed)
{
    int64_t t0 = now_ns();
    char *m = map_aligned(way == MAP_POP);
    if (m == NULL)
        return -1;
    if (way == HUGE_FAULT || way == HUGE_POP)
        madvise(m, TOTAL, MADV_HUGEPAGE);
    if ((way == SMALL_POP || way == HUGE_POP) && madvise(m, TOTAL, MADV_POPULATE_WRITE) != 0)
        *failed = 1;
    for (size_t o = 0; o + REC <= TOTAL; o += REC)
        memset(m + o, 1, REC);
    int64_t t1 = now_ns();
    if (way == COLLAPSE) {
        for (size_t o = 0; o < TOTAL; o += HUGE)
            if (madvise(m + o, HUGE, MADV_COLLAPSE) != 0)
                *failed = 1;
        *collapse_ns = (double)(now_ns() - t1);
    }
    munmap(m, TOTAL);
    return (double)(t1 - t0);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long idle_ms = argc > 1 ? atol(argv[1]) : 0;
    double t[WAYS][ROUNDS], c[WAYS][ROUNDS];
    int failed[WAYS] = { 0 };
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < WAYS; k++) {
            int w = (k + r) % WAYS;
            if (idle_ms > 0)
                usleep((useconds_t)idle_ms * 1000);
            c[w][r] = 0;
            t[w][r] = run(w, &c[w][r], &failed[w]);
        }
    printf("first touch of 48 MiB, 48-byte records, medians of %d rounds%s:\n", ROUNDS,
           idle_ms > 0 ? ", idle before each" : "");
    for (int w = 0; w < WAYS; w++) {
        qsort(t[w], ROUNDS, sizeof t[w][0], cmp);
        qsort(c[w], ROUNDS, sizeof c[w][0], cmp);
        double ns = t[w][ROUNDS / 2];
        printf("faults %s: %.2f us per 4 KiB page, %.1f ns per record, %.2f ms per 2 MiB", names[w],
               ns / 1e3 / (double)(TOTAL / PAGE), ns / (double)(TOTAL / REC), ns / 1e6 / (double)(TOTAL / HUGE));
        if (w == COLLAPSE)
            printf("; then MADV_COLLAPSE %.2f ms per 2 MiB", c[w][ROUNDS / 2] / 1e6 / (double)(TOTAL / HUGE));
        printf("%s\n", failed[w] ? " (an madvise failed: this kernel lacks it?)" : "");
    }
    return 0;
}
