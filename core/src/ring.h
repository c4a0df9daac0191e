/*
** ring.h -- intrusive circular doubly linked lists around a sentinel node.
**
** Every list of the library is one of these, threaded through the px__tnode that
** starts each record, so that moving a record between the deadline set, a queue
** of aborted timers or the handlers in flight never allocates.
*/
#ifndef PX_RING_H
#define PX_RING_H

#include "timerset.h"

static inline void px__ring_init(px__tnode *head)
{
    head->next = head->prev = head;
}

static inline int px__ring_empty(const px__tnode *head)
{
    return head->next == head;
}

static inline void px__ring_push(px__tnode *head, px__tnode *n)
{
    n->prev = head->prev;
    n->next = head;
    head->prev->next = n;
    head->prev = n;
}

static inline void px__ring_unlink(px__tnode *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->next = n->prev = n;
}

#endif /* PX_RING_H */
