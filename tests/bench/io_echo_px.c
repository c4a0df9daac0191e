/*
** io_echo_px.c -- the parataxis echo server of io_bench.py: a fiber per
** connection, px_accept / px_recv / px_send, one scheduler on one thread.
**
**   io_echo_px [shared]   prints "port N" once it listens on 127.0.0.1:N; runs until killed
**
** Each connection's fiber has a 64 KiB buffer (on the heap, as the other
** servers' are), receives what is there and sends it all back.  "shared": the
** scheduler runs its fibers on shared stacks (px_sched_opts.shared_stacks = 1).
*/
#define _GNU_SOURCE
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "parataxis.h"

#define BUF (64 * 1024)

static void *serve(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char *buf = malloc(BUF);
    ssize_t n;
    while (buf != NULL && (n = px_recv(fd, buf, BUF, 0)) > 0)
        if (px_send(fd, buf, (size_t)n, 0) != n)
            break;
    free(buf);
    close(fd);
    return NULL;
}

static void *acceptor(void *arg)
{
    int one = 1, lfd = px_tcp_listen("127.0.0.1", "0", 4096);
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    (void)arg;
    if (lfd < 0 || getsockname(lfd, (struct sockaddr *)&a, &alen) != 0) {
        perror("io_echo_px: listen");
        exit(1);
    }
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (;;) {
        int fd = px_accept(lfd, NULL, NULL);
        if (fd < 0) {
            perror("io_echo_px: accept");
            exit(1);
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        px_fiber *f = px_spawn(serve, (void *)(intptr_t)fd);
        if (f == NULL) {
            close(fd);
            continue;
        }
        px_fiber_release(f);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct rlimit rl;
    px_sched_opts o;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    memset(&o, 0, sizeof o);
    o.shared_stacks = argc > 1 && strcmp(argv[1], "shared") == 0 ? 1 : 0;
    px_sched *s = px_sched_new(&o);
    if (s == NULL || px_sched_post(s, acceptor, NULL) != 0)
        return 1;
    int r = px_sched_run(s);
    fprintf(stderr, "io_echo_px: run ended: %s\n", px_strerror(r));
    return 1;
}
