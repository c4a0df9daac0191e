/*
** calls.c -- the fiber-aware I/O calls (px_read, px_write, px_recv, px_send,
** px_accept, px_connect, px_tcp_listen): they try, wait on EAGAIN, and keep
** the system call's convention, the wait's outcomes as errno.  One SPEC (one
** ctest io.<name>) per behaviour.
*/
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../spec.h"

static int P[2];                 /* a pipe, both ends non-blocking */
static int S[2];                 /* a socketpair, both ends non-blocking */

static void open_pipe(void)
{
    CHECK_EQ(pipe2(P, O_NONBLOCK | O_CLOEXEC), 0);
}

static void open_pair(void)
{
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, S), 0);
}

static void close_fd(int fd)
{
    CHECK_EQ(px_fd_notify_closing(fd), 0);
    CHECK_EQ(close(fd), 0);
}

static void run(px_fiber_fn main_fn)
{
    CHECK_EQ(px_run(main_fn, NULL, NULL), 0);
}

/* The byte at offset i of a test stream. */
static unsigned char pattern(size_t i)
{
    return (unsigned char)(i * 131 + (i >> 9));
}

/* A port on 127.0.0.1 where nobody listens: bound, read, closed. */
static struct sockaddr_in closed_port(void)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    CHECK_EQ(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    CHECK_EQ(close(fd), 0);
    return a;
}

static struct sockaddr_in local_addr(int listener)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    CHECK_EQ(getsockname(listener, (struct sockaddr *)&a, &len), 0);
    CHECK_EQ(a.sin_family, AF_INET);
    return a;
}

static int tcp_socket(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    return fd;
}

/* -- read and write ---------------------------------------------------------- */

static void *writes_hello(void *arg)
{
    (void)arg;
    CHECK_EQ(px_write(P[1], "hello", 5), 5);
    return NULL;
}

static void *read_waits(void *arg)
{
    (void)arg;
    char buf[16];
    px_fiber *w = px_spawn(writes_hello, NULL);    /* runs only once we wait */
    CHECK_EQ(px_read(P[0], buf, sizeof buf), 5);   /* what is there, not 16 */
    CHECK(memcmp(buf, "hello", 5) == 0);
    CHECK_EQ(px_join(w, NULL), 0);
    px_fiber_release(w);
    return NULL;
}

SPEC(read_waits_for_data_and_returns_what_is_there)
{
    open_pipe();
    run(read_waits);
    close_fd(P[0]);
    close_fd(P[1]);
}

/* 1 MiB into a pipe nobody reads, under a timeout: the count written so far. */
enum { MIB = 1 << 20 };
static unsigned char *big;
static ssize_t wrote;
static int wrote_errno;

static void *writes_a_mib(void *arg)
{
    (void)arg;
    int64_t t0 = px_now();
    CHECK_EQ(px_scope_push_timeout(PX_MSEC(100)), 0);
    wrote = px_write(P[1], big, MIB);
    wrote_errno = errno;
    CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
    CHECK_GE(px_now() - t0, PX_MSEC(100));
    return NULL;
}

SPEC(a_scope_ending_px_write_returns_the_count_written)
{
    open_pipe();
    big = malloc(MIB);
    CHECK(big != NULL);
    for (size_t i = 0; i < MIB; i++)
        big[i] = pattern(i);
    run(writes_a_mib);
    CHECK(wrote > 0 && wrote < MIB);     /* a pipe holds 64 KiB by default */
    CHECK_EQ(wrote_errno, ETIMEDOUT);
    /* The reader gets exactly those bytes, in order, and nothing more. */
    unsigned char *got = malloc(MIB);
    CHECK(got != NULL);
    size_t n = 0;
    for (;;) {
        ssize_t r = read(P[0], got + n, MIB - n);
        if (r < 0) {
            CHECK_EQ(errno, EAGAIN);
            break;
        }
        n += (size_t)r;
    }
    CHECK_EQ(n, wrote);
    CHECK(memcmp(got, big, n) == 0);
    free(got);
    free(big);
    close_fd(P[0]);
    close_fd(P[1]);
}

