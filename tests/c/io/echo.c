/*
** echo.c -- an echo server of fibers and 200 client fibers in one run, over
** loopback TCP, every byte checked: each client sends messages of varying
** sizes up to 64 KiB from one fiber while another fiber of it reads the echo
** (one reader and one writer on one socket).  On stacks of their own, and on
** shared stacks, where the server's buffer lives on a stack that other fibers
** use while it waits.
*/
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../spec.h"

enum { CLIENTS = 200, MSGS = 4, MAXMSG = 64 * 1024, CHUNK = 16 * 1024 };

static int listener;
static struct sockaddr_in addr;
static size_t echoed;            /* bytes the clients got back and checked */
static size_t sent;              /* bytes the clients sent */
static size_t served;            /* connections the server saw to their end */

static void close_fd(int fd)
{
    CHECK_EQ(px_fd_notify_closing(fd), 0);
    CHECK_EQ(close(fd), 0);
}

/* Client c's byte at offset o of its stream. */
static unsigned char byte_of(int c, size_t o)
{
    return (unsigned char)(o * 31 + (size_t)c * 7 + (o >> 8));
}

/* The size of client c's message i: 1 byte to 64 KiB, both ends included. */
static size_t msg_size(int c, int i)
{
    if (i == 0 && c % 50 == 0)
        return MAXMSG;
    if (i == 1 && c % 50 == 1)
        return 1;
    return ((size_t)c * 7919u + (size_t)i * 104729u) % MAXMSG + 1;
}

static void *serve(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[4096];              /* on the fiber's stack, a shared one too */
    for (;;) {
        ssize_t n = px_recv(fd, buf, sizeof buf, 0);
        CHECK(n >= 0);
        if (n == 0)
            break;
        CHECK_EQ(px_send(fd, buf, (size_t)n, 0), n);
    }
    close_fd(fd);
    served++;
    return NULL;
}

static void *accept_all(void *arg)
{
    (void)arg;
    for (int i = 0; i < CLIENTS; i++) {
        int fd = px_accept(listener, NULL, NULL);
        CHECK(fd >= 0);
        px_fiber *f = px_spawn(serve, (void *)(intptr_t)fd);
        CHECK(f != NULL);
        px_fiber_release(f);
    }
    return NULL;
}

typedef struct client {
    int id, fd;
    size_t total;                /* bytes the reader got back */
} client;

/* Reads the echo until the server closes, checking every byte; the count is
** checked against what the writer sent once both are done. */
static void *read_echo(void *arg)
{
    client *c = arg;
    unsigned char *buf = malloc(CHUNK);
    CHECK(buf != NULL);
    size_t got = 0;
    for (;;) {
        ssize_t n = px_recv(c->fd, buf, CHUNK, 0);
        CHECK(n >= 0);
        if (n == 0)
            break;                                 /* the server closed */
        for (ssize_t k = 0; k < n; k++)
            CHECK_EQ(buf[k], byte_of(c->id, got + (size_t)k));
        got += (size_t)n;
    }
    c->total = got;
    echoed += got;
    free(buf);
    return NULL;
}

static void *run_client(void *arg)
{
    client c = { .id = (int)(intptr_t)arg, .total = 0 };
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    CHECK(c.fd >= 0);
    CHECK_EQ(px_connect(c.fd, (struct sockaddr *)&addr, sizeof addr), 0);
    /* c is on this fiber's stack: on a shared stack the reader may not use
    ** it while this fiber waits, so the reader gets a copy on the heap. */
    client *shared_c = malloc(sizeof *shared_c);
    CHECK(shared_c != NULL);
    *shared_c = c;
    px_fiber *reader = px_spawn(read_echo, shared_c);
    CHECK(reader != NULL);
    unsigned char *msg = malloc(MAXMSG);
    CHECK(msg != NULL);
    size_t off = 0;
    for (int i = 0; i < MSGS; i++) {
        size_t n = msg_size(c.id, i);
        for (size_t k = 0; k < n; k++)
            msg[k] = byte_of(c.id, off + k);
        CHECK_EQ(px_send(c.fd, msg, n, 0), n);   /* all of it, however long it waits */
        off += n;
    }
    CHECK_EQ(shutdown(c.fd, SHUT_WR), 0);           /* the server sees the end */
    CHECK_EQ(px_join(reader, NULL), 0);
    px_fiber_release(reader);
    CHECK_EQ(shared_c->total, off);                 /* all of it came back, no more */
    sent += off;
    free(msg);
    free(shared_c);
    close_fd(c.fd);
    return NULL;
}

static void *echo_main(void *arg)
{
    (void)arg;
    listener = px_tcp_listen("127.0.0.1", "0", CLIENTS);
    CHECK(listener >= 0);
    socklen_t len = sizeof addr;
    CHECK_EQ(getsockname(listener, (struct sockaddr *)&addr, &len), 0);
    px_fiber *server = px_spawn(accept_all, NULL);
    CHECK(server != NULL);
    px_fiber *clients[CLIENTS];
    for (int i = 0; i < CLIENTS; i++)
        CHECK((clients[i] = px_spawn(run_client, (void *)(intptr_t)i)) != NULL);
    for (int i = 0; i < CLIENTS; i++) {
        CHECK_EQ(px_join(clients[i], NULL), 0);
        px_fiber_release(clients[i]);
    }
    CHECK_EQ(px_join(server, NULL), 0);
    px_fiber_release(server);
    close_fd(listener);
    return NULL;
}

static void echo(size_t shared_stacks)
{
    echoed = sent = served = 0;
    px_sched_opts opts = { .shared_stacks = shared_stacks };
    px_sched *s = px_sched_new(&opts);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, echo_main, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    px_sched_free(s);
    CHECK_EQ(echoed, sent);
    CHECK(sent > (size_t)CLIENTS * MSGS);
    CHECK_EQ(served, CLIENTS);
    printf("%d clients, %zu bytes echoed and checked\n", CLIENTS, echoed);
}

SPEC(echo_of_200_clients_on_own_stacks_checks_every_byte)
{
    echo(0);
}

SPEC(echo_of_200_clients_on_shared_stacks_checks_every_byte)
{
    echo(4);
}

SPECS(echo_of_200_clients_on_own_stacks_checks_every_byte,
      echo_of_200_clients_on_shared_stacks_checks_every_byte)
