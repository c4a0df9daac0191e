/*
** timerset.h -- the ordered set of deadlines that both engines share.
**
** A hierarchical timing wheel in front of a small binary heap.  The wheel has
** PX__TSET_LEVELS levels of 64 slots; a level-0 slot spans one tick (2^16 ns,
** about 66 us) and each level above spans 64 times more.  The wheel only sorts
** coarsely.  Exactness comes from the heap: when time reaches a level-0 slot, its
** nodes that are due go straight to the caller and the rest enter the heap, which
** orders them to the nanosecond.  So the heap holds only what is due within about
** one tick, insert and remove are O(1) in the wheel (O(log k) in the heap of k
** near nodes), and expiring a batch of due timers is a walk down a list.
**
** The set is not thread-safe: its owner locks around it.  Nodes are intrusive and
** never allocated here; only the heap array is.
*/
#ifndef PX__TIMERSET_H
#define PX__TIMERSET_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/list.h"

#define PX__TSET_TICK_SHIFT 16          /* a tick is 2^16 ns */
#define PX__TSET_SLOT_BITS  6           /* 64 slots a level */
#define PX__TSET_SLOTS      (1 << PX__TSET_SLOT_BITS)
#define PX__TSET_LEVELS     8           /* 16 + 8 * 6 >= 63 bits: any int64 deadline */
#define PX__TSET_LOOK_PER_NODE 16       /* a capped expire looks at most at 16 nodes a result */

typedef struct px__tnode px__tnode;

/*
** A node of the set.  While a node is out of the set, `link` belongs to its
** owner (a list of aborted records, the handlers in flight).  `tag` fills what
** would be padding and is never touched by the set: it is the owner's (the timer
** queue keeps its record's generation and state there, atomic because the worker
** and a cancelling thread race on the state).
*/
struct px__tnode {
    px__list link;           /* in a slot's list (or, out of the set, the owner's) */
    int64_t deadline;        /* when it is due, on px_now()'s clock */
    uint32_t where;          /* PX__TSET_OUT, a heap index | PX__TSET_IN_HEAP, or a slot */
    _Atomic uint32_t tag;    /* the owner's */
};

_Static_assert(offsetof(px__tnode, link) == 0, "a node's link comes first");

#define PX__TSET_OUT     UINT32_MAX
#define PX__TSET_IN_HEAP 0x80000000u

typedef struct px__tset {
    px__list slot[PX__TSET_LEVELS][PX__TSET_SLOTS];    /* list sentinels */
    uint64_t occupied[PX__TSET_LEVELS];              /* bit s: slot s is not empty */
    int64_t cursor;          /* every node due in a tick <= cursor is in the heap or `rest` */
    px__list rest;           /* the part of the slot being reached not yet looked at */
    px__tnode **heap;         /* min-heap on deadline */
    size_t heap_len, heap_cap;
    size_t count;            /* nodes in the set */
} px__tset;

/* Makes an empty set whose wheel starts at time `now`. */
void px__tset_init(px__tset *s, int64_t now);

/* Releases the heap array.  The nodes still in the set are left as they are. */
void px__tset_destroy(px__tset *s);

/* Adds `n`, whose deadline is set, to the set.  Cannot fail. */
void px__tset_insert(px__tset *s, px__tnode *n);

/* Removes `n`, which is in the set. */
void px__tset_remove(px__tset *s, px__tnode *n);

/* Returns 1 when `n` is in a set. */
static inline int px__tset_contains(const px__tnode *n) { return n->where != PX__TSET_OUT; }

/* The node whose link is `l`; NULL for NULL.  `link` comes first (asserted
** above), so the node is at the link's address: a cast, which keeps NULL. */
static inline px__tnode *px__tset_node(px__list *l)
{
    return (px__tnode *)(void *)l;
}

/* The node after `n` in a list px__tset_expire or px__tset_take_all returned,
** or NULL at its end. */
static inline px__tnode *px__tset_after(const px__tnode *n)
{
    return px__tset_node(n->link.next);
}

/*
** Returns when px__tset_expire should next be called: the earliest deadline, or an
** earlier moment at which the wheel must move nodes towards the heap.  INT64_MAX
** when the set is empty.  Never later than the earliest deadline.
*/
int64_t px__tset_next(px__tset *s);

/*
** Removes the nodes due at `now` (deadline <= now), at most `max` of them, and
** returns them as a list linked through `link.next`, ending in NULL (walk it
** with px__tset_after).  With max == 0 there is no limit and every due node is
** returned.  With a limit, a call also looks at no more than
** PX__TSET_LOOK_PER_NODE * max nodes of the wheel, so that its owner holds its
** lock for a bounded time: it may then return fewer than `max`, or none, while
** due nodes remain; px__tset_next says so by returning a moment that has passed.
**
** Order: nodes come out in deadline order to within a tick when expire is called
** on time; nodes that were overdue when their slot was reached come out in the
** slot's order, which is not deadline order.
*/
px__tnode *px__tset_expire(px__tset *s, int64_t now, size_t max);

/* Removes every node and returns them as a list like px__tset_expire's. */
px__tnode *px__tset_take_all(px__tset *s);

#endif /* PX__TIMERSET_H */