static void *partial_then_rest(void *arg)
{
    (void)arg;
    /* A timeout in the middle of a px_recv: -1/ETIMEDOUT, and the bytes that
    ** come later are all there for the next call, none lost or doubled. */
    char buf[64];
    CHECK_EQ(px_scope_push_timeout(PX_MSEC(50)), 0);
    CHECK_EQ(px_recv(S[0], buf, sizeof buf, 0), -1);
    CHECK_EQ(errno, ETIMEDOUT);
    CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
    CHECK_EQ(px_send(S[1], "0123456789", 10, 0), 10);
    CHECK_EQ(px_recv(S[0], buf, 4, 0), 4);
    CHECK(memcmp(buf, "0123", 4) == 0);
    CHECK_EQ(px_recv(S[0], buf, sizeof buf, 0), 6);
    CHECK(memcmp(buf, "456789", 6) == 0);
    return NULL;
}

SPEC(a_scope_ending_px_recv_loses_no_byte)
{
    open_pair();
    run(partial_then_rest);
    close_fd(S[0]);
    close_fd(S[1]);
}

/* -- a second waiter, a file, a hang-up ----------------------------------------- */

static void *first_reader(void *arg)
{
    (void)arg;
    char c;
    CHECK_EQ(px_read(P[0], &c, 1), 1);
    CHECK_EQ(c, 'x');
    return NULL;
}

static void *two_readers(void *arg)
{
    (void)arg;
    px_fiber *a = px_spawn(first_reader, NULL);
    CHECK_EQ(px_yield(), 0);                       /* a waits now */
    char c;
    CHECK_EQ(px_read(P[0], &c, 1), -1);            /* a second reader */
    CHECK_EQ(errno, EBUSY);
    CHECK_EQ(px_write(P[1], "x", 1), 1);
    CHECK_EQ(px_join(a, NULL), 0);
    px_fiber_release(a);
    return NULL;
}

SPEC(a_second_reader_of_one_fd_gets_ebusy)
{
    open_pipe();
    run(two_readers);
    close_fd(P[0]);
    close_fd(P[1]);
}

static void *file_calls(void *arg)
{
    (void)arg;
    char path[] = "/tmp/px_io_callsXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK_EQ(unlink(path), 0);
    CHECK_EQ(px_fd_set_nonblocking(fd), 0);        /* a file ignores it */
    CHECK_EQ(px_write(fd, "file bytes", 10), 10);  /* never EAGAIN: no wait */
    CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
    char buf[32];
    CHECK_EQ(px_read(fd, buf, sizeof buf), 10);
    CHECK(memcmp(buf, "file bytes", 10) == 0);
    CHECK_EQ(px_read(fd, buf, sizeof buf), 0);     /* its end */
    CHECK_EQ(px_wait_fd(fd, PX_READABLE), PX_ENOTSUP);
    CHECK_EQ(close(fd), 0);
    return NULL;
}

SPEC(px_read_and_px_write_work_on_a_regular_file)
{
    run(file_calls);
}

static void *closes_writer(void *arg)
{
    (void)arg;
    close_fd(P[1]);
    return NULL;
}

static void *hangup(void *arg)
{
    (void)arg;
    px_fiber *w = px_spawn(closes_writer, NULL);
    char c;
    CHECK_EQ(px_read(P[0], &c, 1), 0);             /* end of file, not a hang */
    CHECK_EQ(px_join(w, NULL), 0);
    px_fiber_release(w);
    return NULL;
}

SPEC(a_pipes_hangup_ends_px_read_with_0)
{
    open_pipe();
    run(hangup);
    close_fd(P[0]);
}

/* -- notify_closing ---------------------------------------------------------- */

