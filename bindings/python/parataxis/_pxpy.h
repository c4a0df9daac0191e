/*
** _pxpy.h -- the binding's own C in the cffi extension parataxis._parataxis
** (_pxpy.c): the calls Python makes with the GIL released.
**
** _build_ffi.py reads the part between the two "cdef" lines below into the cffi
** cdef, so Python and C see one declaration of each pxpy_ name.  That part is
** plain C that cffi's parser also reads: declarations and comments only.
*/
#ifndef PXPY_H
#define PXPY_H

#include <stddef.h>
#include <stdint.h>

#include "parataxis.h"

/* cdef: begin */

/* The gate of a queue, timer or handler queue (_gate.h): every call from Python
** goes through it, so that close() can wait for the calls under way before the
** free.  Its memory is a _host.Gate's, viewed with ffi.from_buffer; Python opens
** it with pxpy_gate_init.  enter returns 0, or the code that refused the call. */
typedef struct pxpy_gate pxpy_gate;
void pxpy_gate_init(pxpy_gate *g, void *obj);
int pxpy_enter(pxpy_gate *g);
void pxpy_leave(pxpy_gate *g);
int pxpy_shut(pxpy_gate *g);
void pxpy_gate_forked(pxpy_gate *g);

/* The holds on a handler queue's px_queue (see _pxpy.c): pxpy_gate_init gives
** its owner one; pxpy_unhold returns 1 to the caller that dropped the last. */
void pxpy_hold(pxpy_gate *g);
int pxpy_unhold(pxpy_gate *g);

/* The timer queue's and the deadline timer's calls, each inside the gate (its
** add, cancel and a Timer's async_wait are _host's: they hold the GIL). */
int64_t pxpy_cancel_all(pxpy_gate *g);
int64_t pxpy_pending(pxpy_gate *g);
int pxpy_timer_expires_after(pxpy_gate *g, int64_t delay_ns);
int64_t pxpy_timer_expiry(pxpy_gate *g);
int pxpy_timer_cancel(pxpy_gate *g);
void pxpy_timer_drop(pxpy_gate *g);
int pxpy_timer_close(pxpy_gate *g, pxpy_gate *qg);

/* The handler queue's calls.  pxpy_queue_wait returns PX_EINTR when a signal
** ended the wait. */
int pxpy_queue_drain(pxpy_gate *g, size_t max);
void pxpy_drain_stop(void);
int pxpy_queue_fd(pxpy_gate *g);
int pxpy_queue_wait(pxpy_gate *g, int64_t deadline);
int64_t pxpy_queue_size(pxpy_gate *g);
int pxpy_queue_shut(pxpy_gate *g, size_t own);

/* cdef: end */

#endif
