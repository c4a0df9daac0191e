/*
** io_latency_px.c -- parataxis's side of io_bench.py's wake latency.
**
**   io_latency_px N     (run pinned to CPU 0: taskset -c 0)
**
** "loop<->loop": two fibers of one scheduler ping-pong one byte over two pipes
** (px_write, then px_read: a read that finds nothing waits readable in
** px_wait_fd); a sample is one round trip.  "thread->loop": io_pinger.h's
** thread writes a pipe, a fiber's px_read wakes, and it writes the byte back
** on a second pipe.  Prints one io_pinger.h line per case.
*/
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "io_pinger.h"
#include "parataxis.h"

static int ab[2], ba[2], ping[2], pong[2];
static long n;

static void io(ssize_t r)
{
    if (r != 1) {
        perror("io_latency_px");
        exit(1);
    }
}

static void *partner(void *arg)
{
    char c;
    (void)arg;
    for (long i = 0; i < n; i++) {
        io(px_read(ab[0], &c, 1));
        io(px_write(ba[1], &c, 1));
    }
    return NULL;
}

static void *ponger(void *arg)
{
    char c;
    (void)arg;
    for (long i = 0; i < n; i++) {
        io(px_read(ping[0], &c, 1));
        io(px_write(pong[1], &c, 1));
    }
    return NULL;
}

static void *main_fiber(void *arg)
{
    int64_t *ns = malloc(sizeof *ns * (size_t)n);
    char c = 'x';
    (void)arg;
    if (ns == NULL)
        exit(1);
    px_fiber *f = px_spawn(partner, NULL);
    for (long i = 0; i < n; i++) {
        int64_t t0 = pxb_now_ns();
        io(px_write(ab[1], &c, 1));
        io(px_read(ba[0], &c, 1));
        ns[i] = pxb_now_ns() - t0;
    }
    px_join(f, NULL);
    px_fiber_release(f);
    pxb_report("parataxis", "loop<->loop", ns, n);
    free(ns);

    struct pxb_pinger p;
    f = px_spawn(ponger, NULL);
    if (f == NULL || pxb_pinger_start(&p, ping[1], pong[0], n) != 0)
        exit(1);
    px_join(f, NULL);
    px_fiber_release(f);
    pxb_pinger_finish(&p, "parataxis");
    return NULL;
}

int main(int argc, char **argv)
{
    n = argc > 1 ? atol(argv[1]) : 200000;
    /* The pinger's ends block; the fibers' do not. */
    if (pipe2(ab, O_NONBLOCK | O_CLOEXEC) != 0 || pipe2(ba, O_NONBLOCK | O_CLOEXEC) != 0 ||
        pipe2(ping, O_CLOEXEC) != 0 || pipe2(pong, O_CLOEXEC) != 0 ||
        fcntl(ping[0], F_SETFL, O_NONBLOCK) != 0 || fcntl(pong[1], F_SETFL, O_NONBLOCK) != 0)
        return 1;
    return px_run(main_fiber, NULL, NULL) == 0 ? 0 : 1;
}