static void *closer(void *arg)
{
    (void)arg;
    close_fd(P[0]);                                /* its reader waits */
    return NULL;
}

static void *closed_under_reader(void *arg)
{
    (void)arg;
    px_fiber *c = px_spawn(closer, NULL);
    char ch;
    CHECK_EQ(px_read(P[0], &ch, 1), -1);
    CHECK_EQ(errno, EBADF);
    CHECK_EQ(px_join(c, NULL), 0);
    px_fiber_release(c);
    return NULL;
}

SPEC(notify_closing_ends_px_read_with_ebadf)
{
    open_pipe();
    run(closed_under_reader);
    close_fd(P[1]);
}

static px_latch reader_waits;

static void *says_reader_waits(void *arg)
{
    (void)arg;
    ev_set(&reader_waits);                          /* runs once the reader waits */
    return NULL;
}

static void *reader_closed_by_thread(void *arg)
{
    (void)arg;
    px_fiber *s = px_spawn(says_reader_waits, NULL);
    char ch;
    CHECK_EQ(px_recv(S[0], &ch, 1, 0), -1);
    CHECK_EQ(errno, EBADF);
    CHECK_EQ(px_join(s, NULL), 0);
    px_fiber_release(s);
    return NULL;
}

static void *thread_closes(void *arg)
{
    (void)arg;
    CHECK(ev_wait_n(&reader_waits, 1));
    close_fd(S[0]);
    return NULL;
}

SPEC(notify_closing_from_another_thread_ends_px_recv_with_ebadf)
{
    open_pair();
    ev_init(&reader_waits);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, thread_closes, NULL), 0);
    run(reader_closed_by_thread);
    CHECK_EQ(pthread_join(t, NULL), 0);
    close_fd(S[1]);
    ev_destroy(&reader_waits);
}

/* The fd number of a socket that was waited on, woken and closed is reused at
** once while the old file lives on (a dup keeps it open, so epoll would still
** know it): events of the old file must not wake the new fd's waiter.  The
** waiter of the old file was woken by an event first, then by notify_closing
** while its fd was armed. */
static int old_peer;

static void *feeds_old(void *arg)
{
    (void)arg;
    CHECK_EQ(px_send(old_peer, "old", 3, 0), 3);
    return NULL;
}

/* Closes x (its file kept by a dup), puts a new socket at number x, and checks
** that data for the old file does not wake x's new reader.  Returns the new
** socket's peer; old_peer is then the dup, which holds one "old". */
static int reuse(int x)
{
    int old = dup(x);
    CHECK(old >= 0);
    close_fd(x);
    int fresh[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fresh), 0);
    if (fresh[0] != x) {                          /* number x, a new socket */
        CHECK_EQ(dup2(fresh[0], x), x);
        CHECK_EQ(close(fresh[0]), 0);
    }
    char buf[8];
    px_fiber *w = px_spawn(feeds_old, NULL);      /* runs while x's reader waits */
    CHECK_EQ(px_scope_push_timeout(PX_MSEC(100)), 0);
    CHECK_EQ(px_recv(x, buf, sizeof buf, 0), -1);
    CHECK_EQ(errno, ETIMEDOUT);
    CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
    CHECK_EQ(px_join(w, NULL), 0);
    px_fiber_release(w);
    CHECK_EQ(px_send(fresh[1], "new", 3, 0), 3);
    CHECK_EQ(px_recv(x, buf, sizeof buf, 0), 3);
    CHECK(memcmp(buf, "new", 3) == 0);
    CHECK_EQ(px_recv(old, buf, sizeof buf, 0), 3);   /* the old file's, untouched */
    CHECK(memcmp(buf, "old", 3) == 0);
    close_fd(old);
    close_fd(old_peer);
    old_peer = fresh[1];
    return fresh[1];
}

