/*
** _pxpy.h -- the C half of the Python binding: what _pxpy.c gives the cffi
** extension parataxis._parataxis, and what it takes from it.
**
** _build_ffi.py reads the part between the two "cdef" lines below into the cffi
** cdef, so Python and C see one declaration of each pxpy_ name.  That part is
** plain C that cffi's parser also reads: declarations, comments and integer
** #defines only.
*/
#ifndef PXPY_H
#define PXPY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "parataxis.h"

/* cdef: begin */

/* The gate of a queue, timer or handler queue: every call from Python goes
** through it, so that close() can wait for the calls under way before the free.
** Python allocates it (ffi.new: its size is the struct's below) and sets it up
** with pxpy_gate_init. */
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

/* The timer queue's and the deadline timer's calls, each inside the gate.  A
** handler's C arg is the key under which the Python side keeps the call
** alive: its TimerHandle's address (see _pxpy.c). */
uint64_t pxpy_add_at(pxpy_gate *g, double when, uintptr_t key);
uint64_t pxpy_add_periodic(pxpy_gate *g, int64_t first_ns, int64_t period_ns, uintptr_t key);
int pxpy_cancel(pxpy_gate *g, uint64_t id);
int64_t pxpy_cancel_all(pxpy_gate *g);
int64_t pxpy_pending(pxpy_gate *g);
int pxpy_timer_expires_after(pxpy_gate *g, int64_t delay_ns);
int64_t pxpy_timer_expiry(pxpy_gate *g);
int pxpy_timer_wait(pxpy_gate *g, uintptr_t key);
int pxpy_timer_cancel(pxpy_gate *g);
void pxpy_timer_drop(pxpy_gate *g);
int pxpy_timer_close(pxpy_gate *g, pxpy_gate *qg);

/* Adds to parataxis._parataxis what _core.py takes from _pxpy.c: the types
** TimerHandle and _TimerQueueBase (TimerQueue's GIL-held add and cancel) and
** their helpers; 0, or -1 when that failed. */
int pxpy_export(void);

/* The handler queue's calls.  pxpy_queue_wait returns PX_EINTR when a signal
** ended the wait. */
int pxpy_queue_drain(pxpy_gate *g, size_t max);
void pxpy_drain_stop(void);
int pxpy_queue_fd(pxpy_gate *g);
int pxpy_queue_wait(pxpy_gate *g, int64_t deadline);
int64_t pxpy_queue_size(pxpy_gate *g);
int pxpy_queue_shut(pxpy_gate *g, size_t own);

/* Calls fn(arg, status), a call a timer queue posted to a fiber scheduler.  If
** it reaches a Python handler, that is not called but left in *key and *hstatus
** (returns 1): the fiber calls it once the C call returned (see _pxpy.c). */
int pxpy_deferred_call(px_handler_fn fn, void *arg, int status, uintptr_t *key, int *hstatus);

/* The C trampoline a concurrent.futures worker calls: fn(arg, status). */
void pxpy_invoke(px_handler_fn fn, void *arg, int status);

/* The executor of a queue whose handlers run on its worker or go to a
** concurrent.futures executor: a batch at a time under one hold of the GIL. */
typedef struct pxpy_batch pxpy_batch;
pxpy_batch *pxpy_batch_new(px_executor inner);
px_executor pxpy_batch_executor(pxpy_batch *b);
void pxpy_batch_free(pxpy_batch *b);

/* cdef: end */

/* The gate (see _pxpy.c).  Defined here, not in _pxpy.c, for the code cffi
** generates: _build_ffi.py declares it to cffi as a struct of unknown fields,
** whose size the compiler gives. */
struct pxpy_gate {
    atomic_size_t use;          /* calls under way, plus PXPY_SHUT once shut */
    atomic_int refuse;          /* what a refused call returns */
    atomic_size_t hold;         /* who keeps obj (a px_queue): see pxpy_hold */
    void *obj;                  /* the px_timerq, px_timer or px_queue */
};

/* Python functions that C calls, compiled by cffi from the extern "Python+C"
** declarations in _build_ffi.py (defined in _core.py with @ffi.def_extern). */
void pxpy_handler(uintptr_t key, int status);

/* The one-shot handlers a batch collected, called in one go (see _pxpy.c):
** key[0..n) with their status. */
typedef struct pxpy_keys {
    uintptr_t *key;
    int *status;
    size_t n;
} pxpy_keys;

#endif
