/*
** io_latency_uv.c -- libuv's side of io_bench.py's wake latency (uv_poll: a
** readiness wait, what px_wait_fd is).
**
**   io_latency_uv N     (run pinned to CPU 0: taskset -c 0)
**
** "loop<->loop": two uv_poll handles of one loop ping-pong one byte over two
** pipes (the callback of one reads its byte and writes the other's pipe); a
** sample is one round trip.  "thread->loop": io_pinger.h's thread writes a pipe,
** a uv_poll callback reads the byte and writes it back on a second pipe.
** Prints one io_pinger.h line per case.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <uv.h>

#include "io_pinger.h"

static int ab[2], ba[2];  /* A -> B, B -> A */
static long n, done;
static int64_t *ns, t0;
static uv_poll_t pa, pb;

static void take(int fd)
{
    char c;
    if (read(fd, &c, 1) != 1) {
        perror("read");
        exit(1);
    }
}

static void give(int fd)
{
    if (write(fd, "x", 1) != 1) {
        perror("write");
        exit(1);
    }
}

/* B: its byte came; send it back. */
static void on_b(uv_poll_t *h, int status, int events)
{
    (void)h, (void)status, (void)events;
    take(ab[0]);
    give(ba[1]);
}

/* A: the round trip is over; start the next. */
static void on_a(uv_poll_t *h, int status, int events)
{
    (void)h, (void)status, (void)events;
    take(ba[0]);
    ns[done] = pxb_now_ns() - t0;
    if (++done == n) {
        uv_poll_stop(&pa);
        uv_poll_stop(&pb);
        return;
    }
    t0 = pxb_now_ns();
    give(ab[1]);
}

static int ping[2], pong[2];
static long served;
static uv_poll_t pp;

static void on_ping(uv_poll_t *h, int status, int events)
{
    (void)h, (void)status, (void)events;
    take(ping[0]);
    give(pong[1]);
    if (++served == n)
        uv_poll_stop(&pp);
}

int main(int argc, char **argv)
{
    n = argc > 1 ? atol(argv[1]) : 200000;
    uv_loop_t *loop = uv_default_loop();
    ns = malloc(sizeof *ns * (size_t)n);
    if (ns == NULL || pipe2(ab, O_NONBLOCK | O_CLOEXEC) != 0 ||
        pipe2(ba, O_NONBLOCK | O_CLOEXEC) != 0)
        return 1;
    uv_poll_init(loop, &pa, ba[0]);
    uv_poll_init(loop, &pb, ab[0]);
    uv_poll_start(&pa, UV_READABLE, on_a);
    uv_poll_start(&pb, UV_READABLE, on_b);
    t0 = pxb_now_ns();
    give(ab[1]);
    uv_run(loop, UV_RUN_DEFAULT);
    pxb_report("libuv", "loop<->loop", ns, n);

    /* The pinger's ends block; the loop's do not. */
    struct pxb_pinger p;
    if (pipe2(ping, O_CLOEXEC) != 0 || pipe2(pong, O_CLOEXEC) != 0 ||
        fcntl(ping[0], F_SETFL, O_NONBLOCK) != 0)
        return 1;
    uv_poll_init(loop, &pp, ping[0]);
    uv_poll_start(&pp, UV_READABLE, on_ping);
    if (pxb_pinger_start(&p, ping[1], pong[0], n) != 0)
        return 1;
    uv_run(loop, UV_RUN_DEFAULT);
    pxb_pinger_finish(&p, "libuv");
    return 0;
}
