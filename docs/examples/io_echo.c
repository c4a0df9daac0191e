/*
** io_echo.c -- an echo server and three clients, all fibers of one run on one
** thread.  Each fiber makes its own socket calls (px_accept, px_connect,
** px_send, px_recv); a call that would block parks that fiber alone until its
** socket is ready, and the others run meanwhile.
**
**   cc io_echo.c -lparataxis -pthread && ./a.out
*/
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "parataxis.h"

enum { CLIENTS = 3 };
static struct sockaddr_in addr;          /* where the server listens */
static char replies[CLIENTS][64];        /* what each client got back */

static void close_fd(int fd)
{
    px_fd_notify_closing(fd);            /* wakes a fiber waiting on fd, if any */
    close(fd);
}

static void *serve(void *arg)            /* one connection: echo until the end */
{
    int fd = (int)(intptr_t)arg;
    char buf[256];
    ssize_t n;
    while ((n = px_recv(fd, buf, sizeof buf, 0)) > 0)
        if (px_send(fd, buf, (size_t)n, 0) != n)
            break;
    close_fd(fd);
    return NULL;
}

static void *server(void *arg)
{
    int listener = (int)(intptr_t)arg;
    for (int i = 0; i < CLIENTS; i++) {
        int fd = px_accept(listener, NULL, NULL);   /* non-blocking, close-on-exec */
        if (fd < 0) {
            perror("px_accept");
            break;
        }
        px_fiber_release(px_spawn(serve, (void *)(intptr_t)fd));
    }
    return NULL;
}

static void *client(void *arg)
{
    int id = (int)(intptr_t)arg;
    char msg[64];
    int len = snprintf(msg, sizeof msg, "hello from client %d", id);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || px_connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0
        || px_send(fd, msg, (size_t)len, 0) != len) {
        perror("client");
        return NULL;
    }
    ssize_t got = 0, n = 1;
    while (got < len && (n = px_recv(fd, replies[id] + got, (size_t)(len - got), 0)) > 0)
        got += n;
    close_fd(fd);
    return NULL;
}

static void *main_fiber(void *arg)
{
    (void)arg;
    int listener = px_tcp_listen("127.0.0.1", "0", 16);   /* "0": any free port */
    socklen_t size = sizeof addr;
    if (listener < 0 || getsockname(listener, (struct sockaddr *)&addr, &size) != 0) {
        perror("listen");
        return NULL;
    }
    printf("echo server on 127.0.0.1, port %d\n", ntohs(addr.sin_port));
    px_fiber *srv = px_spawn(server, (void *)(intptr_t)listener);
    px_fiber *c[CLIENTS];
    for (int i = 0; i < CLIENTS; i++)
        c[i] = px_spawn(client, (void *)(intptr_t)i);
    for (int i = 0; i < CLIENTS; i++) {
        px_join(c[i], NULL);
        px_fiber_release(c[i]);
        printf("client %d got back \"%s\"\n", i, replies[i]);
    }
    px_join(srv, NULL);
    px_fiber_release(srv);
    close_fd(listener);

    /* A scope bounds every wait inside it; the call says so the POSIX way. */
    int quiet[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, quiet);
    char ch;
    px_scope_push_timeout(PX_MSEC(20));
    ssize_t r = px_recv(quiet[0], &ch, 1, 0);
    printf("px_recv on a quiet socket for 20 ms: %zd, errno %s\n", r,
           errno == ETIMEDOUT ? "ETIMEDOUT" : strerror(errno));
    px_scope_pop();
    close_fd(quiet[0]);
    close_fd(quiet[1]);
    return NULL;
}

int main(void)
{
    int rc = px_run(main_fiber, NULL, NULL);
    if (rc != 0)
        fprintf(stderr, "px_run: %s\n", px_strerror(rc));
    return rc == 0 ? 0 : 1;
}
