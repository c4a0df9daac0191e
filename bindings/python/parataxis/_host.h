/*
** _host.h -- what the C files of the extension parataxis._host give one
** another: _host.c (the greenlet host and the module), _handles.c (the handles of
** the sync family's objects and tokens, the calls that may park), _timers.c
** (the timer queues' handles, add and cancel, trampolines and executors), _io.c
** (the waits on fds, the socket calls, run_blocking).
*/
#ifndef PXH_HOST_H
#define PXH_HOST_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "parataxis.h"

/* The kinds of Prim: the sync family's objects, futures and groups. */
enum { PXH_K_MUTEX, PXH_K_RWLOCK, PXH_K_WAITGROUP, PXH_K_BARRIER, PXH_K_ONCE,
       PXH_K_SEM, PXH_K_EVENT, PXH_K_CHAN, PXH_K_FUTURE, PXH_K_GROUP, PXH_NKINDS };

/* The calls that may park, by name (wait(op, obj[, value]) in _host.c). */
enum { PXH_MUTEX_LOCK, PXH_MUTEX_UNLOCK, PXH_RDLOCK, PXH_WRLOCK, PXH_WG_WAIT,
       PXH_ARRIVE, PXH_ONCE_BEGIN, PXH_SEM_ACQUIRE, PXH_EVENT_WAIT, PXH_CHAN_SEND,
       PXH_CHAN_RECV, PXH_JOIN, PXH_FUTURE_WAIT, PXH_GROUP_WAIT, PXH_NOPS };

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

/* The C object of `obj` when it is a live Prim of `kind`, else NULL with
** TypeError set. */
void *pxh_prim_ptr(PyObject *obj, int kind);

/* Makes the call once: its outcome (PX_EYIELD: park, then call again). */
int pxh_op_call(pxh_op *w);

/* 1 while this thread runs a scheduler (_host.c), else 0. */
int pxh_in_run(void);

/* Ends the calling fiber's turn after a call that returned PX_EYIELD and
** waits for the next one (_host.c): 0, or -1 with an exception set. */
int pxh_pass_turn(void);

/* Raises the exception of C code `code` through _errors.raise_for; NULL. */
PyObject *pxh_fail(int code);

/* A _host.Call of fn(arg, status), the library's call owed to a handler (see
** _timers.c); a new reference, or NULL with the error set. */
PyObject *pxh_call_new(px_handler_fn fn, void *arg, int status);

/* Adds TimerHandle, _TimerQueueBase, Gate, Call, Batch and the timers'
** functions to the module (_timers.c); 0 or -1. */
int pxh_add_timers(PyObject *m);

/* Adds Prim, Token and the op and kind constants to the module; 0 or -1. */
int pxh_add_handles(PyObject *m);

/* Adds the waits on fds, the socket calls and run_blocking (_io.c), whose
** errors raise through the module `errors` (parataxis._errors); 0 or -1. */
int pxh_add_io(PyObject *m, PyObject *errors);

#endif
