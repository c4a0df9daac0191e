/*
** waitq.h -- the one way the synchronization family waits, and the guide to
** writing a primitive.  A primitive (a file of sync/) includes sync/sync.h,
** which is built on this header, and base/: no other header of the fiber
** engine.  This header brings fiber/fiber.h with it: the waiter and hold
** records are defined there, and the inline fast paths here (step 1, the
** holds) read the fiber's record.  A primitive still never reads a fiber's
** or a scheduler's fields: what it needs of them is here, as px__waitq_ calls.
**
** A primitive is an object with a queue (px__waitq) per kind of waiter, an
** op code per operation (a named enum of its own: `enum sem_op { SEM_ACQUIRE }`)
** and, if fibers can hold it, a hold (px__hold) per holder.  An operation that
** may park has four steps, always in this order:
**
**     px_fiber *f;
**     int r;
**     if (px__sync_enter(obj, OP, &f, &r))       1. check obj, resolve the
**         return r;                                 fiber, collect a hosted
**                                                   re-call
**     if (<it can complete at once>)             2. complete at once
**         return <what it returns>;
**     static const px_park_info pi = { .reason = "...", .kind = "...",
**                                      .holders = holders_fn };
**     return px__waitq_wait(&obj->waiters,       3. queue and park, last
**                           px__waitq_begin(f, obj, OP, pass_on), &pi);
**
** and the releasing side (4) picks the waiter that gets what is released with
** px__waitq_first (or px__waitq_waiting, to count), makes the grant its own
** (the hold moved to px__waitq_fiber(w), the value in w->value) and only then
** calls px__waitq_grant(w, result), which takes w off its queue and wakes it
** (px__sync_grant_all, for a grant every waiter gets alike).  Nothing in a
** step 2 or 3 may come before step 1.
**
** px__sync_enter (sync/sync.h) is step 1 after the check every operation
** makes first, PX_EINVAL for a NULL obj; step 1 itself is px__waitq_enter,
** which an operation with more arguments to check calls after its own checks
** (px_chan_recv).  An operation that never parks starts with px__sync_caller.
**
** Step 1 answers for the operation when it is over before it starts: with
** PX_ENOFIBER off-fiber, and for a hosted fiber (a greenlet, a coroutine) that
** got PX_EYIELD from this same operation on this same object: it returns
** without waiting and calls the operation again once resumed, and step 1 then
** gives it the wait's outcome (parking on if the wait is not over).  The
** waiter is the calling fiber's own (px__waitq_own), so what a primitive left
** in it (w->value, w->n) is still there at the re-call.
**
** Step 3 returns w->result once granted, PX_ETIMEDOUT / PX_ECANCELED when a
** scope interrupted the wait (w is then off its queue by itself), PX_ETHREAD
** (not queued) when fibers of another scheduler wait on the queue (see "One
** scheduler at a time"), or PX_EYIELD in a hosted fiber.  An operation with
** work to do after the wait (give back what it reserved, take its value) does
** it on both the return of px__waitq_wait and the collected re-call.
**
** A grant can race an interrupt (see "Interrupted waiters" below); then the
** interrupted fiber calls pass_on(w) to hand what it was granted on, with
** w->result as it was granted.  A grant that takes nothing (every waiter gets
** the same: an event, a waitgroup) needs no pass_on: NULL.
**
** A primitive that fibers hold records the holder in a px__hold (the one
** holder record: see "Holds").  A fiber that ends holding it gets ended()
** called for it, after the hold is dropped.
*/
#ifndef PX__FIBER_WAITQ_H
#define PX__FIBER_WAITQ_H

#include "base/compiler.h"
#include "base/list.h"
#include "fiber/fiber.h"

/* A FIFO of waiters around a sentinel (base/list.h): a primitive makes each
** of its queues with px__waitq_init before first use (a zeroed one is not
** empty), and never copies one, since its waiters point at its sentinel. */
struct px__waitq {
    px__list list;            /* the waiters, through px__waiter.link, oldest first */
    size_t len;
};

/* A select's wait: a waiter per case (see "Choices" below). */
struct px__choice {
    px_fiber *f;              /* the fiber that chooses */
    int winner;               /* the case a queue granted; -1 until one did */
    size_t n;
    px__waiter cases[];       /* one per case, in the caller's order */
};

static inline void px__waitq_init(px__waitq *q)
{
    px__list_init(&q->list);
    q->len = 0;
}

/* -- the wait ---------------------------------------------------------------- */

/* The outcome of the hosted re-call of step 1 (out of line: it may park). */
int px__waitq_collect(px_fiber *f);

/*
** Step 1: the calling fiber in *self; 1 when the operation ends here, with
** what it returns in *out (PX_ENOFIBER off-fiber; the outcome of the wait of
** a hosted fiber that calls operation `op` on `obj` again after PX_EYIELD),
** else 0.  Inline: an uncontended lock is this and a few instructions more.
*/
static inline int px__waitq_enter(const void *obj, int op, px_fiber **self, int *out)
{
    px_fiber *f = px__fiber_here();
    *self = f;
    if (f == NULL) {
        *out = PX_ENOFIBER;
        return 1;
    }
    if (PX__LIKELY(!f->hosted) || f->wait.obj != obj || f->wait.op != op)
        return 0;
    *out = px__waitq_collect(f);
    return 1;
}

