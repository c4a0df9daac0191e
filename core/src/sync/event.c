/*
** event.c -- a level that fibers wait for (see parataxis.h).
**
** While the event is set nobody waits: wait returns at once.  set raises it
** and grants every waiter; the grant takes nothing, so a waiter that was
** interrupted has nothing to pass on, and a waiter woken by set returns 0
** even if the event was cleared before it ran (it was set when it woke).
*/
#include <stdlib.h>

#include "sync/sync.h"
#include "sync/select.h"

enum event_op { EVENT_WAIT };

struct px_event {
    int set;                 /* 1 while set; then the queue is empty */
    px__waitq waiters;        /* fibers parked in px_event_wait, FIFO */
};

px_event *px_event_new(void)
{
    return PX__SYNC_NEW(px_event, waiters);
}

int px_event_set(px_event *e)
{
    if (e == NULL)
        return PX_EINVAL;
    if (px__waitq_elsewhere(&e->waiters))        /* would wake them */
        return PX_ETHREAD;
    e->set = 1;
    /* Interrupted waiters are leaving on their own: not counted as woken. */
    return px__sync_grant_all(&e->waiters, 0);
}

int px_event_clear(px_event *e)
{
    if (e == NULL)
        return PX_EINVAL;
    e->set = 0;
    return 0;
}

int px_event_is_set(const px_event *e)
{
    return e != NULL && e->set;
}

int px_event_wait(px_event *e)
{
    px_fiber *f;
    int r;
    if (px__sync_enter(e, EVENT_WAIT, &f, &r))   /* NULL, off-fiber, a hosted re-call */
        return r;
    if (e->set)
        return 0;
    static const px_park_info pi = { .reason = "Event wait", .kind = "event" };
    return px__waitq_wait(&e->waiters, px__waitq_begin(f, e, EVENT_WAIT, NULL), &pi);
}

size_t px_event_waiters(const px_event *e)
{
    return e ? e->waiters.len : 0;
}

int px__event_case(px_event *e, px__choice *c, size_t i)
{
    return px__waitq_case_join(&e->waiters, px__waitq_case(c, i, e, EVENT_WAIT, NULL));
}

int px_event_free(px_event *e)
{
    return px__sync_free(e, e && (e->waiters.len != 0));
}
