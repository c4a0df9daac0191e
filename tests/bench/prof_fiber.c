/*
** prof_fiber.c -- one fiber hot path alone, for callgrind's instruction counts:
**
**   prof_fiber yield|spawn|mutex|chan N [shared-stacks]
**
** yield: two fibers yield N times each (N round trips); spawn: N spawn + join
** + release; mutex: N hand-offs of a contended mutex between two fibers; chan:
** N values through an unbuffered channel.  With a third argument the
** scheduler runs its default-size fibers on that many shared stacks
** (px_sched_opts.shared_stacks).  Instructions per op: run N and 2N under
** `valgrind --tool=callgrind` and divide the difference by N
** (tests/bench/prof_fiber.sh does).
*/
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parataxis.h"

static long n;
static px_mutex *mu;
static px_chan *ch;

static void *yielder(void *arg)
{
    (void)arg;
    for (long i = 0; i < n; i++)
        px_yield();
    return NULL;
}

static void *nothing(void *arg)
{
    return arg;
}

static void *locker(void *arg)
{
    (void)arg;
    for (long i = 0; i < n; i++) {
        px_mutex_lock(mu);
        px_yield();   /* the other one queues: every unlock hands over */
        px_mutex_unlock(mu);
    }
    return NULL;
}

static void *sender(void *arg)
{
    (void)arg;
    for (long i = 0; i < n; i++)
        px_chan_send(ch, &n);
    return NULL;
}

static void *receiver(void *arg)
{
    void *v;
    (void)arg;
    for (long i = 0; i < n; i++)
        px_chan_recv(ch, &v);
    return NULL;
}

static void pair(px_fiber_fn a, px_fiber_fn b)
{
    px_fiber *x = px_spawn(a, NULL), *y = px_spawn(b, NULL);
    px_join(x, NULL);
    px_join(y, NULL);
    px_fiber_release(x);
    px_fiber_release(y);
}

static void *main_fiber(void *arg)
{
    const char *what = arg;
    if (strcmp(what, "yield") == 0) {
        pair(yielder, yielder);
    } else if (strcmp(what, "spawn") == 0) {
        for (long i = 0; i < n; i++) {
            px_fiber *f = px_spawn(nothing, NULL);
            px_join(f, NULL);
            px_fiber_release(f);
        }
    } else if (strcmp(what, "mutex") == 0) {
        mu = px_mutex_new();
        pair(locker, locker);
        px_mutex_free(mu);
    } else if (strcmp(what, "chan") == 0) {
        ch = px_chan_new(0);
        pair(sender, receiver);
        px_chan_free(ch);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: prof_fiber yield|spawn|mutex|chan N [shared-stacks]\n");
        return 2;
    }
    n = atol(argv[2]);
    px_sched_opts o;
    memset(&o, 0, sizeof o);
    if (argc > 3)
        o.shared_stacks = (size_t)atol(argv[3]);
    px_sched *s = px_sched_new(&o);
    if (s == NULL || px_sched_post(s, main_fiber, argv[1]) != 0)
        return 1;
    int r = px_sched_run(s);
    px_sched_free(s);
    return r != 0;
}
