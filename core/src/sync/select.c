/*
** select.c -- px_select: the first ready of several cases (see parataxis.h).
**
** Two phases, as Go's select.  First every case is tried without waiting,
** in a random order: the first that can complete does, and the call is over
** -- a uniform order makes each ready case as likely as another to be that
** first.  Only when none can does the fiber wait on all of them at once, as
** a choice (fiber/waitq.h): a waiter per case on its primitive's queue (or
** armed in the epoll set, for an fd), granted by the primitive's releasing
** side as any waiter is.  The first grant decides the choice and the other
** cases withdraw, so exactly one case ever takes effect.
**
** The deadline cases are one scope, pushed for the earliest of them while
** the fiber waits: when it fires the wait ends, and the case is the one that
** fired.  A choice lives on the heap, not on the fiber's stack: other fibers
** reach its waiters while the fiber waits, and a shared stack would hold
** another fiber's bytes then.
*/
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>

#include "sync/select.h"

/* -- the order cases are tried in ------------------------------------------- */

/* A xorshift generator per thread: the order needs to be fair, not secret. */
static _Thread_local uint64_t seed;

static uint32_t below(uint32_t n)
{
    if (seed == 0)
        seed = ((uint64_t)px_now() ^ (uint64_t)(uintptr_t)&seed) | 1;
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return (uint32_t)(((seed >> 32) * n) >> 32);
}

/* -- checking the cases ----------------------------------------------------- */

/* 0 when every case is well formed, with the DEFAULT's index in *dflt (-1:
** none) and the earliest DEADLINE's in *first_deadline (-1: none); else
** PX_EINVAL. */
static int check(const px_select_case *cases, size_t n, int *dflt, int *first_deadline)
{
    *dflt = *first_deadline = -1;
    if (n > INT32_MAX)
        return PX_EINVAL;
    for (size_t i = 0; i < n; i++) {
        const px_select_case *k = &cases[i];
        switch (k->kind) {
        case PX_SELECT_SEND: case PX_SELECT_RECV: case PX_SELECT_EVENT: case PX_SELECT_SEM:
            break;
        case PX_SELECT_FD:
            if (k->fd < 0 || k->events == 0 || (k->events & ~(PX_READABLE | PX_WRITABLE)))
                return PX_EINVAL;
            break;
        case PX_SELECT_DEADLINE:
            if (*first_deadline < 0 || k->deadline < cases[*first_deadline].deadline)
                *first_deadline = (int)i;
            break;
        case PX_SELECT_DEFAULT:
            if (*dflt >= 0)
                return PX_EINVAL;
            *dflt = (int)i;
            break;
        default:
            return PX_EINVAL;
        }
    }
    return 0;
}

/* -- the first phase: without waiting --------------------------------------- */

/* fd is ready for `events` now: 1, 0, or PX_EINVAL for a closed fd. */
static int fd_ready(int fd, unsigned events)
{
    struct pollfd p = {
        .fd = fd,
        .events = (short)(((events & PX_READABLE) ? POLLIN : 0) |
                          ((events & PX_WRITABLE) ? POLLOUT : 0)),
    };
    if (poll(&p, 1, 0) <= 0)
        return 0;
    return (p.revents & POLLNVAL) ? PX_EINVAL : 1;
}

/* A try form's answer as a case's: 1 done (*result 0 or PX_ECLOSED), 0 it
** would wait, else its error. */
static int tried(int r, int *result)
{
    if (r == 0 || r == PX_ECLOSED) {
        *result = r;
        return 1;
    }
    return r == PX_EBUSY ? 0 : r;
}

/* Tries case k without waiting: 1 when it took effect (k->result set), 0
** when it would wait, else the error that ends the call. */
static int try_case(px_select_case *k)
{
    if (k->obj == NULL && k->kind <= PX_SELECT_SEM)
        return 0;                                /* switched off: never fires */
    switch (k->kind) {
    case PX_SELECT_SEND:  return tried(px_chan_trysend(k->obj, k->value), &k->result);
    case PX_SELECT_RECV:  return tried(px_chan_tryrecv(k->obj, &k->value), &k->result);
    case PX_SELECT_SEM:   return tried(px_sem_tryacquire(k->obj), &k->result);
    case PX_SELECT_EVENT: k->result = 0; return px_event_is_set(k->obj);
    case PX_SELECT_FD:    k->result = 0; return fd_ready(k->fd, k->events);
    case PX_SELECT_DEADLINE: k->result = 0; return px_now() >= k->deadline;
    default:              return 0;              /* DEFAULT: the last resort */
    }
}

