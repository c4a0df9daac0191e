/*
** waitgroup.c -- a counter of outstanding jobs (see parataxis.h).
**
** The state is a count and a queue.  add and done are arithmetic and need
** no fiber, so a job can be counted before the fiber that does it exists;
** the step that brings the count to zero wakes every waiter.  The grant is
** the same for every waiter and takes nothing, so an interrupted waiter has
** nothing to pass on (it simply leaves the queue) and a waiter woken at
** zero returns 0 even if the count rose again before it ran: it saw zero.
*/
#include <stdlib.h>

#include "sync/sync.h"

enum waitgroup_op { WAITGROUP_WAIT };

struct px_waitgroup {
    int64_t count;           /* jobs outstanding; never negative */
    px__waitq waiters;        /* fibers parked in px_waitgroup_wait, FIFO */
};

px_waitgroup *px_waitgroup_new(void)
{
    return PX__SYNC_NEW(px_waitgroup, waiters);
}

/* Out of line, so the plain arithmetic needs no stack frame. */
static int PX__NOINLINE reach_zero(px_waitgroup *wg)
{
    if (px__waitq_elsewhere(&wg->waiters))
        return PX_ETHREAD;                     /* zero would end their wait */
    wg->count = 0;
    if (wg->waiters.len != 0)
        px__sync_grant_all(&wg->waiters, 0);   /* every waiter leaves with 0 */
    return 0;
}

int px_waitgroup_add(px_waitgroup *wg, int64_t n)
{
    if (wg == NULL)
        return PX_EINVAL;
    /* Refuse before touching the count: below zero, or past INT64_MAX. */
    if (n < 0 ? wg->count + n < 0 : wg->count > INT64_MAX - n)
        return PX_EINVAL;
    int64_t count = wg->count + n;
    if (count == 0)
        return reach_zero(wg);
    wg->count = count;
    return 0;
}

int px_waitgroup_done(px_waitgroup *wg)
{
    return px_waitgroup_add(wg, -1);
}

int px_waitgroup_wait(px_waitgroup *wg)
{
    px_fiber *f;
    int r;
    if (px__sync_enter(wg, WAITGROUP_WAIT, &f, &r))   /* NULL, off-fiber, a hosted re-call */
        return r;
    if (wg->count == 0)
        return 0;
    static const px_park_info pi = { .reason = "WaitGroup wait", .kind = "waitgroup" };
    return px__waitq_wait(&wg->waiters, px__waitq_begin(f, wg, WAITGROUP_WAIT, NULL), &pi);
}

int64_t px_waitgroup_count(const px_waitgroup *wg)
{
    return wg ? wg->count : 0;
}

int px_waitgroup_free(px_waitgroup *wg)
{
    return px__sync_free(wg, wg && (wg->waiters.len != 0));
}
