/*
** io_echo_epoll.c -- the hand-written epoll echo server of io_echo.py: one
** thread, level-triggered epoll, one read and one write per request.
**
**   io_echo_epoll     prints "port N" once it listens on 127.0.0.1:N; runs until killed
**
** Each readable connection gets one read of up to 64 KiB into the loop's one
** buffer and one write of what came; a write that is short (never seen on
** loopback) keeps the rest in a buffer of the connection and waits for EPOLLOUT
** before it reads again.
*/
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF (64 * 1024)

struct conn {
    int fd;
    char *rest;         /* what a short write left, or NULL */
    size_t off, len;
};

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void drop(int ep, struct conn *c)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->rest);
    free(c);
}

int main(void)
{
    static char buf[BUF];
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 4096) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) != 0)
        die("listen");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event e = { .events = EPOLLIN, .data.ptr = NULL };
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e) != 0)
        die("epoll");
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);

    struct epoll_event ev[256];
    for (;;) {
        int k = epoll_wait(ep, ev, 256, -1);
        if (k < 0 && errno != EINTR)
            die("epoll_wait");
        for (int j = 0; j < k; j++) {
            struct conn *c = ev[j].data.ptr;
            if (c == NULL) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    c = calloc(1, sizeof *c);
                    if (c == NULL)
                        die("calloc");
                    c->fd = fd;
                    struct epoll_event ce = { .events = EPOLLIN, .data.ptr = c };
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce) != 0)
                        die("epoll_ctl");
                }
                continue;
            }
            if (c->rest != NULL) {
                /* EPOLLOUT: the rest of a short write. */
                ssize_t w = write(c->fd, c->rest + c->off, c->len - c->off);
                if (w < 0 && errno == EAGAIN)
                    continue;
                if (w < 0) {
                    drop(ep, c);
                    continue;
                }
                c->off += (size_t)w;
                if (c->off == c->len) {
                    free(c->rest);
                    c->rest = NULL;
                    struct epoll_event ce = { .events = EPOLLIN, .data.ptr = c };
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ce);
                }
                continue;
            }
            ssize_t r = read(c->fd, buf, sizeof buf);
            if (r < 0 && errno == EAGAIN)
                continue;
            if (r <= 0) {
                drop(ep, c);
                continue;
            }
            ssize_t w = write(c->fd, buf, (size_t)r);
            if (w < 0 && errno != EAGAIN) {
                drop(ep, c);
                continue;
            }
            if (w < 0)
                w = 0;
            if (w < r) {
                c->len = (size_t)(r - w);
                c->off = 0;
                c->rest = malloc(c->len);
                if (c->rest == NULL)
                    die("malloc");
                memcpy(c->rest, buf + w, c->len);
                struct epoll_event ce = { .events = EPOLLOUT, .data.ptr = c };
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ce);
            }
        }
    }
}
