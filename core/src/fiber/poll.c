/*
** poll.c -- fibers that wait on file descriptors: px_wait_fd and
** px_fd_notify_closing, over one epoll set per scheduler.
**
** Readiness, not completion: a fiber waits until its fd is ready, then makes
** the call itself while it runs, so a cancelled wait leaves nothing in flight.
** The epoll set is made at a scheduler's first fd wait, with the scheduler's
** eventfd in it; from then on the loop's idle wait is one epoll_pwait2 (sched.c
** calls px__poll_wait), and a run that never waits on an fd pays nothing.
**
** Every wait arms its fd once with EPOLLONESHOT (a MOD, or an ADD when the set
** does not know that fd): the set keeps nothing armed that nobody waits for,
** and an fd the program closed, dup'ed or reused behind our back is taken for
** a new one by the next ADD instead of being trusted.  One arming serves both
** directions of an fd; each gets a fresh tag in its event data, so an event of
** an arming since replaced (or of a file since closed) is recognised and
** dropped.  The table is indexed by fd: one reader and one writer per fd.
*/
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "base/compiler.h"
#include "fiber/fiber.h"
#include "fiber/waitq.h"

/* An fd wait is in a waiter, op PX__POLL_OP -- the fiber's own (px_wait_fd)
** or a case of its select (px__poll_case_arm): n is the fd and the events
** (PX__POLL_KEY), granted says an event or a notify_closing ended it, with its outcome
** in result. */
#define EFD_TAG UINT64_MAX   /* the event data of the scheduler's own eventfd */
#define EVENTS_MAX 128       /* taken in per epoll_wait */

void px__poll_init(px__poll *p)
{
    p->epfd = -1;
    atomic_init(&p->waiting, 0);
    p->next_tag = 0;
    pthread_mutex_init(&p->lock, NULL);
    p->fds = NULL;
    p->cap = 0;
}

void px__poll_destroy(px__poll *p)
{
    if (p->epfd >= 0)
        close(p->epfd);
    free(p->fds);
    pthread_mutex_destroy(&p->lock);
}

/* Makes s's epoll set with its eventfd in it; 0 or PX_ENOMEM. */
static int open_set(px_sched *s)
{
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0)
        return PX_ENOMEM;
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = EFD_TAG };
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, s->efd, &ev) != 0) {
        close(epfd);
        return PX_ENOMEM;
    }
    pthread_mutex_lock(&s->poll.lock);   /* notify_closing reads it anywhere */
    s->poll.epfd = epfd;
    pthread_mutex_unlock(&s->poll.lock);
    return 0;
}

/* The table's entry for fd, grown to hold it; NULL when out of memory, or
** with *bad set when fd is not open.  The table grows only for an open fd
** (below the process's descriptor limit): a closed fd of any number, INT_MAX
** say, must not ask for a table of that size first. */
static px__pollfd *entry(px__poll *p, int fd, int *bad)
{
    size_t need = (size_t)fd + 1;
    *bad = 0;
    if (need > p->cap) {
        if (fcntl(fd, F_GETFD) < 0) {
            *bad = 1;
            return NULL;
        }
        size_t cap = p->cap ? p->cap : 64;
        while (cap < need)
            cap *= 2;
        px__pollfd *fds = realloc(p->fds, cap * sizeof *fds);
        if (fds == NULL)
            return NULL;
        for (size_t i = p->cap; i < cap; i++)
            fds[i] = (px__pollfd){ NULL, NULL, 0 };
        p->fds = fds;
        p->cap = cap;
    }
    return &p->fds[fd];
}

/* The code of a failed epoll_ctl on a fiber's fd. */
static int ctl_error(int err)
{
    switch (err) {
    case EPERM:  return PX_ENOTSUP;   /* a regular file or a directory */
    case ENOMEM:
    case ENOSPC: return PX_ENOMEM;
    default:     return PX_EINVAL;    /* EBADF, or an epoll set itself (ELOOP, EINVAL) */
    }
}

/* Arms fd once for the directions its entry waits for, under a new tag; 0 or
** the code of the failure (the set is as before then). */
static int arm(px__poll *p, int fd, px__pollfd *e)
{
    uint32_t tag = ++p->next_tag;
    struct epoll_event ev = {
        .events = EPOLLONESHOT | (e->rd ? EPOLLIN : 0) | (e->wr ? EPOLLOUT : 0),
        .data.u64 = (uint64_t)tag << 32 | (uint32_t)fd,
    };
    if (epoll_ctl(p->epfd, EPOLL_CTL_MOD, fd, &ev) != 0 &&
        (errno != ENOENT || epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) != 0))
        return ctl_error(errno);
    e->tag = tag;
    return 0;
}

