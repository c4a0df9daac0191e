/*
** _host.h -- what the C files of the extension parataxis._host give one
** another: _host.c (the greenlet host and the module), _handles.c (the handles of
** the sync family's objects and tokens, the calls that may park).
*/
#ifndef PXH_HOST_H
#define PXH_HOST_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "parataxis.h"

/* The kinds of Prim: the sync family's objects. */
enum { PXH_K_MUTEX, PXH_K_RWLOCK, PXH_K_WAITGROUP, PXH_K_BARRIER, PXH_K_ONCE,
       PXH_K_SEM, PXH_K_EVENT, PXH_K_CHAN, PXH_NKINDS };

/* The calls that may park, by name (wait(op, obj[, value]) in _host.c). */
enum { PXH_MUTEX_LOCK, PXH_MUTEX_UNLOCK, PXH_RDLOCK, PXH_WRLOCK, PXH_WG_WAIT,
       PXH_ARRIVE, PXH_ONCE_BEGIN, PXH_SEM_ACQUIRE, PXH_EVENT_WAIT, PXH_CHAN_SEND,
       PXH_CHAN_RECV, PXH_JOIN, PXH_NOPS };

/* The name of the capsules that carry a px_fiber (spawn's, for join and release). */
#define PXH_FIBER_CAPSULE "parataxis.px_fiber"

/* One call: the op, its C object and its second argument, if any. */
typedef struct pxh_op {
    int op;
    void *obj;
    void *out;
} pxh_op;

/* Fills `w` for op on `obj` (a Prim of the op's kind, or a fiber's capsule
** for PXH_JOIN) with `value` (a Channel send's key, else NULL); 0, or -1 with
** TypeError or ValueError set. */
int pxh_op_target(int op, PyObject *obj, PyObject *value, pxh_op *w);

/* Makes the call once: its outcome (PX_EYIELD: park, then call again). */
int pxh_op_call(pxh_op *w);

/* Adds Prim, Token and the op and kind constants to the module; 0 or -1. */
int pxh_add_handles(PyObject *m);

#endif
