/*
** io_rss_px.c -- io_bench.py's resident bytes per fiber parked in px_recv.
**
**   io_rss_px N [shared]   prints "port P", accepts N connections (io_echo_load
**                          --hold makes them from another process), then prints
**                          "rss parataxis-own|parataxis-shared parked N before_kib B
**                          after_kib A bytes_per P"
**
** A fiber per connection, each parked in px_recv with a 1 KiB buffer on its
** stack (Go's side, io_go rss, reads into a 1 KiB slice).  VmRSS is read
** before the first accept and once all N fibers are parked; the difference per
** connection is the fiber's record, its stack's touched pages (own stacks) or
** the bytes kept of it (shared stacks), and what the library keeps for its fd
** wait.  The kernel's socket memory is not in VmRSS, on either side.
** "shared": px_sched_opts.shared_stacks = 1.
*/
#define _GNU_SOURCE
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "parataxis.h"

static long n, parked;
static int *fds;

static long vm_rss_kib(void)
{
    char line[128];
    long v = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmRSS: %ld", &v) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return v;
}

static void *serve(void *arg)
{
    char buf[1024];
    int fd = (int)(intptr_t)arg;
    parked++;
    ssize_t r = px_recv(fd, buf, sizeof buf, 0);
    /* Woken by px_fd_notify_closing at the end: -1/EBADF. */
    (void)r;
    return NULL;
}

static void *acceptor(void *arg)
{
    const char *mode = arg;
    int lfd = px_tcp_listen("127.0.0.1", "0", 4096);
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    if (lfd < 0 || getsockname(lfd, (struct sockaddr *)&a, &alen) != 0) {
        perror("io_rss_px: listen");
        exit(1);
    }
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);
    long before = vm_rss_kib();
    for (long i = 0; i < n; i++) {
        fds[i] = px_accept(lfd, NULL, NULL);
        px_fiber *f = fds[i] < 0 ? NULL : px_spawn(serve, (void *)(intptr_t)fds[i]);
        if (f == NULL) {
            perror("io_rss_px: accept or spawn");
            exit(1);
        }
        px_fiber_release(f);
    }
    px_yield();   /* the last fibers run up to their px_recv and park */
    if (parked != n) {
        fprintf(stderr, "io_rss_px: %ld of %ld parked\n", parked, n);
        exit(1);
    }
    long after = vm_rss_kib();
    printf("rss parataxis-%s parked %ld before_kib %ld after_kib %ld bytes_per %.0f\n", mode, n,
           before, after, (double)(after - before) * 1024 / (double)n);
    fflush(stdout);
    for (long i = 0; i < n; i++)
        px_fd_notify_closing(fds[i]);
    px_yield();
    for (long i = 0; i < n; i++)
        close(fds[i]);
    close(lfd);
    return NULL;
}

int main(int argc, char **argv)
{
    struct rlimit rl;
    px_sched_opts o;
    n = argc > 1 ? atol(argv[1]) : 10000;
    int shared = argc > 2 && strcmp(argv[2], "shared") == 0;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 64) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < (rlim_t)n + 64) {
            fprintf(stderr, "io_rss_px: RLIMIT_NOFILE hard limit too low for %ld\n", n);
            return 1;
        }
    }
    fds = calloc((size_t)n + 1, sizeof *fds);
    memset(&o, 0, sizeof o);
    o.shared_stacks = shared ? 1 : 0;
    px_sched *s = px_sched_new(&o);
    if (fds == NULL || s == NULL ||
        px_sched_post(s, acceptor, (void *)(shared ? "shared" : "own")) != 0)
        return 1;
    int r = px_sched_run(s);
    px_sched_free(s);
    free(fds);
    return r == 0 ? 0 : 1;
}