/* The calling fiber, NULL off-fiber (for an operation that never parks). */
static inline px_fiber *px__waitq_self(void)
{
    return px__fiber_here();
}

/* The waiter of fiber f (what step 3 queued; what a re-call collects). */
static inline px__waiter *px__waitq_own(px_fiber *f)
{
    return &f->wait;
}

/* A hosted fiber that got PX_EYIELD from a primitive's operation begins
** another kind of wait (px_wait_fd) instead of calling again: its queued
** wait is given up as a scope would end it (off the queue, a grant that came
** passed on), so that no hand-over lands in the new wait's record. */
void px__waitq_abandon(px_fiber *f);

/* The fiber a waiter belongs to. */
px_fiber *px__waitq_fiber(px__waiter *w);

/* Step 3: the waiter of f (the caller), made ready for a wait for op on obj. */
px__waiter *px__waitq_begin(px_fiber *f, const void *obj, int op,
                            void (*pass_on)(px__waiter *w));

/*
** Step 3: appends w to q and parks with `info` (its object, dereg and ctx are
** replaced: the object is w's).  `info` is best a static const: it is copied
** into the fiber's record, and an info in the caller's frame would stay under
** the parked fiber (memory on a shared stack, px_sched_opts.shared_stacks).
** Returns w->result once granted; PX_ETIMEDOUT / PX_ECANCELED when a scope
** interrupted the wait (w is off q, a raced grant passed on); PX_ETHREAD,
** without queueing, when fibers of another scheduler wait on q; PX_EYIELD in
** a hosted fiber that must yield.
*/
int px__waitq_wait(px__waitq *q, px__waiter *w, const px_park_info *info);

/* Step 4: hands the wait of w over with `result` (w leaves its queue), then
** wakes it. */
void px__waitq_grant(px__waiter *w, int result);

/*
** One scheduler at a time.  An object is not thread-safe, and its waiters
** and holders are fibers of one scheduler: a grant writes into the waiter's
** record and wakes it on its scheduler's thread.  So while fibers of one
** scheduler wait on an object or hold it, a call from anywhere else (a fiber
** or an off-fiber call of another run, or a thread that runs none and is not
** that scheduler's) that would park on it, take a hold beside them or hand
** something over to them returns PX_ETHREAD and changes nothing.  A call
** that would do none of these (a try form that fails anyway, an unlock by a
** non-holder) answers as it would: the uncontended paths pay nothing.
**
** px__waitq_foreign(a, b): fibers a and b belong to different schedulers (a
** holder and the caller).  px__waitq_elsewhere(q): q has waiters and the
** caller is not of their scheduler's run (px__waitq_wait asks it before it
** queues; a releasing side before it hands over).
*/
static inline int px__waitq_foreign(const px_fiber *a, const px_fiber *b)
{
    return a->s != b->s;
}

int px__waitq_elsewhere_slow(const px__waitq *q);

/* Inline up to the common answer, a fiber of the waiters' own run: a channel
** hand-off asks it at every value. */
static inline int px__waitq_elsewhere(const px__waitq *q)
{
    if (PX__LIKELY(q->len == 0))
        return 0;
    const px__waiter *w = PX__CONTAINER_OF(q->list.next, px__waiter, link);
    const px_fiber *f = w->choice ? w->choice->f : PX__CONTAINER_OF(w, px_fiber, wait);
    return !PX__LIKELY(px__sched_here() == f->s) && px__waitq_elsewhere_slow(q);
}

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
px__waiter *px__waitq_first_slow(px__waitq *q);

/* Inline up to an empty queue, the common answer of a buffered channel. */
static inline px__waiter *px__waitq_first(px__waitq *q)
{
    return q->len == 0 ? NULL : px__waitq_first_slow(q);
}
size_t px__waitq_waiting(px__waitq *q);
void px__waitq_remove(px__waitq *q, px__waiter *w);

/*
** Choices: one fiber waiting on several queues at once (px_select, sync/
** select.c).  A choice is a record on the heap with one waiter per case;
** each case waiter goes on its primitive's queue as a waiter of its own
** would, with the primitive's op and pass_on, and the primitive grants it
** as any other (px__waitq_first, px__waitq_grant): px__waitq_fiber gives
** the choosing fiber.  The first grant decides the choice: it records the
** case as the winner, and from then on px__waitq_first skips the other
** cases as interrupted waiters (they have withdrawn), so exactly one case
** is ever granted.  An fd case is armed in the scheduler's epoll set
** (px__poll_case_arm) instead; an event grants it under the poll lock
** without deciding the choice, and px__waitq_choose then reads it.  A grant
** of a queue's case wins over an fd's: it took something.
**
** While the choice is under way the fiber's own waiter records it (op
** PX__WAITQ_CHOICE_OP, obj the caller's cases, value the choice), so a hosted
** fiber's re-call finds it (px__waitq_choice_recall), and the end of the
** fiber or another wait of a hosted one gives it up.
*/
#define PX__WAITQ_CHOICE_OP (-3)

