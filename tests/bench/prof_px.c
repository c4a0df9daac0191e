/*
** prof_px.c -- one parataxis phase alone, to run under perf or callgrind:
**
**   prof_px add|add-random|cancel|expire N
**
** add: N adds 10-20 s ahead (after a warm-up add+cancel_all of N; add-random:
** after a warm-up whose cancels freed the records in random order); cancel: N
** cancels in random order; expire: N timers due within 1 ms, run on the worker
** (added in random deadline order, or in deadline order with PXB_SORTED=1).
*/
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parataxis.h"

static atomic_size_t calls;

static void count(void *arg, int status)
{
    (void)arg;
    (void)status;
    atomic_fetch_add(&calls, 1);
}

static void wait_calls(size_t n)
{
    struct timespec ts = { 0, 200000 };
    while (atomic_load(&calls) < n)
        nanosleep(&ts, NULL);
    atomic_store(&calls, 0);
}

static uint64_t rng = 1;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void shuffle(uint64_t *id, size_t n)
{
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = next() % (i + 1);
        uint64_t t = id[i];
        id[i] = id[j];
        id[j] = t;
    }
}

int main(int argc, char **argv)
{
    const char *phase = argc > 2 ? argv[1] : "add";
    size_t n = argc > 2 ? (size_t)atol(argv[2]) : 100000;
    uint64_t *id = malloc(n * sizeof *id);
    px_timerq *q = px_timerq_new(NULL);
    for (size_t i = 0; i < n; i++)   /* warm-up: records allocated once */
        id[i] = px_timerq_add(q, PX_SEC(10) + (int64_t)(next() % PX_SEC(10)), count, NULL);
    if (strcmp(phase, "add-random") == 0) {   /* free records in random order */
        shuffle(id, n);
        for (size_t i = 0; i < n; i++)
            px_timerq_cancel(q, id[i]);
    } else {
        px_timerq_cancel_all(q);
    }
    wait_calls(n);
    int64_t t0 = px_now();
    if (strcmp(phase, "expire") == 0) {
        int64_t due = px_now() + PX_MSEC(20) + (int64_t)n * 1000;
        for (size_t i = 0; i < n; i++)
            px_timerq_add_at(q, due + (getenv("PXB_SORTED") ? (int64_t)i * PX_MSEC(1) / (int64_t)n : (int64_t)(next() % PX_MSEC(1))), count, NULL);
        t0 = due;
        wait_calls(n);
    } else {
        for (size_t i = 0; i < n; i++)
            id[i] = px_timerq_add(q, PX_SEC(10) + (int64_t)(next() % PX_SEC(10)), count, NULL);
        if (strcmp(phase, "cancel") == 0) {
            t0 = px_now();
            shuffle(id, n);
            for (size_t i = 0; i < n; i++)
                px_timerq_cancel(q, id[i]);
        }
    }
    printf("%s @%zu: %.1f ns/op\n", phase, n, (double)(px_now() - t0) / (double)n);
    px_timerq_free(q);
    free(id);
    return 0;
}