/* One direction of fd stopped waiting without an event: arms the fd again for
** the other one, or takes it out of the set when nobody waits on it. */
static void rearm(px__poll *p, int fd, px__pollfd *e)
{
    if (e->rd || e->wr) {
        if (arm(p, fd, e) == 0)
            return;
        /* Cannot happen for an fd armed a moment ago, unless it was closed:
        ** then its waiter learns nothing more from this set; its scope ends it. */
    }
    e->tag = 0;
    epoll_ctl(p->epfd, EPOLL_CTL_DEL, fd, NULL);   /* ENOENT, EBADF: gone already */
}

/* Ends fd wait w with `result`; under the lock.  Its fiber is parked in that
** wait, or runs (a stray wake: it looks again), or is a hosted fiber that has
** not come back for its outcome yet. */
static void grant(px_sched *s, px__waiter *w, int result)
{
    w->granted = 1;
    w->result = result;
    atomic_fetch_sub_explicit(&s->poll.waiting, 1, memory_order_relaxed);
}

static void fd_dereg(void *ctx);

/* Makes the fiber of w ready if the park it is in is w's: its fd wait, or
** the select w is a case of (a hosted fiber that did not come back for a
** stray wake may park on something else). */
static void wake_granted(px_sched *s, px__waiter *w)
{
    px_fiber *f = px__waitq_fiber(w);
    if (f->state == PX__FIBER_PARKED &&
        (w->choice ? f->park.ctx == w->choice : f->park.dereg == fd_dereg))
        px__fiber_unpark(s, f, 0);
}

/* The events of one fd came: wakes the directions they serve. */
static void take_event(px_sched *s, const struct epoll_event *ev)
{
    px__poll *p = &s->poll;
    int fd = (int)(uint32_t)ev->data.u64;
    if ((size_t)fd >= p->cap)
        return;
    px__pollfd *e = &p->fds[fd];
    if (e->tag != (uint32_t)(ev->data.u64 >> 32))
        return;   /* stale: armed again since, or its waits ended */
    /* ERR and HUP end both directions: "ready" means "try the call". */
    uint32_t got = ev->events;
    px__waiter *rd = NULL, *wr = NULL;
    if (e->rd && (got & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLERR | EPOLLHUP))) {
        rd = e->rd;
        e->rd = NULL;
        if (e->wr == rd)
            e->wr = NULL;   /* it waited for either: one grant */
        grant(s, rd, 0);
    }
    if (e->wr && (got & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        wr = e->wr;
        e->wr = NULL;
        if (e->rd == wr)
            e->rd = NULL;
        grant(s, wr, 0);
    }
    if (e->rd || e->wr)
        arm(p, fd, e);     /* the one-shot fired: the other direction waits on */
    else
        e->tag = 0;        /* disarmed; stays in the set for the next MOD */
    if (rd)
        wake_granted(s, rd);
    if (wr)
        wake_granted(s, wr);
}

/* Takes in n events; `drain`: the kernel wait's, which empties the eventfd.
** The busy loop's look leaves it readable: a px_sched_wake made while fibers
** run is owed to the next kernel wait, which must then return at once. */
static void take_events(px_sched *s, const struct epoll_event *evs, int n, int drain)
{
    if (n <= 0)
        return;
    pthread_mutex_lock(&s->poll.lock);
    for (int i = 0; i < n; i++) {
        if (evs[i].data.u64 == EFD_TAG) {
            if (!drain)
                continue;
            uint64_t v;
            ssize_t got = read(s->efd, &v, sizeof v);
            (void)got;   /* EAGAIN: another look emptied it */
        } else {
            take_event(s, &evs[i]);
        }
    }
    pthread_mutex_unlock(&s->poll.lock);
}

static void look(px_sched *s, int drain)
{
    struct epoll_event evs[EVENTS_MAX];
    take_events(s, evs, epoll_wait(s->poll.epfd, evs, EVENTS_MAX, 0), drain);
}

void px__poll_now(px_sched *s)
{
    look(s, 0);
}

/* epoll_pwait2 (Linux 5.11, glibc 2.35) takes a timespec; epoll_wait rounds
** its timeout up to milliseconds, which would make every short sleep late.
** Without it, a ppoll on the epoll set itself (readable while an event is
** ready) waits, and a zero-timeout epoll_wait takes the events. */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define HAVE_PWAIT2 1
#endif

