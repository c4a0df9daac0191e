/*
** barrier.c -- `parties` fibers meeting at a phase boundary (see
** parataxis.h).
**
** The fibers that arrived in the current phase are exactly the fibers on
** the queue, so the queue is the count: an interrupted arrival withdraws by
** leaving it, which waitq does for us.  The arrival that makes `parties`
** does not park: it empties the queue granting every waiter, bumps the
** phase and returns 1.  The queue is empty again before any of the released
** fibers runs, so the next phase's arrivals can never be counted in this one.
**
** A waiter whose park a scope interrupted stays on the queue until its fiber
** runs; the would-be last arrival first counts only the arrivals that still
** wait (px__waitq_waiting takes the interrupted ones off: they withdrew), so
** it never opens a phase with an arrival that is leaving, and an arrival
** that a stray px_wake made ready still counts.  That also means no grant
** can race an interrupt: the leader is a fiber of the running scheduler,
** whose wakes take effect at once.  So no pass_on.
*/
#include <errno.h>
#include <stdlib.h>

#include "sync/sync.h"

enum barrier_op { BARRIER_ARRIVE };

struct px_barrier {
    size_t parties;          /* arrivals that complete a phase; >= 1 */
    uint64_t phase;          /* phases completed */
    px__waitq waiters;        /* arrivals of the current phase, parked */
};

px_barrier *px_barrier_new(size_t parties)
{
    if (parties == 0) {
        errno = EINVAL;
        return NULL;
    }
    px_barrier *b = PX__SYNC_NEW(px_barrier, waiters);
    if (b)
        b->parties = parties;
    return b;
}

/* The last arrival: re-arm first (an empty queue, the next phase), then
** release the others. */
static int lead(px_barrier *b)
{
    b->phase++;
    if (b->waiters.len != 0)
        px__sync_grant_all(&b->waiters, 0);
    return 1;
}

int px_barrier_arrive_and_wait(px_barrier *b)
{
    px_fiber *f;
    int r;
    if (px__sync_enter(b, BARRIER_ARRIVE, &f, &r))   /* NULL, off-fiber, a hosted re-call */
        return r;
    if (b->waiters.len + 1 >= b->parties) {
        if (px__waitq_elsewhere(&b->waiters))
            return PX_ETHREAD;                   /* would lead them (joining: px__waitq_wait) */
        if (px__waitq_waiting(&b->waiters) + 1 >= b->parties)   /* O(parties), once a phase */
            return lead(b);
    }
    static const px_park_info pi = { .reason = "Barrier arrive", .kind = "barrier" };
    return px__waitq_wait(&b->waiters, px__waitq_begin(f, b, BARRIER_ARRIVE, NULL), &pi);
}

uint64_t px_barrier_phase(const px_barrier *b)
{
    return b ? b->phase : 0;
}

size_t px_barrier_waiting(const px_barrier *b)
{
    return b ? b->waiters.len : 0;
}

int px_barrier_free(px_barrier *b)
{
    return px__sync_free(b, b && (b->waiters.len != 0));
}
