/*
** calls.c -- the fiber-aware I/O calls: px_read, px_write, px_recv, px_send,
** px_accept, px_connect, and the two helpers around them, px_fd_set_nonblocking
** and px_tcp_listen.
**
** Each call tries the system call first and waits with px_wait_fd only when it
** would block (EAGAIN), then tries again: the fiber makes the call itself while
** it runs, so a wait that a scope ends leaves nothing in flight and no byte is
** lost or doubled.  They keep the system call's convention -- a count or 0, or
** -1 with errno -- and the library's own outcomes of the wait come as errno
** values (errno_of).  Off-fiber they wait with poll(2) on the thread, as the
** plain call on a blocking fd would.  In a hosted fiber whose host cannot
** switch inside C they never wait: a wait there would be recorded and owed a
** yield, which a call that returns a count cannot ask of its host, so they
** return -1/EAGAIN as the non-blocking call does and the host waits with
** px_wait_fd itself.
*/
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fiber/fiber.h"

static int would_block(int err)
{
    return err == EAGAIN || err == EWOULDBLOCK;
}

/* The errno that stands for a code of px_wait_fd. */
static int errno_of(int code)
{
    switch (code) {
    case PX_ETIMEDOUT: return ETIMEDOUT;
    case PX_ECANCELED: return ECANCELED;
    case PX_EBUSY:     return EBUSY;
    case PX_ECLOSED:   return EBADF;        /* px_fd_notify_closing: being closed */
    case PX_ENOMEM:    return ENOMEM;
    case PX_EFORKED:   return EPERM;        /* the parent's scheduler: not permitted */
    case PX_ENOTSUP:   return EOPNOTSUPP;   /* epoll refuses it (a file: never EAGAIN) */
    default:           return EINVAL;       /* PX_EINVAL: an fd epoll does not take */
    }
}

/* Off-fiber: waits on the thread for fd, as the plain call would block.  0, or
** -1 with errno (EINTR: a signal handler ran; EBADF: fd is not open). */
static int wait_thread(int fd, unsigned events)
{
    struct pollfd p = {
        .fd = fd,
        .events = (short)(((events & PX_READABLE) ? POLLIN : 0)
                          | ((events & PX_WRITABLE) ? POLLOUT : 0)),
    };
    if (poll(&p, 1, -1) < 0)
        return -1;
    if (p.revents & POLLNVAL) {
        errno = EBADF;
        return -1;
    }
    return 0;   /* ready, or ERR/HUP: the call says which */
}

/* The call found fd not ready: waits until it is.  0 to try the call again, or
** -1 with errno (EAGAIN in a hosted fiber that cannot switch inside C). */
static int wait_ready(int fd, unsigned events)
{
    px_fiber *f = px__fiber_here();
    if (f != NULL && f->hosted && f->ops.suspend == NULL) {
        errno = EAGAIN;   /* px_wait_fd would record a wait owed a yield */
        return -1;
    }
    int r = px_wait_fd(fd, events);
    if (r == 0)
        return 0;
    if (r == PX_ENOFIBER)
        return wait_thread(fd, events);
    errno = errno_of(r);
    return -1;
}

ssize_t px_read(int fd, void *buf, size_t n)
{
    for (;;) {
        ssize_t got = read(fd, buf, n);
        if (got >= 0 || !would_block(errno))
            return got;
        if (wait_ready(fd, PX_READABLE) != 0)
            return -1;
    }
}

ssize_t px_recv(int fd, void *buf, size_t n, int flags)
{
    for (;;) {
        ssize_t got = recv(fd, buf, n, flags | MSG_DONTWAIT);
        if (got >= 0 || !would_block(errno))
            return got;
        if (wait_ready(fd, PX_READABLE) != 0)
            return -1;
    }
}

/* px_write and px_send: all n bytes, waiting whenever the fd is full.  What
** was written before an error or a wait's end is returned (errno says why),
** -1 when nothing was. */
static ssize_t put_all(int fd, const char *p, size_t n, int sock, int flags)
{
    size_t done = 0;
    for (;;) {
        ssize_t put = sock ? send(fd, p + done, n - done, flags) : write(fd, p + done, n - done);
        if (put > 0) {
            done += (size_t)put;
            if (done < n)
                continue;
            return (ssize_t)done;
        }
        if (put == 0) {   /* n == 0, or a file that takes no more (no errno) */
            return (ssize_t)done;
        }
        if (!would_block(errno) || wait_ready(fd, PX_WRITABLE) != 0)
            return done > 0 ? (ssize_t)done : -1;
    }
}

ssize_t px_write(int fd, const void *buf, size_t n)
{
    return put_all(fd, buf, n, 0, 0);
}

ssize_t px_send(int fd, const void *buf, size_t n, int flags)
{
    return put_all(fd, buf, n, 1, flags | MSG_NOSIGNAL | MSG_DONTWAIT);
}

int px_accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    for (;;) {
        int c = accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c >= 0 || !would_block(errno))
            return c;
        if (wait_ready(fd, PX_READABLE) != 0)
            return -1;
    }
}

int px_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    if (connect(fd, addr, len) == 0)
        return 0;
    /* EINTR on a non-blocking socket: the connection goes on, as EINPROGRESS. */
    if (errno != EINPROGRESS && errno != EINTR)
        return -1;   /* EAGAIN included: a Unix socket's listener is full */
    if (wait_ready(fd, PX_WRITABLE) != 0)
        return -1;   /* the socket is left connecting: the caller closes it */
    int err = 0;
    socklen_t size = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &size) != 0)
        return -1;
    if (err != 0) {
        errno = err;
        return -1;
    }
    return 0;
}

int px_fd_set_nonblocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0)
        return -1;
    if ((flags & O_NONBLOCK) == 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
        return -1;
    return 0;
}

/* The errno of a getaddrinfo failure on a numeric host and port. */
static int errno_of_gai(int rc)
{
    switch (rc) {
    case EAI_SYSTEM: return errno;
    case EAI_MEMORY: return ENOMEM;
    case EAI_FAMILY: return EAFNOSUPPORT;
    default:         return EINVAL;   /* EAI_NONAME: not a numeric host, EAI_SERVICE... */
    }
}

int px_tcp_listen(const char *host, const char *port, int backlog)
{
    if (port == NULL) {
        errno = EINVAL;
        return -1;
    }
    /* Numeric only: a name would be a DNS lookup, which blocks the thread. */
    struct addrinfo hints = {
        .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV,
        .ai_family = AF_UNSPEC,
        .ai_socktype = SOCK_STREAM,
    };
    struct addrinfo *res;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        errno = errno_of_gai(rc);
        return -1;
    }
    int fd = -1, err = EADDRNOTAVAIL;
    for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0
            || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, backlog) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        errno = err;
    return fd;
}
