/*
** _pxpy.c -- the binding's own C in the cffi extension parataxis._parataxis,
** compiled next to the code cffi generates from _build_ffi.py as a translation
** unit of its own (the project's warnings apply here, not there): the calls on
** a timer queue, deadline timer or handler queue that Python makes with the
** GIL released (cffi's rule) -- each inside the object's gate -- and the gate's
** rule.  Plain C on the public API: no Python.h.  What needs the GIL is in the
** extension _host (_timers.c).  _pxpy.h declares what Python calls.
*/
#define _POSIX_C_SOURCE 200809L   /* nanosleep */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "_pxpy.h"
#include "_gate.h"

/*
** The gate.  Python threads call a queue while another thread may close it, and
** the C free must not run under a call still in the queue (the C API forbids it:
** a freed lock, a corrupted list).  So every call from Python enters the gate of
** its object: one atomic add to count it, one atomic subtract when it leaves.
** Shutting the gate sets the top bit, which makes every later enter fail (the
** call returns `refuse`, PX_ECLOSED or PX_EFORKED, and touches nothing), and
** then waits until the calls under way have left; only then does Python free
** the object.  The wait is a poll, not a condition variable: calls end soon
** (most are short, a drain runs the handlers it took, a handler queue's wait is
** woken: see pxpy_queue_shut), a leave stays one atomic op, and nothing here
** needs care across fork().  The gate itself is freed only with the Python
** objects that hold it, so a late call always finds it: its memory is a
** _host.Gate's, freed when that object is deallocated, never by a finalizer
** (see _gate.h, _timers.c).  TimerQueue's add and cancel enter and leave it
** from _host, with the same two inline functions (_gate.h).
*/

/* Opens a new gate (a _host.Gate is shut until then) on its C object. */
void pxpy_gate_init(pxpy_gate *g, void *obj)
{
    atomic_init(&g->use, 0);
    atomic_init(&g->refuse, PX_ECLOSED);
    atomic_init(&g->hold, 1);
    g->obj = obj;
}

/*
** The holds on a handler queue's px_queue.  The C API wants the queue to outlive
** every timer queue posting into it until px_timerq_free has returned; a closed
** HandlerQueue cannot wait for them (the collector may finalize it first, with
** its timer queues still to be closed), so it leaves the free to whoever comes
** last.  Its owner holds the queue until its close() is done with it, and each
** TimerQueue posting into it from its creation until its px_timerq_free
** returned; the caller that drops the last hold frees the queue, which runs the
** calls still queued.  A hold is taken inside the handler queue's gate, so never
** once the last is gone.
*/
void pxpy_hold(pxpy_gate *g)
{
    atomic_fetch_add_explicit(&g->hold, 1, memory_order_relaxed);
}

int pxpy_unhold(pxpy_gate *g)
{
    return atomic_fetch_sub_explicit(&g->hold, 1, memory_order_acq_rel) == 1;
}

int pxpy_enter(pxpy_gate *g)
{
    return pxpy_gate_enter(g);
}

void pxpy_leave(pxpy_gate *g)
{
    pxpy_gate_leave(g);
}

/* Sets the top bit; 1 for the caller that set it, 0 when it was set already. */
static int gate_close(pxpy_gate *g)
{
    return !(atomic_fetch_or_explicit(&g->use, PXPY_SHUT, memory_order_acq_rel) & PXPY_SHUT);
}

/* 1 once the calls under way, `own` excepted, have left. */
static int gate_idle(pxpy_gate *g, size_t own)
{
    return atomic_load_explicit(&g->use, memory_order_acquire) == (PXPY_SHUT | own);
}

static void gate_pause(unsigned round)
{
    if (round < 64) {
        sched_yield();
    } else {
        struct timespec ts = { 0, 50000 };
        nanosleep(&ts, NULL);
    }
}

/* Shuts the gate and waits for the calls under way; 1 for the caller that shut
** it (and must free the object), 0 when it was shut already. */
int pxpy_shut(pxpy_gate *g)
{
    if (!gate_close(g))
        return 0;
    for (unsigned round = 0; !gate_idle(g, 0); round++)
        gate_pause(round);
    return 1;
}

/* In the child of a fork: every later call is refused with PX_EFORKED.  The
** calls that were under way belong to threads the child does not have, so
** nobody waits for them. */
void pxpy_gate_forked(pxpy_gate *g)
{
    atomic_store_explicit(&g->refuse, PX_EFORKED, memory_order_relaxed);
    gate_close(g);
}

/* The timer queue's calls (its add and cancel are _host's: _timers.c). */
int64_t pxpy_cancel_all(pxpy_gate *g)
{
    int rc = pxpy_gate_enter(g);
    if (rc != 0)
        return rc;
    size_t n = px_timerq_cancel_all(g->obj);
    pxpy_gate_leave(g);
    return (int64_t)n;
}

int64_t pxpy_pending(pxpy_gate *g)
{
    int rc = pxpy_gate_enter(g);
    if (rc != 0)
        return rc;
    size_t n = px_timerq_pending(g->obj);
    pxpy_gate_leave(g);
    return (int64_t)n;
}