int px__poll_wait(px_sched *s, const struct timespec *ts)
{
    struct epoll_event evs[EVENTS_MAX];
    int n;
#ifdef HAVE_PWAIT2
    /* The kernel (or a seccomp filter) refused it: any scheduler's thread may
    ** find out first, so the flag is atomic. */
    static atomic_int no_pwait2;
    if (PX__LIKELY(!atomic_load_explicit(&no_pwait2, memory_order_relaxed))) {
        n = epoll_pwait2(s->poll.epfd, evs, EVENTS_MAX, ts, NULL);
        if (n >= 0 || errno != ENOSYS) {
            take_events(s, evs, n, 1);
            return n < 0 ? -1 : 0;
        }
        atomic_store_explicit(&no_pwait2, 1, memory_order_relaxed);
    }
#endif
    struct pollfd pfd = { .fd = s->poll.epfd, .events = POLLIN };
    n = ppoll(&pfd, 1, ts, NULL);
    if (n < 0)
        return -1;
    if (n > 0)
        look(s, 1);
    return 0;
}

/* -- a fiber's wait -------------------------------------------------------- */

/* Takes wait w, not granted, out of the table and disarms its fd for its
** direction; under the lock.  Nothing when w is not in the table (a hosted
** fiber's wait that an arming refused, or one dropped already). */
static void withdraw(px__poll *p, px__waiter *w)
{
    int fd = (int)(uint32_t)w->n;
    if (w->granted || (size_t)fd >= p->cap)
        return;
    px__pollfd *e = &p->fds[fd];
    if (e->rd != w && e->wr != w)
        return;
    if (e->rd == w)
        e->rd = NULL;
    if (e->wr == w)
        e->wr = NULL;
    atomic_fetch_sub_explicit(&p->waiting, 1, memory_order_relaxed);
    rearm(p, fd, e);
}

/* f's fd wait is over without an event (a scope ended it, or its fiber ended
** mid-park).  Run by the park (its dereg), on the scheduler's thread. */
static void fd_dereg(void *ctx)
{
    px_fiber *f = ctx;
    px__poll *p = &f->s->poll;
    pthread_mutex_lock(&p->lock);
    withdraw(p, &f->wait);
    pthread_mutex_unlock(&p->lock);
}

static const char *reason_of(unsigned events)
{
    return events == PX_READABLE ? "fd readable"
         : events == PX_WRITABLE ? "fd writable" : "fd readable or writable";
}

/* Records wait w on fd under the lock; 0 or the code that refuses it. */
static int record(px_sched *s, px__waiter *w, int fd, unsigned events)
{
    px__poll *p = &s->poll;
    if (fd == s->efd || fd == p->epfd)
        return PX_EINVAL;   /* the scheduler's own */
    int bad;
    px__pollfd *e = entry(p, fd, &bad);
    if (e == NULL)
        return bad ? PX_EINVAL : PX_ENOMEM;
    if (((events & PX_READABLE) && e->rd) || ((events & PX_WRITABLE) && e->wr))
        return PX_EBUSY;
    px__pollfd was = *e;
    if (events & PX_READABLE)
        e->rd = w;
    if (events & PX_WRITABLE)
        e->wr = w;
    int r = arm(p, fd, e);
    if (r != 0) {
        *e = was;
        return r;
    }
    w->op = PX__POLL_OP;
    w->n = PX__POLL_KEY(fd, events);
    w->granted = 0;
    w->result = 0;
    atomic_fetch_add_explicit(&p->waiting, 1, memory_order_relaxed);
    return 0;
}

/* Drops a wait a hosted fiber recorded and never came back for. */
static void forget(px_sched *s, px_fiber *f)
{
    withdraw(&s->poll, &f->wait);
    f->wait.op = 0;
}

/* The outcome of f's recorded wait, under the lock: 1 with *r when it is over,
** 0 when it still waits (woken by a stray px_wake: park again). */
static int outcome(px_sched *s, px_fiber *f, int *r)
{
    if (f->wait.granted) {
        *r = f->wait.result;
    } else {
        px__pollfd *e = &s->poll.fds[(uint32_t)f->wait.n];
        if (e->rd == &f->wait || e->wr == &f->wait)
            return 0;
        *r = f->park_result;   /* a scope ended it: its dereg ran */
    }
    f->wait.op = 0;
    return 1;
}