static void *reader_gets_ebadf(void *arg)
{
    char c;
    CHECK_EQ(px_recv((int)(intptr_t)arg, &c, 1, 0), -1);
    CHECK_EQ(errno, EBADF);
    return NULL;
}

static void *reused(void *arg)
{
    (void)arg;
    int x = S[0];
    old_peer = S[1];
    char buf[8];
    px_fiber *w = px_spawn(feeds_old, NULL);
    CHECK_EQ(px_recv(x, buf, sizeof buf, 0), 3);  /* waited, woken by an event */
    CHECK_EQ(px_join(w, NULL), 0);
    px_fiber_release(w);
    reuse(x);
    /* Again, the old file's reader waiting (armed) when x is closed. */
    px_fiber *r = px_spawn(reader_gets_ebadf, (void *)(intptr_t)x);
    CHECK_EQ(px_yield(), 0);
    reuse(x);
    CHECK_EQ(px_join(r, NULL), 0);
    px_fiber_release(r);
    close_fd(x);
    close_fd(old_peer);
    return NULL;
}

SPEC(a_reused_fd_number_is_not_woken_by_the_old_files_events)
{
    open_pair();
    run(reused);
}

/* -- sockets: connect, accept, errors ------------------------------------------ */

static void *connects(void *arg)
{
    (void)arg;
    int l = px_tcp_listen("127.0.0.1", "0", 8);
    CHECK(l >= 0);
    CHECK(fcntl(l, F_GETFL) & O_NONBLOCK);
    CHECK(fcntl(l, F_GETFD) & FD_CLOEXEC);
    struct sockaddr_in a = local_addr(l);
    int c = tcp_socket();
    CHECK_EQ(px_connect(c, (struct sockaddr *)&a, sizeof a), 0);
    struct sockaddr_in peer;
    socklen_t len = sizeof peer;
    int s = px_accept(l, (struct sockaddr *)&peer, &len);
    CHECK(s >= 0);
    CHECK_EQ(len, sizeof peer);
    CHECK(fcntl(s, F_GETFL) & O_NONBLOCK);
    CHECK(fcntl(s, F_GETFD) & FD_CLOEXEC);
    CHECK_EQ(px_send(c, "ping", 4, 0), 4);
    char buf[8];
    CHECK_EQ(px_recv(s, buf, sizeof buf, 0), 4);
    CHECK(memcmp(buf, "ping", 4) == 0);
    close_fd(s);
    close_fd(c);
    /* Nobody there: the socket's own error. */
    struct sockaddr_in none = closed_port();
    c = tcp_socket();
    CHECK_EQ(px_connect(c, (struct sockaddr *)&none, sizeof none), -1);
    CHECK_EQ(errno, ECONNREFUSED);
    close_fd(c);
    close_fd(l);
    return NULL;
}

SPEC(px_connect_and_px_accept_make_a_connection_or_say_why_not)
{
    run(connects);
}

static void *accepter(void *arg)
{
    int l = (int)(intptr_t)arg;
    int s = px_accept(l, NULL, NULL);
    CHECK(s >= 0);
    close_fd(s);
    return NULL;
}

static void *accept_waits(void *arg)
{
    (void)arg;
    int l = px_tcp_listen("127.0.0.1", "0", 8);
    CHECK(l >= 0);
    px_fiber *a = px_spawn(accepter, (void *)(intptr_t)l);
    CHECK_EQ(px_yield(), 0);                         /* it waits for a connection */
    struct sockaddr_in addr = local_addr(l);
    int c = tcp_socket();
    CHECK_EQ(px_connect(c, (struct sockaddr *)&addr, sizeof addr), 0);
    CHECK_EQ(px_join(a, NULL), 0);
    px_fiber_release(a);
    char ch;
    CHECK_EQ(px_recv(c, &ch, 1, 0), 0);              /* the server closed it */
    close_fd(c);
    close_fd(l);
    return NULL;
}

