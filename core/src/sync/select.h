/*
** select.h -- what px_select (select.c) asks of the primitives it can wait
** on: each queues a case of a choice (fiber/waitq.h) as its own parking
** operation would queue the fiber, with the same op and pass_on, so that its
** releasing side grants the case as it grants any waiter.  The non-waiting
** half of a case is the primitive's public try form (px_chan_trysend,
** px_sem_tryacquire, ...).  Each returns 0, or PX_ETHREAD (not queued) when
** fibers of another scheduler wait on the queue.
*/
#ifndef PX__SYNC_SELECT_H
#define PX__SYNC_SELECT_H

#include "fiber/waitq.h"

/* Case i of c: a send of v on ch (send 1), or a receive from it (send 0). */
int px__chan_case(px_chan *ch, int send, void *v, px__choice *c, size_t i);
/* Case i of c: event e is set. */
int px__event_case(px_event *e, px__choice *c, size_t i);
/* Case i of c: one unit of sem. */
int px__sem_case(px_sem *sem, px__choice *c, size_t i);

#endif /* PX__SYNC_SELECT_H */