/* A choice of n cases for fiber f, recorded in its own waiter under `cases`
** (the caller's array: a hosted re-call names it); NULL when out of memory.
** Its case waiters are ready for px__waitq_case. */
px__choice *px__waitq_choice_new(px_fiber *f, const void *cases, size_t n);

/* Case i of c, made a wait for op on obj (the primitive's, as
** px__waitq_begin does for the fiber's own waiter). */
px__waiter *px__waitq_case(px__choice *c, size_t i, const void *obj, int op,
                           void (*pass_on)(px__waiter *w));

/* Puts case waiter w on q: 0, or PX_ETHREAD (not queued) when fibers of
** another scheduler wait on q. */
int px__waitq_case_join(px__waitq *q, px__waiter *w);

/* Makes case i of c a wait for fd to be ready for `events`, armed in the
** scheduler's epoll set: 0, or what px_wait_fd would refuse it with. */
int px__waitq_case_fd(px__choice *c, size_t i, int fd, unsigned events);

/*
** Parks until c is decided, with `info` (its dereg and ctx are replaced).
** Returns the index of the case that won (>= 0): a queue's grant, else an
** fd case an event or a close granted; PX_ETIMEDOUT / PX_ECANCELED when a
** scope interrupted the wait (every case is off its queue, a raced grant
** passed on, but c->winner still says which case was granted, if one was);
** PX_EYIELD in a hosted fiber that must yield: once resumed, its re-call
** finds c again (px__waitq_choice_recall) and px__waitq_choice_collect
** returns the same outcomes.
*/
int px__waitq_choose(px__choice *c, const px_park_info *info);
int px__waitq_choice_collect(px__choice *c);

/* The choice that hosted fiber f recorded for `cases` and has not
** collected, or NULL. */
px__choice *px__waitq_choice_recall(px_fiber *f, const void *cases);

/* Takes every case of c that did not win off its queue or out of the epoll
** set and frees c; the fiber's own waiter records no wait any more. */
void px__waitq_choice_end(px__choice *c);

/*
** Holds: the one record of who holds what.  A hold's owner is the record of
** the fiber that holds it; while nobody does it is NULL, or a mark the
** primitive put there (PX__WAITQ_MARK(1) .. PX__WAITQ_MARK(PX__WAITQ_MARKS):
** a mutex's "free" and "free, its owner died"), never a fiber's record.  A
** primitive asks who holds through px__waitq_holder / _hold_id / _held_by,
** never through the owner's fields.  The record, not the id, names the
** holder: a record is off every hold before it is recycled
** (px__waitq_fiber_ended).
**
** px__waitq_hold_take records that fiber f (the caller's, or a waiter's
** through px__waitq_fiber) now holds h; px__waitq_hold_drop that it no longer
** does.  Both are inline, for every uncontended lock's path; take is O(1) and
** so is drop in LIFO order (else it walks the owner's holds).  Drop leaves
** NULL, and is a no-op on a hold not held.  px__waitq_hold_link is take for a
** hold whose ended() is set once and for all (a mutex's, from its new).
*/
#define PX__WAITQ_MARKS 7
#define PX__WAITQ_MARK(n) ((px_fiber *)(uintptr_t)(n))

/* The fiber that holds h, NULL when nobody does (a mark or NULL). */
static inline px_fiber *px__waitq_holder(const px__hold *h)
{
    return (uintptr_t)h->owner > PX__WAITQ_MARKS ? h->owner : NULL;
}

/* 1 when fiber f (a record, never NULL) holds h. */
static inline int px__waitq_held_by(const px__hold *h, const px_fiber *f)
{
    return h->owner == f;
}

/* The id of the fiber that holds h, 0 when nobody does (reports, getters). */
uint64_t px__waitq_hold_id(const px__hold *h);

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
    px_fiber *f = px__waitq_holder(h);
    if (f == NULL)
        return;
    px__hold **p = &f->holds;
    while (*p != h)
        p = &(*p)->next;
    *p = h->next;
    h->owner = NULL;
}

/* Drops h, held by fiber f and first of its holds (px__waitq_holds(f) == h),
** in two stores.  An unlock tests that with px__waitq_held_by, where f may be
** NULL (off-fiber) only for a hold whose owner is never NULL (a mutex's: a
** mark while free). */
static inline void px__waitq_hold_pop(px__hold *h, px_fiber *f)
{
    f->holds = h->next;
    h->owner = NULL;
}

/* The holds of fiber f, most recent first (through h->next), for a
** primitive that looks for one of its own among them. */
static inline px__hold *px__waitq_holds(const px_fiber *f)
{
    return f->holds;
}

#endif /* PX__FIBER_WAITQ_H */
