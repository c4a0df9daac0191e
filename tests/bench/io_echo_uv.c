/*
** io_echo_uv.c -- the libuv echo server of io_echo.py, written as a libuv
** user who cares about speed writes one: a 64 KiB buffer per connection, each
** read echoed with uv_try_write, and only what that could not write handed to
** uv_write (reads stopped until it is out, so the buffer is not reused early).
**
**   io_echo_uv     prints "port N" once it listens on 127.0.0.1:N; runs until killed
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#define BUF (64 * 1024)

struct conn {
    uv_tcp_t tcp;
    uv_write_t wr;
    char buf[BUF];
};

static uv_loop_t *loop;

static void on_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    struct conn *c = h->data;
    (void)hint;
    *b = uv_buf_init(c->buf, BUF);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void on_written(uv_write_t *w, int status)
{
    struct conn *c = w->data;
    if (status < 0) {
        uv_close((uv_handle_t *)&c->tcp, on_closed);
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct conn *c = s->data;
    if (n < 0) {
        uv_close((uv_handle_t *)s, on_closed);
        return;
    }
    if (n == 0)
        return;
    uv_buf_t out = uv_buf_init(b->base, (unsigned)n);
    int w = uv_try_write(s, &out, 1);
    if (w == n)
        return;
    if (w < 0 && w != UV_EAGAIN) {
        uv_close((uv_handle_t *)s, on_closed);
        return;
    }
    if (w > 0)
        out = uv_buf_init(b->base + w, (unsigned)(n - w));
    uv_read_stop(s);
    c->wr.data = c;
    if (uv_write(&c->wr, s, &out, 1, on_written) != 0)
        uv_close((uv_handle_t *)s, on_closed);
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0)
        return;
    struct conn *c = malloc(sizeof *c);
    if (c == NULL)
        abort();
    uv_tcp_init(loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, on_closed);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int main(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    loop = uv_default_loop();
    uv_tcp_t server;
    struct sockaddr_in a;
    struct sockaddr_storage got;
    int len = sizeof got;
    uv_tcp_init(loop, &server);
    uv_ip4_addr("127.0.0.1", 0, &a);
    if (uv_tcp_bind(&server, (const struct sockaddr *)&a, 0) != 0 ||
        uv_listen((uv_stream_t *)&server, 4096, on_connection) != 0 ||
        uv_tcp_getsockname(&server, (struct sockaddr *)&got, &len) != 0) {
        fprintf(stderr, "io_echo_uv: cannot listen\n");
        return 1;
    }
    printf("port %d\n", ntohs(((struct sockaddr_in *)&got)->sin_port));
    fflush(stdout);
    return uv_run(loop, UV_RUN_DEFAULT);
}
