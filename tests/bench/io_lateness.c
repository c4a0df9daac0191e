/*
** io_lateness.c -- io_bench.py's timer lateness: how late a fiber's 50 us
** px_sleep wakes, with no fd registered and with FDS idle fds registered (FDS
** fibers parked in px_wait_fd, readable, on one end of a socketpair each, that
** never becomes ready).
**
**   io_lateness FDS [SLEEPS]     prints "lateness fds FDS p50_ns A p99_ns B max_ns C"
**   io_lateness -1 [SLEEPS]      the floor: clock_nanosleep on a plain thread, no
**                                scheduler ("lateness fds nanosleep ...")
**
** One fiber sleeps SLEEPS times (default 5,000) for 50 us; lateness = wake
** time - (time before px_sleep + 50 us), on px_now's clock; the first tenth is
** a warm-up.  Built with -DPXB_NO_IO (FDS must be 0), it needs nothing of the
** I/O layer, so that it measures a library from before it ("today's figure").
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "parataxis.h"

static long fds, sleeps;
static int (*pairs)[2];

#ifndef PXB_NO_IO
static void *idle(void *arg)
{
    int fd = *(int *)arg, r = px_wait_fd(fd, PX_READABLE);
    if (r != PX_ECLOSED) {
        fprintf(stderr, "io_lateness: px_wait_fd: %s\n", px_strerror(r));
        exit(1);
    }
    return NULL;
}
#endif

static int cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, int64_t *late)
{
    long skip = sleeps / 10, k = sleeps - skip;
    qsort(late + skip, (size_t)k, sizeof *late, cmp);
    printf("lateness fds %s p50_ns %lld p99_ns %lld max_ns %lld\n", what,
           (long long)late[skip + k / 2], (long long)late[skip + k * 99 / 100],
           (long long)late[sleeps - 1]);
}

/* The same sleeps with clock_nanosleep, the thread's timer slack set to 1 us
** as the scheduler sets it while it runs. */
static int floor_run(void)
{
    int64_t *late = malloc(sizeof *late * (size_t)sleeps);
    if (late == NULL)
        return 1;
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    for (long i = 0; i < sleeps; i++) {
        struct timespec d = { 0, 50000 };
        int64_t t0 = px_now();
        clock_nanosleep(CLOCK_MONOTONIC, 0, &d, NULL);
        late[i] = px_now() - t0 - 50000;
    }
    report("nanosleep", late);
    free(late);
    return 0;
}

static void *main_fiber(void *arg)
{
    int64_t *late = malloc(sizeof *late * (size_t)sleeps);
    (void)arg;
    if (late == NULL)
        exit(1);
#ifndef PXB_NO_IO
    for (long i = 0; i < fds; i++) {
        px_fiber *f = px_spawn(idle, &pairs[i][0]);
        if (f == NULL)
            exit(1);
        px_fiber_release(f);
    }
    px_yield();   /* every idle fiber is parked on its fd now */
#endif
    for (long i = 0; i < sleeps; i++) {
        int64_t t0 = px_now();
        if (px_sleep(50000) != 0)
            exit(1);
        late[i] = px_now() - t0 - 50000;
    }
#ifndef PXB_NO_IO
    for (long i = 0; i < fds; i++)
        px_fd_notify_closing(pairs[i][0]);
#endif
    char what[32];
    snprintf(what, sizeof what, "%ld", fds);
    report(what, late);
    free(late);
    return NULL;
}

int main(int argc, char **argv)
{
    fds = argc > 1 ? atol(argv[1]) : 0;
    sleeps = argc > 2 ? atol(argv[2]) : 5000;
    if (sleeps < 10)
        return 2;
    if (fds < 0)
        return floor_run();
#ifdef PXB_NO_IO
    if (fds != 0) {
        fprintf(stderr, "io_lateness: built without the I/O layer: FDS must be 0\n");
        return 2;
    }
#endif
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    pairs = calloc((size_t)fds + 1, sizeof *pairs);
    if (pairs == NULL)
        return 1;
    for (long i = 0; i < fds; i++)
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pairs[i]) != 0) {
            perror("io_lateness: socketpair");
            return 1;
        }
    int r = px_run(main_fiber, NULL, NULL);
    for (long i = 0; i < fds; i++)
        close(pairs[i][0]), close(pairs[i][1]);
    free(pairs);
    return r == 0 ? 0 : 1;
}
