/*
** _gate.h -- the gate of a timer queue, deadline timer or handler queue: its
** memory and the two calls that bracket every call into its C object.  Shared
** by both halves of the native side: the cffi module's C (_pxpy.c: the gate's
** rule, its shut, and the calls made without the GIL) and the extension _host
** (_timers.c: TimerQueue's add and cancel, made with the GIL held).  Plain C:
** no Python.h.
**
** The gate's memory is a _host.Gate object's (_timers.c), so that it lives as
** long as a Python object holds it; cffi views it typed through
** ffi.from_buffer("pxpy_gate *", gate).
*/
#ifndef PXPY_GATE_H
#define PXPY_GATE_H

#include <stdatomic.h>
#include <stddef.h>

#include "parataxis.h"

/* The top bit of `use`: the gate is shut. */
#define PXPY_SHUT ((size_t)1 << (sizeof(size_t) * 8 - 1))

typedef struct pxpy_gate {
    atomic_size_t use;          /* calls under way, plus PXPY_SHUT once shut */
    atomic_int refuse;          /* what a refused call returns */
    atomic_size_t hold;         /* who keeps obj (a px_queue): see pxpy_hold */
    void *obj;                  /* the px_timerq, px_timer or px_queue */
} pxpy_gate;

/* 0 and the call may go on, or the code to refuse it with (it did not enter). */
static inline int pxpy_gate_enter(pxpy_gate *g)
{
    if (atomic_fetch_add_explicit(&g->use, 1, memory_order_acquire) & PXPY_SHUT) {
        atomic_fetch_sub_explicit(&g->use, 1, memory_order_relaxed);
        return atomic_load_explicit(&g->refuse, memory_order_relaxed);
    }
    return 0;
}

static inline void pxpy_gate_leave(pxpy_gate *g)
{
    atomic_fetch_sub_explicit(&g->use, 1, memory_order_release);
}

#endif
