/*
** io_pinger.h -- the thread side of io_bench.py's "thread -> loop" wake latency,
** the same code for every peer (C programs include it; the Go program through
** cgo, so that a plain OS thread pings Go's netpoller exactly as it pings ours).
**
** The pinger is a thread of its own, pinned to CPU 1 (the loop runs on CPU 0):
** n times it takes the time, writes one byte to `to` (the loop waits readable
** on the other end), blocks in read(2) on `from` until the loop wrote one byte
** back, and takes the time again.  One sample is that round trip: a wake of the
** loop by a thread, and the loop's reply waking the thread.  The first tenth
** of the trips are a warm-up and not kept.
*/
#ifndef PXB_IO_PINGER_H
#define PXB_IO_PINGER_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct pxb_pinger {
    int to, from;
    long n;
    int64_t *ns; /* n samples */
    pthread_t thread;
};

static int64_t pxb_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Pins the calling thread to one CPU (no-op where that CPU is missing). */
static void pxb_pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *pxb_pinger_main(void *arg)
{
    struct pxb_pinger *p = (struct pxb_pinger *)arg;
    const char *cpu = getenv("PXB_PINGER_CPU");
    pxb_pin(cpu != NULL ? atoi(cpu) : 1);
    for (long i = 0; i < p->n; i++) {
        char c = 'p';
        int64_t t0 = pxb_now_ns();
        if (write(p->to, &c, 1) != 1 || read(p->from, &c, 1) != 1) {
            perror("pinger");
            exit(1);
        }
        p->ns[i] = pxb_now_ns() - t0;
    }
    return NULL;
}

/* Starts the pinger; 0 or -1. */
static int pxb_pinger_start(struct pxb_pinger *p, int to, int from, long n)
{
    p->to = to;
    p->from = from;
    p->n = n;
    p->ns = (int64_t *)malloc(sizeof *p->ns * (size_t)n);
    if (p->ns == NULL)
        return -1;
    return pthread_create(&p->thread, NULL, pxb_pinger_main, p) == 0 ? 0 : -1;
}

static int pxb_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Prints "latency PEER CASE median_ns M p99_ns P" over samples[n/10 ..]. */
static void pxb_report(const char *peer, const char *what, int64_t *ns, long n)
{
    long skip = n / 10, k = n - skip;
    qsort(ns + skip, (size_t)k, sizeof *ns, pxb_cmp_i64);
    printf("latency %s %s median_ns %lld p99_ns %lld\n", peer, what, (long long)ns[skip + k / 2],
           (long long)ns[skip + k * 99 / 100]);
    fflush(stdout);
}

/* Waits for the pinger's last trip, reports it and frees it. */
static void pxb_pinger_finish(struct pxb_pinger *p, const char *peer)
{
    pthread_join(p->thread, NULL);
    pxb_report(peer, "thread->loop", p->ns, p->n);
    free(p->ns);
}

#endif