/* The deadline timer's calls: its own gate, which the queue's close() shuts
** (pxpy_timer_drop) before it frees the queue. */
int pxpy_timer_expires_after(pxpy_gate *g, int64_t delay_ns)
{
    int rc = pxpy_gate_enter(g);
    if (rc != 0)
        return rc;
    rc = px_timer_expires_after(g->obj, delay_ns);
    pxpy_gate_leave(g);
    return rc;
}

int64_t pxpy_timer_expiry(pxpy_gate *g)
{
    int rc = pxpy_gate_enter(g);
    if (rc != 0)
        return rc;
    int64_t expiry = px_timer_expiry(g->obj);
    pxpy_gate_leave(g);
    return expiry;
}

int pxpy_timer_cancel(pxpy_gate *g)
{
    int rc = pxpy_gate_enter(g);
    if (rc != 0)
        return rc;
    rc = px_timer_cancel(g->obj);
    pxpy_gate_leave(g);
    return rc;
}

/* The queue's close(): frees the timer once, after the calls under way. */
void pxpy_timer_drop(pxpy_gate *g)
{
    if (pxpy_shut(g))
        px_timer_free(g->obj);
}

/* Timer.close(): px_timer_free touches the queue, so it runs inside the queue's
** gate `qg`.  When that gate is shut, the queue's close() drops the timer (or
** already did): returns the refusal then. */
int pxpy_timer_close(pxpy_gate *g, pxpy_gate *qg)
{
    int rc = pxpy_gate_enter(qg);
    if (rc != 0)
        return rc;
    pxpy_timer_drop(g);
    pxpy_gate_leave(qg);
    return 0;
}

/* The handler queue's calls. */

/*
** HandlerQueue.drain: px_queue_drain one call at a time, so that a handler that
** raises KeyboardInterrupt or SystemExit (Python then calls pxpy_drain_stop)
** ends the drain right after it, with every later call still queued, in order,
** and the queue's fd still readable.  Nested drains keep their own flag.
*/
static _Thread_local int pxpy_stop;

void pxpy_drain_stop(void)
{
    pxpy_stop = 1;
}

int pxpy_queue_drain(pxpy_gate *g, size_t max)
{
    int rc = pxpy_gate_enter(g);
    if (rc != 0)
        return rc;
    size_t budget = max ? max : px_queue_size(g->obj);
    int outer = pxpy_stop, done = 0;
    pxpy_stop = 0;
    while ((size_t)done < budget && done < INT32_MAX && !pxpy_stop) {
        int n = px_queue_drain(g->obj, 1);
        if (n <= 0) {
            if (done == 0)
                done = n;               /* PX_EFORKED in a fork's child, or 0 */
            break;
        }
        done++;
    }
    pxpy_stop = outer;
    pxpy_gate_leave(g);
    return done;
}

int pxpy_queue_fd(pxpy_gate *g)
{
    int rc = pxpy_gate_enter(g);
    if (rc != 0)
        return rc;
    rc = px_queue_fd(g->obj);
    pxpy_gate_leave(g);
    return rc;
}

/*
** HandlerQueue.wait: px_queue_wait_intr until a call is queued (1) or px_now()
** reaches `deadline` (0; a negative deadline is none).  A signal returns
** PX_EINTR at once: Python runs its signal handlers when the call returns
** (Ctrl-C raises KeyboardInterrupt there) and calls again.  A wait that close()
** interrupted (see pxpy_queue_shut) returns the refusal.
*/
int pxpy_queue_wait(pxpy_gate *g, int64_t deadline)
{
    int rc = pxpy_gate_enter(g);
    if (rc != 0)
        return rc;
    int64_t timeout = -1;
    if (deadline >= 0) {
        timeout = deadline - px_now();
        if (timeout < 0)
            timeout = 0;
    }
    rc = px_queue_wait_intr(g->obj, timeout);
    size_t use = atomic_load_explicit(&g->use, memory_order_relaxed);
    int refuse = atomic_load_explicit(&g->refuse, memory_order_relaxed);
    pxpy_gate_leave(g);
    return use & PXPY_SHUT ? refuse : rc;
}

int64_t pxpy_queue_size(pxpy_gate *g)
{
    int rc = pxpy_gate_enter(g);
    if (rc != 0)
        return rc;
    size_t n = px_queue_size(g->obj);
    pxpy_gate_leave(g);
    return (int64_t)n;
}

/*
** Shuts a handler queue's gate.  `own` counts the drains of this queue under way
** on the caller's own thread (close() from one of its handlers): those cannot
** leave before the caller returns, so it does not wait for them, and Python
** frees the queue when the outermost of them returns.  A thread blocked in
** HandlerQueue.wait would not leave before a call is queued: while others are
** inside, px_queue_interrupt ends the waits under way (a wait that entered the
** gate but had not started yet is ended at the next round).
*/
int pxpy_queue_shut(pxpy_gate *g, size_t own)
{
    if (!gate_close(g))
        return 0;
    for (unsigned round = 0; !gate_idle(g, own); round++) {
        px_queue_interrupt(g->obj);
        gate_pause(round);
    }
    return 1;
}
