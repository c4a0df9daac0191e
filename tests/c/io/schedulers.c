/*
** schedulers.c -- px_wait_fd and px_fd_notify_closing across schedulers: the
** fibers of two schedulers (two threads) may wait on one fd in the same
** direction, each through its own epoll set; an event wakes both, and one
** px_fd_notify_closing from a third thread wakes both with PX_ECLOSED.  One
** SPEC (one ctest io.<name>) each.
*/
#include <fcntl.h>
#include <unistd.h>

#include "../spec.h"

enum { THREADS = 2 };
static int P[2];                 /* a pipe, both ends non-blocking */
static px_latch waiting;         /* set once per waiter, once it waits */
static int outcome[THREADS];

static void *says_waiting(void *arg)
{
    (void)arg;
    ev_set(&waiting);            /* runs only once the waiter parked */
    return NULL;
}

static void *waiter(void *arg)
{
    int *out = arg;
    px_fiber *s = px_spawn(says_waiting, NULL);
    CHECK(s != NULL);
    *out = px_wait_fd(P[0], PX_READABLE);
    CHECK_EQ(px_join(s, NULL), 0);
    px_fiber_release(s);
    return NULL;
}

static void *thread_run(void *arg)
{
    CHECK_EQ(px_run(waiter, arg, NULL), 0);
    return NULL;
}

/* Starts a scheduler thread per waiter, each fiber waiting on P[0], and
** returns once all of them wait. */
static void start(pthread_t *t)
{
    CHECK_EQ(pipe2(P, O_NONBLOCK | O_CLOEXEC), 0);
    ev_init(&waiting);
    for (int i = 0; i < THREADS; i++) {
        outcome[i] = 1;
        CHECK_EQ(pthread_create(&t[i], NULL, thread_run, &outcome[i]), 0);
    }
    CHECK(ev_wait_n(&waiting, THREADS));
}

static void finish(pthread_t *t, int expect)
{
    for (int i = 0; i < THREADS; i++) {
        CHECK_EQ(pthread_join(t[i], NULL), 0);
        CHECK_EQ(outcome[i], expect);
    }
    ev_destroy(&waiting);
    for (int e = 0; e < 2; e++) {
        CHECK_EQ(px_fd_notify_closing(P[e]), 0);
        CHECK_EQ(close(P[e]), 0);
    }
}

SPEC(waiters_of_two_schedulers_on_one_fd_are_both_woken_by_its_event)
{
    pthread_t t[THREADS];
    start(t);
    CHECK_EQ(write(P[1], "x", 1), 1);    /* one byte: ready for both */
    finish(t, 0);
}

SPEC(notify_closing_wakes_the_waiters_of_every_scheduler)
{
    pthread_t t[THREADS];
    start(t);
    CHECK_EQ(px_fd_notify_closing(P[0]), 0);   /* from a thread of no scheduler */
    finish(t, PX_ECLOSED);
}

SPECS(waiters_of_two_schedulers_on_one_fd_are_both_woken_by_its_event,
      notify_closing_wakes_the_waiters_of_every_scheduler)
