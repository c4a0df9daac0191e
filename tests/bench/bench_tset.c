/*
** bench_tset.c -- the ordered set of deadlines (core/src/timerset.c: a timing
** wheel in front of a near heap) against a binary heap and a 4-ary heap with
** back-pointers, on the data structures alone: no lock, no clock, no handler.
**
**   bench_tset [max_n]      wall-clock ns per op, median of rounds, interleaved
**   bench_tset cg N         one round at N, for valgrind --tool=callgrind
**                           --collect-atstart=no: one stats dump per phase
**
** Deadlines are uniform over 10 s of simulated time.  "expire" steps time over
** those 10 s in 1000 steps and takes what is due at each: the worker's loop.
*/
#define _POSIX_C_SOURCE 200809L   /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_heap.h"
#include "timerset.h"
#ifdef PXB_HAVE_CALLGRIND
#include <valgrind/callgrind.h>
#define CG_BEGIN() CALLGRIND_TOGGLE_COLLECT
#define CG_END(label) do { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_DUMP_STATS_AT(label); } while (0)
#else
#define CG_BEGIN() ((void)0)
#define CG_END(label) ((void)(label))
#endif

#define T0    ((int64_t)1 << 40)
#define SPAN  ((int64_t)10 * 1000000000)
#define STEPS 1000

enum { TSET, HBIN, HQUAD, NKIND };
static const char *const kind_name[NKIND] = { "wheel+heap", "binary heap", "4-ary heap" };
enum { INSERT, REMOVE, EXPIRE, NPHASE };
static const char *const phase_name[NPHASE] = { "insert", "remove", "expire" };

static uint64_t rng_state = 0x5eed;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct bench {
    size_t n;
    int64_t *deadline;
    size_t *order;           /* random removal order */
    px__tnode *tn;
    bh_node *hn;
    px__tset set;
    bh_heap heap;
} bench;