SPEC(px_accept_waits_for_a_connection)
{
    run(accept_waits);
}

/* A listener with a backlog of 1 that never accepts, filled first: the next
** connection's SYN is dropped, so px_connect waits until its scope ends. */
static void *connect_interrupted(void *arg)
{
    (void)arg;
    int l = px_tcp_listen("127.0.0.1", "0", 1);
    CHECK(l >= 0);
    struct sockaddr_in a = local_addr(l);
    int c[16];
    int n = 0, timed_out = 0;
    while (n < 16 && !timed_out) {
        c[n] = tcp_socket();
        CHECK_EQ(px_scope_push_timeout(PX_MSEC(300)), 0);
        int64_t t0 = px_now();
        int r = px_connect(c[n], (struct sockaddr *)&a, sizeof a);
        int err = errno;
        int fired = px_scope_pop();
        if (r != 0) {
            CHECK_EQ(err, ETIMEDOUT);
            CHECK_EQ(fired, PX_ETIMEDOUT);
            CHECK_GE(px_now() - t0, PX_MSEC(300));
            timed_out = 1;
        } else {
            CHECK_EQ(fired, 0);
        }
        n++;
    }
    CHECK(timed_out);
    CHECK(n >= 2);                                    /* the backlog took some */
    for (int i = 0; i < n; i++)
        close_fd(c[i]);                               /* the caller closes it */
    close_fd(l);
    return NULL;
}

SPEC(a_scope_ending_px_connect_leaves_the_socket_to_close)
{
    run(connect_interrupted);
}

static void *epipe(void *arg)
{
    (void)arg;
    close_fd(S[1]);
    CHECK_EQ(px_send(S[0], "x", 1, 0), -1);
    CHECK_EQ(errno, EPIPE);
    return NULL;
}

SPEC(px_send_to_a_gone_peer_is_epipe_not_sigpipe)
{
    CHECK(signal(SIGPIPE, SIG_DFL) != SIG_ERR);       /* SIGPIPE would end the test */
    open_pair();
    run(epipe);
    sigset_t pending;
    CHECK_EQ(sigpending(&pending), 0);
    CHECK(!sigismember(&pending, SIGPIPE));
    close_fd(S[0]);
}

static void *resets(void *arg)
{
    (void)arg;
    int l = px_tcp_listen("127.0.0.1", "0", 8);
    CHECK(l >= 0);
    struct sockaddr_in a = local_addr(l);
    int c = tcp_socket();
    CHECK_EQ(px_connect(c, (struct sockaddr *)&a, sizeof a), 0);
    int s = px_accept(l, NULL, NULL);
    CHECK(s >= 0);
    struct linger lg = { .l_onoff = 1, .l_linger = 0 };   /* close sends RST */
    CHECK_EQ(setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    close_fd(s);
    char ch;
    CHECK_EQ(px_recv(c, &ch, 1, 0), -1);
    CHECK_EQ(errno, ECONNRESET);
    close_fd(c);
    close_fd(l);
    return NULL;
}

SPEC(px_recv_after_a_reset_is_econnreset)
{
    run(resets);
}

static void *listens(void *arg)
{
    (void)arg;
    CHECK_EQ(px_tcp_listen("localhost", "0", 8), -1);   /* a name: no DNS here */
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(px_tcp_listen("127.0.0.1", "http", 8), -1);
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(px_tcp_listen("127.0.0.1", NULL, 8), -1);
    CHECK_EQ(errno, EINVAL);
    int l = px_tcp_listen("127.0.0.1", "0", 8);
    CHECK(l >= 0);
    struct sockaddr_in a = local_addr(l);
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)ntohs(a.sin_port));
    int l2 = px_tcp_listen("127.0.0.1", port, 8);       /* taken */
    CHECK_EQ(l2, -1);
    CHECK_EQ(errno, EADDRINUSE);
    close_fd(l);
    l = px_tcp_listen(NULL, "0", 8);                     /* any address */
    CHECK(l >= 0);
    close_fd(l);
    return NULL;
}