int px_wait_fd(int fd, unsigned events)
{
    px_fiber *f = px__fiber_here();
    if (f == NULL)
        return PX_ENOFIBER;
    if (fd < 0 || events == 0 || (events & ~(PX_READABLE | PX_WRITABLE)) != 0)
        return PX_EINVAL;
    px_sched *s = f->s;
    if (s->poll.epfd < 0 && open_set(s) != 0)
        return PX_ENOMEM;
    int r;
    /* A hosted fiber's uncollected primitive wait: given up, outside the
    ** poll lock (passing on a grant may wake or post). */
    if (!PX__LIKELY(!f->hosted))
        px__waitq_abandon(f);
    pthread_mutex_lock(&s->poll.lock);
    if (f->wait.op == PX__POLL_OP && f->wait.n == PX__POLL_KEY(fd, events)) {
        /* A hosted fiber back for what its PX_EYIELD left recorded. */
        int done = outcome(s, f, &r);
        pthread_mutex_unlock(&s->poll.lock);
        if (done)
            return r;
    } else {
        if (f->wait.op == PX__POLL_OP)
            forget(s, f);
        r = record(s, &f->wait, fd, events);
        pthread_mutex_unlock(&s->poll.lock);
        if (r != 0)
            return r;
    }
    for (;;) {
        f->park = (px_park_info){
            .reason = reason_of(events), .dereg = fd_dereg, .ctx = f,
            .kind = "fd", .flags = PX_PARK_OUTSIDE,
        };
        r = px__fiber_park(f);
        if (r == PX_EYIELD)
            return r;   /* recorded: the host calls again once resumed */
        pthread_mutex_lock(&s->poll.lock);
        int done = outcome(s, f, &r);
        pthread_mutex_unlock(&s->poll.lock);
        if (done)
            return r;
    }
}

/* -- notify_closing -------------------------------------------------------- */

/* Ends the waits on fd of s's fibers with PX_ECLOSED, takes fd out of s's set
** and wakes them (a post when s runs on another thread).  Under the registry's
** lock: s stays alive; the ids are read under s's poll lock, while the fibers
** are surely still there. */
static void close_waits(px_sched *s, void *ctx)
{
    int fd = *(const int *)ctx;
    px__poll *p = &s->poll;
    uint64_t ids[2];
    int n = 0;
    if (px__sched_forked(s))
        return;   /* a parent's: its set is the parent's too */
    pthread_mutex_lock(&p->lock);
    if (p->epfd >= 0 && (size_t)fd < p->cap) {
        px__pollfd *e = &p->fds[fd];
        if (e->rd) {
            grant(s, e->rd, PX_ECLOSED);
            ids[n++] = px__waitq_fiber(e->rd)->id;
        }
        if (e->wr && e->wr != e->rd) {
            grant(s, e->wr, PX_ECLOSED);
            ids[n++] = px__waitq_fiber(e->wr)->id;
        }
        e->rd = e->wr = NULL;
        e->tag = 0;
        epoll_ctl(p->epfd, EPOLL_CTL_DEL, fd, NULL);
    }
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < n; i++) {
        if (s == px__sched_here())
            px__fiber_wake(s, ids[i]);
        else
            px__sched_inbox_post(s, &(px__item){ .kind = PX__FIBER_ITEM_WAKE, .id = ids[i] });
    }
}

int px_fd_notify_closing(int fd)
{
    if (fd < 0)
        return PX_EINVAL;
    px__sched_each(close_waits, &fd);
    return 0;
}

void px__poll_fiber_ended(px_fiber *f)
{
    pthread_mutex_lock(&f->s->poll.lock);
    forget(f->s, f);
    pthread_mutex_unlock(&f->s->poll.lock);
}

/* -- a select's fd cases ---------------------------------------------------- */

int px__poll_case_arm(px_fiber *f, px__waiter *w, int fd, unsigned events)
{
    px_sched *s = f->s;
    if (fd < 0 || events == 0 || (events & ~(PX_READABLE | PX_WRITABLE)) != 0)
        return PX_EINVAL;
    if (s->poll.epfd < 0 && open_set(s) != 0)
        return PX_ENOMEM;
    pthread_mutex_lock(&s->poll.lock);
    int r = record(s, w, fd, events);
    pthread_mutex_unlock(&s->poll.lock);
    return r;
}

int px__poll_case_granted(px_fiber *f, px__waiter *w)
{
    pthread_mutex_lock(&f->s->poll.lock);
    int granted = w->granted;
    pthread_mutex_unlock(&f->s->poll.lock);
    return granted;
}

void px__poll_case_end(px_fiber *f, px__waiter *w)
{
    pthread_mutex_lock(&f->s->poll.lock);
    withdraw(&f->s->poll, w);
    w->op = 0;
    pthread_mutex_unlock(&f->s->poll.lock);
}
