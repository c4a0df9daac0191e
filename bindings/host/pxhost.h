/*
** pxhost.h -- the C that both bindings share: what a host language needs of
** the library that is not the language's own business.  Plain C11 on the
** public API (parataxis.h): no Python.h, no lua.h (tests/layers.sh checks).
** Both the Lua module and the Python extension link these objects.
**
** Three things live here, one file each:
**
** exec.c -- the run as an executor.  A binding's run (px.run, parataxis.run)
**     hands out an executor (px.scheduler(), parataxis.scheduler()) that timer
**     queues and posts use from any thread: each handler call becomes a new
**     hosted fiber of the run.  The contract:
**
**     1. A call is a binding's record that embeds a pxhost_call first (one
**        allocation per call).  pxhost_exec_post hands it to the scheduler's
**        own executor (px_sched_executor): 0, and the call is the run's; or
**        PX_ECLOSED once the run is over (or the scheduler's refusal), and
**        nothing of the call is kept: the caller still owns it.
**     2. The run takes the call in on a C fiber of its own and spawns a hosted
**        fiber for it (px_spawn_hosted with the binding's px_host_ops, whose
**        host_ctx is the call).  Off-fiber -- no fiber could be made for it,
**        or the scheduler was freed with the call not taken in -- the call
**        goes to the binding's cannot_start, told whether the run is over;
**        cannot_start owns the call from then on (Python runs the handler
**        inline, aborted once over; Lua gives the call back to its queue).
**     3. `inflight` counts the calls posted and not yet taken in: a run that
**        ends with some closes only by force (pxhost_exec_close), so that a
**        binding runs its scheduler again first.  Once closed, every post
**        is refused with PX_ECLOSED.
**     4. Reference counted: created with one reference (its creator's); the
**        binding takes one for each further owner (Lua: the Scheduler
**        userdata, each queue posting to it) and each call in flight holds
**        one, so a call taken in after every owner let go still finds it.
**     5. The hold ledger.  pxhost_exec_hold holds the run (px_sched_hold:
**        it neither ends nor reports a deadlock) for a call owed to it; false
**        once the run is cancelled or over.  pxhost_exec_unhold lets go of
**        one (nothing once they were dropped).  pxhost_exec_cancel drops
**        every hold for good (a cancelled run waits for no timer), and so
**        does a close.
**     Thread: any, except pxhost_exec_close (the run's thread, at its end).
**
** duration.c -- the one duration rule, the C API's: float seconds become
**     int64_t nanoseconds; negative or NaN is PX_EINVAL; 2^63 ns or more
**     (about 9223372036.85 s, 292 years; inf too) saturates to INT64_MAX,
**     which the C API reads as "never".
**
** graves.c -- a busy object reached by the collector.  A sync object or
**     token whose Lua userdata / Python object is collected while fibers
**     still hold it or wait on it (its px_*_free answers PX_EBUSY) is neither
**     freed under them nor leaked: it is kept, on the collecting thread, and
**     its free is tried again when a run of that thread ends (after its
**     scheduler is freed: none of its fibers is left).  One still busy then
**     (fibers of another thread's scheduler use it) stays kept for the end
**     of the next run; a thread that ends tries them once more as it
**     exits.  Only one still busy then, or one no memory was left to keep,
**     is left allocated: never unsafe.  Thread: the collecting thread, for
**     both.
*/
#ifndef PXHOST_H
#define PXHOST_H

#include <stddef.h>
#include <stdint.h>

#include "parataxis.h"

/* -- exec.c: the run as an executor ------------------------------------------ */

typedef struct pxhost_exec pxhost_exec;

/* The head of a binding's call record: its first member, so that the record,
** the call and the hosted fiber's host_ctx are one address.  The binding sets
** fn and arg; the layer sets exec and status, once the call is taken in:
** the status it was posted with, or PX_ECANCELED when px_sched_free aborts
** a call it never started. */
typedef struct pxhost_call {
    pxhost_exec *exec;
    px_handler_fn fn;
    void *arg;
    int status;
} pxhost_call;

/* x may not be NULL in the calls below but pxhost_exec_ref/unref (which do
** nothing with it) and pxhost_exec_post (PX_EINVAL): a binding holds its
** executor from pxhost_exec_new to its last unref, so NULL is its own bug. */

/* What the binding gives its run's executor. */
typedef struct pxhost_exec_ops {
    const px_host_ops *fiber;          /* a call's hosted fiber; host_ctx = the call */
    /* The call cannot start as a fiber (see the contract, 2): it is the
    ** binding's now; `over` is 1 once the run is over.  Off-fiber. */
    void (*cannot_start)(pxhost_call *c, int over);
} pxhost_exec_ops;

/* The executor of the run of s, with one reference, or NULL (no memory).
** ops must outlive it.  Thread: the run's. */
pxhost_exec *pxhost_exec_new(px_sched *s, const pxhost_exec_ops *ops);

/* One more reference; one less (the last frees it).  NULL does nothing. */
void pxhost_exec_ref(pxhost_exec *x);
void pxhost_exec_unref(pxhost_exec *x);

/* Posts call c (fn and arg set) with status to x's run: 0, PX_ECLOSED once
** the run is over, or what the scheduler's post answered (PX_ENOMEM...);
** on an error nothing of c is kept.  Thread: any. */
int pxhost_exec_post(pxhost_exec *x, pxhost_call *c, int status);

/* 1 once the run is over (closed), else 0.  Thread: any. */
int pxhost_exec_closed(pxhost_exec *x);

/* 1 when the run is held for a call owed to it, 0 (no hold) once it is
** cancelled or over.  Thread: any. */
int pxhost_exec_hold(pxhost_exec *x);

/* Lets go of one hold that pxhost_exec_hold gave; nothing once the holds
** were dropped.  Thread: any. */
void pxhost_exec_unhold(pxhost_exec *x);

/* The run was cancelled: lets go of every hold, and gives no more.  Thread:
** any. */
void pxhost_exec_cancel(pxhost_exec *x);

/* At the end of the run: drops every hold and closes x (1), or returns 0
** while calls posted to it were not taken in, unless `force`.  The run's
** thread, before its scheduler is freed. */
int pxhost_exec_close(pxhost_exec *x, int force);

/* -- duration.c: seconds to nanoseconds ---------------------------------------- */

/* 2^63 ns: durations from here on are "never" (INT64_MAX). */
#define PXHOST_NS_NEVER 0x1p63

/* Seconds s as the C API's nanoseconds in *ns: 0, or PX_EINVAL for a
** negative or NaN s (*ns untouched).  2^63 ns or more saturates to INT64_MAX. */
int pxhost_ns(double s, int64_t *ns);

/* -- graves.c: busy objects the collector reached ------------------------------ */

/* A px_*_free: 0, or PX_EBUSY while fibers hold or wait on p. */
typedef int (*pxhost_free_fn)(void *p);

/* The collector reached p: free_fn(p) now, unless it answers PX_EBUSY, or
** `later` (a token a scope of the running run may still use, which no free
** can check): then p is kept for pxhost_sweep.  Thread: the collector's. */
void pxhost_collect(pxhost_free_fn free_fn, void *p, int later);

/* At the end of a run, its scheduler freed: tries again the free of every
** object this thread keeps, keeps the ones still busy; returns how many it
** keeps.  Thread: the one that collected them. */
size_t pxhost_sweep(void);

#endif