/* Tries the cases in a random order; the index of the one that took effect,
** -1 when none could, or an error.  The order is drawn as it is used (a
** Fisher-Yates shuffle), in `slots` or, past them, on the heap. */
static int try_all(px_select_case *cases, size_t n)
{
    uint32_t slots[16], *order = slots;
    if (n > sizeof slots / sizeof slots[0] && (order = malloc(n * sizeof *order)) == NULL)
        return PX_ENOMEM;
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    int r = -1;
    for (size_t i = 0; i < n && r == -1; i++) {
        size_t j = i + below((uint32_t)(n - i));
        uint32_t k = order[j];
        order[j] = order[i];
        int got = try_case(&cases[k]);
        r = got == 1 ? (int)k : got == 0 ? -1 : got;
    }
    if (order != slots)
        free(order);
    return r;
}

/* -- the second phase: waiting on every case -------------------------------- */

/* Queues case i on its object (or arms its fd): 0 or an error. */
static int queue_case(px__choice *c, size_t i, const px_select_case *k)
{
    switch (k->kind) {
    case PX_SELECT_SEND:
    case PX_SELECT_RECV:  return px__chan_case(k->obj, k->kind == PX_SELECT_SEND, k->value, c, i);
    case PX_SELECT_EVENT: return px__event_case(k->obj, c, i);
    case PX_SELECT_SEM:   return px__sem_case(k->obj, c, i);
    case PX_SELECT_FD:    return px__waitq_case_fd(c, i, k->fd, k->events);
    default:              return 0;              /* DEADLINE: the scope */
    }
}

static int queue_all(px__choice *c, const px_select_case *cases, size_t n, int *fds)
{
    *fds = 0;
    for (size_t i = 0; i < n; i++) {
        if (cases[i].obj == NULL && cases[i].kind <= PX_SELECT_SEM)
            continue;
        int r = queue_case(c, i, &cases[i]);
        if (r != 0)
            return r;
        *fds |= cases[i].kind == PX_SELECT_FD;
    }
    return 0;
}

/* What the wait of c ended with, as px_select returns it; frees c and closes
** the deadline's scope. */
static int finish(px_select_case *cases, px__choice *c, int r, int first_deadline)
{
    int fired = first_deadline >= 0 ? px_scope_pop() : 0;
    if (r < 0 && c->winner >= 0 && cases[c->winner].kind == PX_SELECT_SEND &&
        c->cases[c->winner].result == 0)
        r = c->winner;                 /* the value is out: the send took effect */
    else if (r == PX_ETIMEDOUT && fired == PX_ETIMEDOUT)
        r = first_deadline;            /* our own scope: the deadline case */
    if (r >= 0) {
        px_select_case *k = &cases[r];
        const px__waiter *w = &c->cases[r];
        k->result = k->kind == PX_SELECT_DEADLINE ? 0 : w->result;
        if (k->kind == PX_SELECT_RECV && w->result == 0)
            k->value = w->value;
    }
    px__waitq_choice_end(c);
    return r;
}

static int wait_all(px_fiber *f, px_select_case *cases, size_t n, int first_deadline)
{
    px__choice *c = px__waitq_choice_new(f, cases, n);
    if (c == NULL)
        return PX_ENOMEM;
    int fds, r = 0;
    if (first_deadline >= 0 && (r = px_scope_push_deadline(cases[first_deadline].deadline)) != 0) {
        px__waitq_choice_end(c);
        return r;
    }
    if ((r = queue_all(c, cases, n, &fds)) != 0)
        return finish(cases, c, r, first_deadline);
    static const px_park_info quiet = { .reason = "select", .kind = "select" };
    static const px_park_info outside = { .reason = "select", .kind = "select",
                                          .flags = PX_PARK_OUTSIDE };
    r = px__waitq_choose(c, fds ? &outside : &quiet);
    return r == PX_EYIELD ? r : finish(cases, c, r, first_deadline);
}

int px_select(px_select_case *cases, size_t n)
{
    int dflt, first_deadline, r;
    if ((cases == NULL && n > 0) || check(cases, n, &dflt, &first_deadline) != 0)
        return PX_EINVAL;
    px_fiber *f = px__waitq_self();
    if (f != NULL) {
        px__choice *c = px__waitq_choice_recall(f, cases);
        if (c != NULL) {                         /* a hosted fiber, back for it */
            r = px__waitq_choice_collect(c);
            return r == PX_EYIELD ? r : finish(cases, c, r, first_deadline);
        }
    } else if (dflt < 0) {
        return PX_ENOFIBER;
    }
    if ((r = try_all(cases, n)) != -1)
        return r;
    if (dflt >= 0) {
        cases[dflt].result = 0;
        return dflt;
    }
    return wait_all(f, cases, n, first_deadline);
}
