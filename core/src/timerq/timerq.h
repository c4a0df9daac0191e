/*
** timerq.h -- what the rest of the library may ask a timer queue beyond the
** public API.
*/
#ifndef PX__TIMERQ_TIMERQ_H
#define PX__TIMERQ_TIMERQ_H

#include "parataxis.h"

/*
** Why an add with valid arguments returned 0: PX_ECLOSED when the queue is being
** freed or belongs to the parent of a fork, else PX_ENOMEM.  Thread: any.
*/
int px__timerq_refusal(px_timerq *q);

/* 1 when `q` belongs to the parent of a fork (we are its child).  Thread: any. */
int px__timerq_forked(const px_timerq *q);

#endif /* PX__TIMERQ_TIMERQ_H */