static void bench_init(bench *b, size_t n)
{
    b->n = n;
    b->deadline = malloc(n * sizeof *b->deadline);
    b->order = malloc(n * sizeof *b->order);
    b->tn = calloc(n, sizeof *b->tn);
    b->hn = calloc(n, sizeof *b->hn);
    if (!b->deadline || !b->order || !b->tn || !b->hn) {
        fprintf(stderr, "bench_tset: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        b->order[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rng_next() % (i + 1), t = b->order[i];
        b->order[i] = b->order[j];
        b->order[j] = t;
    }
    memset(&b->heap, 0, sizeof b->heap);
}

static void draw_deadlines(bench *b)
{
    for (size_t i = 0; i < b->n; i++)
        b->deadline[i] = T0 + 1 + (int64_t)(rng_next() % (uint64_t)SPAN);
}

static void insert_all(bench *b, int kind)
{
    if (kind == TSET) {
        px__tset_init(&b->set, T0);
        for (size_t i = 0; i < b->n; i++) {
            b->tn[i].deadline = b->deadline[i];
            px__tset_insert(&b->set, &b->tn[i]);
        }
        return;
    }
    b->heap.len = 0;
    for (size_t i = 0; i < b->n; i++) {
        b->hn[i].deadline = b->deadline[i];
        if ((kind == HBIN ? hb_insert : hq_insert)(&b->heap, &b->hn[i]) != 0)
            exit(1);
    }
}

static void remove_all(bench *b, int kind)
{
    for (size_t k = 0; k < b->n; k++) {
        size_t i = b->order[k];
        if (kind == TSET)
            px__tset_remove(&b->set, &b->tn[i]);
        else
            (kind == HBIN ? hb_remove : hq_remove)(&b->heap, &b->hn[i]);
    }
    if (kind == TSET)
        px__tset_destroy(&b->set);
}

/* Returns how many expired, which must be n. */
static size_t expire_all(bench *b, int kind)
{
    size_t got = 0;
    for (int step = 1; step <= STEPS; step++) {
        int64_t now = T0 + SPAN / STEPS * step;
        if (kind == TSET) {
            for (px__tnode *x = px__tset_expire(&b->set, now, 0); x != NULL; x = px__tset_after(x))
                got++;
        } else {
            bh_node *(*pop)(bh_heap *, int64_t) = kind == HBIN ? hb_pop_due : hq_pop_due;
            while (pop(&b->heap, now) != NULL)
                got++;
        }
    }
    if (kind == TSET)
        px__tset_destroy(&b->set);
    return got;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define MAX_ROUNDS 15

static void run_wall(size_t n, int rounds)
{
    bench b;
    double ns[NKIND][NPHASE][MAX_ROUNDS];
    bench_init(&b, n);
    for (int r = 0; r <= rounds; r++) {   /* round 0 warms the memory up */
        draw_deadlines(&b);
        for (int k0 = 0; k0 < NKIND; k0++) {
            int k = (k0 + r) % NKIND;
            int64_t t0 = clock_ns();
            insert_all(&b, k);
            int64_t t1 = clock_ns();
            remove_all(&b, k);
            int64_t t2 = clock_ns();
            insert_all(&b, k);
            int64_t t3 = clock_ns();
            size_t got = expire_all(&b, k);
            int64_t t4 = clock_ns();
            if (got != n) {
                fprintf(stderr, "bench_tset: %s expired %zu of %zu\n", kind_name[k], got, n);
                exit(1);
            }
            if (r > 0) {
                ns[k][INSERT][r - 1] = (double)(t1 - t0 + t3 - t2) / 2.0 / (double)n;
                ns[k][REMOVE][r - 1] = (double)(t2 - t1) / (double)n;
                ns[k][EXPIRE][r - 1] = (double)(t4 - t3) / (double)n;
            }
        }
    }
    for (int p = 0; p < NPHASE; p++) {
        double med[NKIND];
        for (int k = 0; k < NKIND; k++) {
            qsort(ns[k][p], (size_t)rounds, sizeof(double), cmp_double);
            med[k] = ns[k][p][rounds / 2];
        }
        printf("tset %s @%zu: wheel+heap %.1f ns, binary heap %.1f ns, 4-ary heap %.1f ns,"
               " ratio %.2fx binary, %.2fx 4-ary\n", phase_name[p], n, med[TSET], med[HBIN],
               med[HQUAD], med[TSET] / med[HBIN], med[TSET] / med[HQUAD]);
    }
    fflush(stdout);
}

/*
** The worker's expiry burst: n nodes due within 1 ms, all due now, taken out
** 256 at a time (BATCH in timerq.c) or in one call.  Shows what a batch limit
** costs when a slot holds more due nodes than the batch.
*/
static void run_burst(size_t n)
{
    bench b;
    double ns[2][MAX_ROUNDS];
    const int rounds = 5;
    bench_init(&b, n);
    for (int r = 0; r < rounds; r++)
        for (int batched = 0; batched < 2; batched++) {
            for (size_t i = 0; i < n; i++)
                b.deadline[i] = T0 + 1 + (int64_t)(rng_next() % 1000000);
            insert_all(&b, TSET);
            size_t got = 0;
            int64_t t0 = clock_ns();
            for (px__tnode *x; (x = px__tset_expire(&b.set, T0 + 1000001, batched ? 256 : 0)) != NULL;)
                for (; x != NULL; x = px__tset_after(x))
                    got++;
            int64_t t1 = clock_ns();
            px__tset_destroy(&b.set);
            if (got != n)
                exit(1);
            ns[batched][r] = (double)(t1 - t0) / (double)n;
        }
    qsort(ns[0], (size_t)rounds, sizeof(double), cmp_double);
    qsort(ns[1], (size_t)rounds, sizeof(double), cmp_double);
    printf("tset burst @%zu (all due within 1 ms): one call %.1f ns/timer, 256 a call %.1f ns/timer\n",
           n, ns[0][rounds / 2], ns[1][rounds / 2]);
}

static void run_callgrind(size_t n)
{
    bench b;
    char label[64];
    bench_init(&b, n);
    draw_deadlines(&b);
    for (int k = 0; k < NKIND; k++) {
        snprintf(label, sizeof label, "%d-insert", k);
        CG_BEGIN();
        insert_all(&b, k);
        CG_END(label);
        snprintf(label, sizeof label, "%d-remove", k);
        CG_BEGIN();
        remove_all(&b, k);
        CG_END(label);
        insert_all(&b, k);
        snprintf(label, sizeof label, "%d-expire", k);
        CG_BEGIN();
        expire_all(&b, k);
        CG_END(label);
    }
}

int main(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "cg") == 0) {
        run_callgrind((size_t)atol(argv[2]));
        return 0;
    }
    size_t max_n = argc > 1 ? (size_t)atol(argv[1]) : 1000000;
    static const size_t sizes[] = { 1000, 100000, 1000000 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i] <= max_n)
            run_wall(sizes[i], sizes[i] >= 1000000 ? 5 : 9);
    for (size_t i = 1; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i] <= max_n)
            run_burst(sizes[i]);
    return 0;
}
