/*
** waitq.h -- the one way the synchronization family waits: a FIFO of waiting
** fibers, the park at the end of an operation, the hand-off that precedes the
** wake, and the holds a fiber gives up when it ends.
**
** An operation that cannot complete at once does, as its last step:
**
**     px__waiter *w = px__waitq_begin(obj, op, pass_on);   (NULL: off-fiber)
**     return px__waitq_wait(&obj->waiters, w, &park_info);
**
** and the releasing side, having made the grant its own (the new owner
** recorded, the value stored), calls px__waitq_grant(w, result), which takes w off
** its queue and wakes the fiber.  An interrupted wait leaves its queue by
** itself; if a grant raced the interrupt, w->pass_on(w) hands it to the next
** waiter.  A hosted fiber that got PX_EYIELD calls the operation again once
** resumed, and the operation first asks px__waitq_resumed for the outcome.
*/
#ifndef PX_WAITQ_H
#define PX_WAITQ_H

#include "fiber/fiber.h"

struct px__waitq {
    px__waiter *head, *tail;
    size_t len;
};

/* The calling fiber's waiter, made ready for a wait on `obj`; NULL off-fiber. */
px__waiter *px__waitq_begin(const void *obj, int op, void (*pass_on)(px__waiter *w));

/*
** Appends w to q and parks with `info` (its dereg and ctx are replaced).
** Returns w->result once granted; PX_ETIMEDOUT / PX_ECANCELED when a scope
** interrupted the wait (w is off q, a raced grant passed on); PX_EYIELD in a
** hosted fiber that must yield.
*/
int px__waitq_wait(px__waitq *q, px__waiter *w, const px_park_info *info);

/*
** For an operation called again by a hosted fiber after PX_EYIELD: 1 and the
** outcome in *out when the calling fiber has a wait on `obj` to collect, else 0.
*/
int px__waitq_resumed(const void *obj, int *out);

/* Hands the wait of w over with `result` (w leaves its queue), then wakes it. */
void px__waitq_grant(px__waiter *w, int result);

/*
** Interrupted waiters, and what a releasing side does about them (the one
** policy of the whole family).  A scope that interrupts a park makes the fiber
** ready with the interrupt's code as the park's outcome, and the waiter stays
** on its queue until the fiber runs and its dereg takes it off.  That outcome
** is what px__waitq_interrupted(w) reads -- not the fiber's state: a fiber
** that a stray px_wake made ready is ready too, but its outcome is 0, it is
** still queued and it parks again unless granted, so it still waits.
**
** A release hands over only to waiters that still wait.  px__waitq_first(q)
** takes the interrupted waiters at the head of q off it (they have withdrawn;
** their dereg finds them off q) and returns the first waiter that still
** waits, or NULL; px__waitq_waiting(q) takes every interrupted waiter off q
** and returns how many are left (for a primitive that counts its waiters).
** So a grant never goes to a fiber on its way out, except when the grant's
** wake must go through the scheduler's inbox (a release made while it does
** not run): an interrupt can then come first, and w->pass_on hands it on.
*/
int px__waitq_interrupted(const px__waiter *w);
px__waiter *px__waitq_first(px__waitq *q);
size_t px__waitq_waiting(px__waitq *q);
void px__waitq_remove(px__waitq *q, px__waiter *w);

/* The fiber a waiter belongs to. */
px_fiber *px__waitq_fiber(px__waiter *w);

/*
** Holds.  px__waitq_hold_take records that fiber f (the caller's, or a waiter's
** through px__waitq_fiber) now holds h; px__waitq_hold_drop that it no longer does.
** Both are inline, for every uncontended lock's path; take is O(1) and so is
** drop in LIFO order (else it walks the owner's holds).  A hold not held has
** h->owner NULL (its link is then stale, never read; a mutex puts a mark of
** its own there once the hold is dropped, see mutex.c).  px__waitq_hold_link is take
** for a hold whose ended() is set once and for all (a mutex's, from its new).
*/
static inline void px__waitq_hold_link(px__hold *h, px_fiber *f)
{
    h->owner = f;
    h->next = f->holds;
    f->holds = h;
}

static inline void px__waitq_hold_take(px__hold *h, px_fiber *f,
                                 void (*ended)(px__hold *h, uint64_t id, int discarding))
{
    h->ended = ended;
    px__waitq_hold_link(h, f);
}

/* Locks are mostly released in the reverse order of taking, so the hold is
** almost always first in its owner's list. */
static inline void px__waitq_hold_drop(px__hold *h)
{
    px_fiber *f = h->owner;
    if (f == NULL)
        return;
    px__hold **p = &f->holds;
    while (*p != h)
        p = &(*p)->next;
    *p = h->next;
    h->owner = NULL;
}

#endif /* PX_WAITQ_H */