SPEC(px_tcp_listen_takes_numeric_addresses_only)
{
    run(listens);
}

/* -- off-fiber, hosted -------------------------------------------------------- */

static void *writes_later(void *arg)
{
    (void)arg;
    struct timespec ts = { 0, 50 * 1000 * 1000 };
    nanosleep(&ts, NULL);              /* long enough to make px_read wait */
    CHECK_EQ(write(P[1], "late", 4), 4);
    return NULL;
}

static void *drains_later(void *arg)
{
    (void)arg;
    struct timespec ts = { 0, 50 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    static char sink[1 << 16];
    size_t n = 0;
    while (n < (size_t)MIB) {          /* until the whole MiB came through */
        struct pollfd p = { .fd = P[0], .events = POLLIN };
        CHECK_EQ(poll(&p, 1, 30000), 1);
        ssize_t r = read(P[0], sink, sizeof sink);
        CHECK(r > 0);
        n += (size_t)r;
    }
    return NULL;
}

SPEC(off_fiber_the_calls_wait_on_the_thread)
{
    open_pipe();
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, writes_later, NULL), 0);
    char buf[8];
    CHECK_EQ(px_self(), 0);
    CHECK_EQ(px_read(P[0], buf, sizeof buf), 4);    /* poll(2) on this thread */
    CHECK(memcmp(buf, "late", 4) == 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    /* A write larger than the pipe, drained by another thread: all of it. */
    unsigned char *m = calloc(1, MIB);
    CHECK(m != NULL);
    CHECK_EQ(pthread_create(&t, NULL, drains_later, NULL), 0);
    CHECK_EQ(px_write(P[1], m, MIB), MIB);
    CHECK_EQ(pthread_join(t, NULL), 0);
    free(m);
    close_fd(P[0]);
    close_fd(P[1]);
}

/* A host that cannot switch inside C: px_read returns -1/EAGAIN and records
** nothing (a C fiber then waits on the same fd, no EBUSY); the host waits
** with px_wait_fd, and reads once resumed. */
static int host_step, prober_done, host_waits;

static int host_resume(void *ctx)
{
    (void)ctx;
    char c;
    switch (host_step++) {
    case 0:
        CHECK_EQ(px_read(P[0], &c, 1), -1);
        CHECK_EQ(errno, EAGAIN);
        return 0;                                  /* a yield */
    case 1:
        if (!prober_done) {
            host_step--;
            CHECK_EQ(px_yield(), PX_EYIELD);
            return 0;
        }
        CHECK_EQ(px_wait_fd(P[0], PX_READABLE), PX_EYIELD);
        host_waits = 1;
        return 0;
    default:
        CHECK_EQ(px_wait_fd(P[0], PX_READABLE), 0);   /* the outcome */
        CHECK_EQ(px_read(P[0], &c, 1), 1);
        CHECK_EQ(c, 'h');
        return PX_HOST_DONE;
    }
}

static void *prober(void *arg)
{
    (void)arg;
    while (host_step == 0)
        CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_scope_push_timeout(PX_MSEC(20)), 0);
    CHECK_EQ(px_wait_fd(P[0], PX_READABLE), PX_ETIMEDOUT);   /* not EBUSY */
    CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
    prober_done = 1;
    while (!host_waits)
        CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_write(P[1], "h", 1), 1);
    return NULL;
}

