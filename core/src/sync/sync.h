/*
** sync.h -- what the primitives of sync/ share beyond fiber/waitq.h: the new
** of an object with one queue, the prologues every operation starts with,
** the release that grants every waiter, the report of a single holder and
** the free of an object that nobody may be waiting on.  All inline: the fast
** paths (the uncontended lock and unlock) stay the few instructions they were.
*/
#ifndef PX__SYNC_SYNC_H
#define PX__SYNC_SYNC_H

#include <stddef.h>
#include <stdlib.h>

#include "base/names.h"
#include "fiber/waitq.h"

/* The _new of a primitive with one queue: a zeroed object of `size` bytes
** whose queue, `queue_at` bytes in, is made empty; NULL (errno ENOMEM) when
** memory runs out.  PX__SYNC_NEW(type, queue) says it with the names. */
static inline void *px__sync_new(size_t size, size_t queue_at)
{
    char *obj = calloc(1, size);
    if (obj)
        px__waitq_init((px__waitq *)(void *)(obj + queue_at));
    return obj;
}

#define PX__SYNC_NEW(type, queue) px__sync_new(sizeof(type), offsetof(type, queue))

/* Step 1 of waitq.h for an operation that may park, after the check every
** operation makes first: 1 when the operation ends here, with PX_EINVAL in
** *out for a NULL obj (and *self NULL), else as px__waitq_enter. */
static inline int px__sync_enter(const void *obj, int op, px_fiber **self, int *out)
{
    if (obj == NULL) {
        *self = NULL;
        *out = PX_EINVAL;
        return 1;
    }
    return px__waitq_enter(obj, op, self, out);
}

/* The prologue of an operation that never parks but needs its caller: 0 with
** the calling fiber in *self, or PX_EINVAL for a NULL obj, PX_ENOFIBER
** off-fiber. */
static inline int px__sync_caller(const void *obj, px_fiber **self)
{
    if (obj == NULL)
        return PX_EINVAL;
    *self = px__waitq_self();
    return *self == NULL ? PX_ENOFIBER : 0;
}

/* Grants every waiter of q that still waits `result` (a grant that takes
** nothing: an event set, a waitgroup at zero, a barrier's phase); returns
** how many. */
static inline int px__sync_grant_all(px__waitq *q, int result)
{
    int n = 0;
    px__waiter *w;
    while ((w = px__waitq_first(q)) != NULL) {
        px__waitq_grant(w, result);
        n++;
    }
    return n;
}

/* A park_info holders() for a primitive held by one fiber at most: the id
** of h's holder in out[0], if it has one and there is room. */
static inline size_t px__sync_one_holder(const px__hold *h, uint64_t *out, size_t max)
{
    uint64_t id = px__waitq_hold_id(h);
    if (id == 0 || max == 0)
        return 0;
    out[0] = id;
    return 1;
}

/* The free of every primitive: 0 for NULL, PX_EBUSY (obj kept) while it is
** `busy` (held, or waited for), else frees obj and returns 0. */
static inline int px__sync_free(void *obj, int busy)
{
    if (obj == NULL)
        return 0;
    if (busy)
        return PX_EBUSY;
    px__names_forget(obj);
    free(obj);
    return 0;
}

#endif /* PX__SYNC_SYNC_H */