SPEC(in_a_hosted_fiber_without_suspend_the_calls_do_not_wait)
{
    open_pipe();
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    px_host_ops ops = { .resume = host_resume };
    px_fiber *h = px_spawn_hosted(s, &ops, NULL);
    CHECK(h != NULL);
    px_fiber_release(h);
    CHECK_EQ(px_sched_post(s, prober, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(host_step, 3);
    px_sched_free(s);
    close_fd(P[0]);
    close_fd(P[1]);
}

/* -- many --------------------------------------------------------------------- */

/* 10,000 fibers parked in px_recv on idle sockets (both ends of 5,000
** socketpairs), then released by one byte each.  TSan counts every fiber as a
** thread (at most 8128 live): 4,000 there. */
#ifdef PX_TEST_TSAN
enum { PAIRS = 2000 };
#else
enum { PAIRS = 5000 };
#endif
static int (*pairs)[2];
static size_t received;

static void *waits_for_its_byte(void *arg)
{
    int fd = (int)(intptr_t)arg;
    unsigned char c;
    CHECK_EQ(px_recv(fd, &c, 1, 0), 1);
    CHECK_EQ(c, (unsigned char)fd);
    received++;
    return NULL;
}

static void *ten_thousand(void *arg)
{
    (void)arg;
    for (int i = 0; i < PAIRS; i++)
        for (int e = 0; e < 2; e++) {
            px_fiber *f = px_spawn(waits_for_its_byte, (void *)(intptr_t)pairs[i][e]);
            CHECK(f != NULL);
            px_fiber_release(f);
        }
    CHECK_EQ(px_yield(), 0);          /* all of them wait now */
    CHECK_EQ(received, 0);
    int64_t t0 = px_now();
    for (int i = 0; i < PAIRS; i++)
        for (int e = 0; e < 2; e++) {  /* each end's byte, written from its peer */
            unsigned char c = (unsigned char)pairs[i][e];
            CHECK_EQ(px_send(pairs[i][1 - e], &c, 1, 0), 1);
        }
    while (received < 2 * PAIRS)
        CHECK_EQ(px_yield(), 0);
    printf("%d waiters released in %.1f ms\n", 2 * PAIRS, (double)(px_now() - t0) / 1e6);
    return NULL;
}

SPEC(ten_thousand_fibers_parked_on_sockets_are_released)
{
    struct rlimit rl;
    CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rlim_t need = 2 * PAIRS + 64;
    if (rl.rlim_cur < need) {
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
            printf("skipped: %lu file descriptors needed, the hard limit is %lu\n",
                   (unsigned long)need, (unsigned long)rl.rlim_max);
            exit(77);
        }
        rl.rlim_cur = need;
        CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    pairs = calloc(PAIRS, sizeof *pairs);
    CHECK(pairs != NULL);
    for (int i = 0; i < PAIRS; i++)
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pairs[i]),
                 0);
    run(ten_thousand);
    CHECK_EQ(received, 2 * PAIRS);
    for (int i = 0; i < PAIRS; i++) {
        close_fd(pairs[i][0]);
        close_fd(pairs[i][1]);
    }
    free(pairs);
}

SPECS(read_waits_for_data_and_returns_what_is_there,
      a_scope_ending_px_write_returns_the_count_written,
      a_scope_ending_px_recv_loses_no_byte,
      a_second_reader_of_one_fd_gets_ebusy,
      px_read_and_px_write_work_on_a_regular_file,
      a_pipes_hangup_ends_px_read_with_0,
      notify_closing_ends_px_read_with_ebadf,
      notify_closing_from_another_thread_ends_px_recv_with_ebadf,
      a_reused_fd_number_is_not_woken_by_the_old_files_events,
      px_connect_and_px_accept_make_a_connection_or_say_why_not,
      px_accept_waits_for_a_connection,
      a_scope_ending_px_connect_leaves_the_socket_to_close,
      px_send_to_a_gone_peer_is_epipe_not_sigpipe,
      px_recv_after_a_reset_is_econnreset,
      px_tcp_listen_takes_numeric_addresses_only,
      off_fiber_the_calls_wait_on_the_thread,
      in_a_hosted_fiber_without_suspend_the_calls_do_not_wait,
      ten_thousand_fibers_parked_on_sockets_are_released)
