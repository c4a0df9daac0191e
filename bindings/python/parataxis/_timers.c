/*
** _timers.c -- part of parataxis._host: what the timer queues need of C while
** they hold the GIL.  TimerHandle and TimerQueue's add and cancel (the hot
** path), the trampolines through which the library calls a Python handler,
** the batch executor of a queue's worker, the handler calls handed to a
** concurrent.futures executor or a fiber (Call), and the gates' memory (Gate).
** The calls that run without the GIL are the cffi module's (_pxpy.c).
**
** How a Python handler reaches C and comes back exactly once: each timer is a
** TimerHandle, and its address is the C `arg` of the library's call (C to C:
** never a Python int).  While the call is owed the handle is on the live list
** below, which holds a reference to it, so the arg stays valid until the final
** call -- a one-shot's only call, a periodic timer's aborted one -- takes it
** off.  That call is the release point; nothing else is.  The type is not
** tracked by the garbage collector: fn and ctx are dropped at the final call,
** so a cycle through them (a handler that refers to its own handle) ends there.
** The handler itself is called by Python, _core._run_handler(fn, ctx, owner,
** aborted), given once to timers_setup.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "_gate.h"
#include "_host.h"
#include "pxhost.h"

/* What _core.py gives (timers_setup): its threading.local (its `current` is
** the _State whose handler runs), _refused(code, what) and _run_handler. */
static PyObject *tls, *refused, *run_handler, *str_current;

/* -- the GIL hand-over ---------------------------------------------------- */

/*
** add and cancel keep the GIL, so a thread that waits for it would get it only
** when the interpreter forces a switch (sys.getswitchinterval(), 5 ms): a
** worker delivering aborts 256 at a time would fall behind a loop of cancels.
** So a C thread about to take the GIL counts itself in gil_wanted, and those
** two hand the GIL over (gil_yield) while it is non-zero.
*/
static atomic_int gil_wanted;

static PyGILState_STATE gil_take(void)
{
    atomic_fetch_add_explicit(&gil_wanted, 1, memory_order_relaxed);
    PyGILState_STATE gil = PyGILState_Ensure();
    atomic_fetch_sub_explicit(&gil_wanted, 1, memory_order_relaxed);
    return gil;
}

/* With the GIL released: lets the threads that wait for it take it (they clear
** gil_wanted once they have it; this one then waits in Py_END_ALLOW_THREADS
** until they are done).  Bounded: a waiter that is slow to be scheduled is
** left to the interpreter's forced switch. */
static void gil_yield(void)
{
    for (int round = 0; round < 1000; round++) {
        if (atomic_load_explicit(&gil_wanted, memory_order_relaxed) == 0)
            return;
        sched_yield();
    }
}

/* -- the handles ---------------------------------------------------------- */

typedef struct hlink {
    struct hlink *prev, *next;
} hlink;

typedef struct handle {
    PyObject_HEAD
    hlink live;                  /* on `live` while a call is owed */
    hlink own;                   /* then also on its gate's `owed`, if it has a gate */
    PyObject *fn, *ctx;         /* until the final call */
    PyObject *owner;            /* the queue's _State (which keeps the gate) */
    PyObject *sched;            /* a Scheduler held per owed call, or NULL */
    pxpy_gate *gate;            /* NULL for a Timer's wait: not a timer */
    unsigned long id;           /* 0 until added (a Timer's wait has none) */
    double when;
    char periodic, cancelled;
    char ticking;               /* a periodic tick's handler runs (see handle_call) */
    int final;                  /* the final call's status, owed once that tick ends */
} handle;

_Static_assert(sizeof(unsigned long) == sizeof(uint64_t), "a timer id fits an unsigned long");

/* The handles with a call owed, in no order; the GIL guards it. */
static hlink live = { &live, &live };

#define HANDLE(l) ((handle *)((char *)(l) - offsetof(handle, live)))

/* A Gate (see below); `owed` lists the handles of its queue's owed calls (for
** queue_traverse), its own share of the live list. */
typedef struct gate {
    PyObject_HEAD
    pxpy_gate g;
    hlink owed;
} gate;

#define GATE(pg) ((gate *)((char *)(pg) - offsetof(gate, g)))
#define OWN(l) ((handle *)((char *)(l) - offsetof(handle, own)))

static void link_in(hlink *head, hlink *l)
{
    l->next = head->next;
    l->prev = head;
    head->next->prev = l;
    head->next = l;
}

static void link_out(hlink *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->prev = l->next = NULL;
}

static PyTypeObject handle_type;

static void live_add(handle *h)
{
    Py_INCREF(h);
    link_in(&live, &h->live);
    if (h->gate != NULL)
        link_in(&GATE(h->gate)->owed, &h->own);
    else
        h->own.prev = h->own.next = NULL;
}

static void live_remove(handle *h)
{
    link_out(&h->live);
    if (h->own.next != NULL)
        link_out(&h->own);
}

/*
** The context copy is kept off the garbage collector too while the handle
** holds it: nothing else can refer to it (copy_context() in the handler
** copies again), so it is part of no cycle the handle does not end at the
** final call, and young collections need not visit the thousands of copies
** that wait in a cancel storm.  It is tracked again when the handle lets it
** go, before anything else may see it or free it.
*/
static PyObject *ctx_untracked(PyObject *ctx)
{
    PyObject_GC_UnTrack(ctx);
    return ctx;
}

static PyObject *ctx_tracked(PyObject *ctx)
{
    if (ctx != NULL && !PyObject_GC_IsTracked(ctx))
        PyObject_GC_Track(ctx);
    return ctx;
}

/* A handle with its call owed (on the live list), not yet added. */
static handle *handle_new(PyObject *owner, PyObject *sched, pxpy_gate *g, PyObject *fn)
{
    PyObject *ctx = PyContext_CopyCurrent();
    if (ctx == NULL)
        return NULL;
    ctx_untracked(ctx);
    handle *h = PyObject_New(handle, &handle_type);
    if (h == NULL) {
        Py_DECREF(ctx);
        return NULL;
    }
    h->fn = Py_NewRef(fn);
    h->ctx = ctx;
    h->owner = Py_NewRef(owner);
    h->sched = sched == Py_None ? NULL : Py_NewRef(sched);
    h->gate = g;
    h->id = 0;
    h->when = 0;
    h->periodic = h->cancelled = h->ticking = 0;
    h->final = 0;
    live_add(h);
    return h;
}

/* A handle whose call will never be made: off the live list, without a call. */
static void handle_drop(handle *h)
{
    live_remove(h);
    Py_CLEAR(h->fn);
    ctx_tracked(h->ctx);
    Py_CLEAR(h->ctx);
    Py_CLEAR(h->sched);
    Py_DECREF(h);
}

static void handle_dealloc(handle *h)
{
    Py_XDECREF(h->fn);
    Py_XDECREF(ctx_tracked(h->ctx));
    Py_XDECREF(h->owner);
    Py_XDECREF(h->sched);
    PyObject_Free(h);
}

/* The final call: off the live list, fn and ctx handed to the caller (with the
** list's reference to the handle, which the caller drops), the Scheduler's
** hold given back (see TimerQueue.add). */
static void handle_release(handle *h, PyObject **fn, PyObject **ctx)
{
    live_remove(h);
    *fn = h->fn;
    *ctx = ctx_tracked(h->ctx);
    h->fn = h->ctx = NULL;
    if (h->sched != NULL) {
        PyObject *r = PyObject_CallMethod(h->sched, "_unhold", NULL);
        if (r == NULL)
            PyErr_WriteUnraisable(h->sched);
        Py_XDECREF(r);
        Py_CLEAR(h->sched);
    }
}

/* The final call of h: releases the handle (h may be gone after it). */
static int handle_final(handle *h, int status)
{
    PyObject *fn, *ctx;
    handle_release(h, &fn, &ctx);
    PyObject *args[] = { fn, ctx, h->owner, status != 0 ? Py_True : Py_False };
    PyObject *r = PyObject_Vectorcall(run_handler, args, 4, NULL);
    Py_DECREF(fn);
    Py_DECREF(ctx);
    Py_DECREF(h);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* Calls the handler of h with status, through _run_handler (which sets
** _tls.current and passes what must stop a drain): the final call releases the
** handle, a periodic tick keeps it.  0, or -1 with the exception set.
**
** A tick that a fiber runs (Call.run) is over for the timer queue before its
** handler starts, and that handler may wait: the next tick, or the final call,
** may then come while it still runs in the handle's context.  A tick then is
** coalesced into the running one; the final call is owed to its end, and made
** there -- never overlapping, never lost. */
static int handle_call(handle *h, int status)
{
    if (h->ticking) {
        if (status != 0)
            h->final = status;
        return 0;
    }
    if (status == 0 && h->periodic) {
        PyObject *args[] = { h->fn, ctx_tracked(h->ctx), h->owner, Py_False };
        h->ticking = 1;
        PyObject *r = PyObject_Vectorcall(run_handler, args, 4, NULL);
        h->ticking = 0;
        int final = h->final;
        if (final == 0) {
            Py_XDECREF(r);
            return r == NULL ? -1 : 0;
        }
        h->final = 0;
        if (r != NULL) {
            Py_DECREF(r);
            return handle_final(h, final);
        }
        PyObject *type, *value, *tb;        /* the tick's exception stays the one raised */
        PyErr_Fetch(&type, &value, &tb);
        Py_INCREF(h);
        if (handle_final(h, final) != 0)
            PyErr_WriteUnraisable((PyObject *)h);
        Py_DECREF(h);
        PyErr_Restore(type, value, tb);
        return -1;
    }
    return handle_final(h, status);
}

/* -- the trampolines ------------------------------------------------------ */

/*
** While a batch runs on a worker (batch_flush), one-shot handlers are not
** called one by one: their (handle, status) pairs are kept here and run in one
** go after the batch, which saves a call into Python's machinery each.  The
** library has already decided their status (the handler has started, as far
** as cancel is concerned).  Periodic ticks are called at once, so that the
** next tick is armed only after the handler returned.
*/
typedef struct keys {
    handle **h;
    int *status;
    size_t n;
} keys;

static _Thread_local keys *collect;
static _Thread_local size_t collect_cap;

/*
** A fiber that runs a timer queue's call (delivered through a fiber scheduler)
** must not run the Python handler inside that C call: the handler may wait,
** and the timer queue counts the call as running until it returns (its close
** would wait for a fiber that cannot run).  So the trampolines, called while
** `defer` is set, only leave the handle and status there; the fiber calls the
** handler once the C call returned (Call.run).
*/
typedef struct deferred {
    handle *h;
    int status, set;
} deferred;

static _Thread_local deferred *defer;

static int deferring(handle *h, int status)
{
    deferred *d = defer;
    if (d == NULL || d->set)
        return 0;
    d->h = h;
    d->status = status;
    d->set = 1;
    return 1;
}

/*
** The one-shot handlers a batch collected: each call is its final one, made as
** ctx.run(fn, aborted) here, in C.  An exception goes to sys.unraisablehook and
** the rest run.  The calls of a batch are one queue's: _tls.current is set when
** the owner changes, not per handler.
*/
static int set_current(PyObject *owner)
{
    if (PyObject_SetAttr(tls, str_current, owner) == 0)
        return 0;
    PyErr_WriteUnraisable(tls);
    return -1;
}

static void run_keys(keys *k)
{
    PyObject *prev = PyObject_GetAttr(tls, str_current);
    if (prev == NULL) {
        PyErr_Clear();                  /* not set on this thread: None */
        prev = Py_NewRef(Py_None);
    }
    PyObject *owner = prev;
    for (size_t i = 0; i < k->n; i++) {
        PyObject *fn, *ctx;
        handle *h = k->h[i];
        handle_release(h, &fn, &ctx);
        if (h->owner != owner && set_current(h->owner) == 0)
            owner = h->owner;
        PyObject *r = NULL;
        if (PyContext_Enter(ctx) == 0) {
            r = PyObject_CallOneArg(fn, k->status[i] != 0 ? Py_True : Py_False);
            if (PyContext_Exit(ctx) != 0 && r != NULL)
                Py_CLEAR(r);
        }
        if (r == NULL)
            PyErr_WriteUnraisable(fn);
        Py_XDECREF(r);
        Py_DECREF(fn);
        Py_DECREF(ctx);
        Py_DECREF(h);
    }
    if (owner != prev)
        set_current(prev);
    Py_DECREF(prev);
}

/* Runs the handlers collected so far, in order, and empties `k`. */
static void run_collected(keys *k)
{
    collect = NULL;
    if (k->n > 0) {
        PyGILState_STATE gil = gil_take();
        run_keys(k);
        PyGILState_Release(gil);
    }
    k->n = 0;
}

/* Calls the handler now, after the ones collected before it (the calls of a
** batch keep their order: a Timer's waits run in the order they were added).
** What it runs (a HandlerQueue drained from inside it, say) is not part of the
** batch being collected.  An exception goes to sys.unraisablehook. */
static void call_now(handle *h, int status)
{
    keys *collecting = collect;
    if (collecting != NULL)
        run_collected(collecting);
    PyGILState_STATE gil = gil_take();
    Py_INCREF(h);                       /* reported with its handle, if it raises */
    if (handle_call(h, status) != 0)
        PyErr_WriteUnraisable((PyObject *)h);
    Py_DECREF(h);
    PyGILState_Release(gil);
    collect = collecting;
}

/* The px_handler_fn of a periodic Python handler. */
static void trampoline_now(void *arg, int status)
{
    if (deferring(arg, status))
        return;
    call_now(arg, status);
}

/* The px_handler_fn of a one-shot Python handler: kept for the batch's one go
** when a batch is collecting and has room, else called at once. */
static void trampoline(void *arg, int status)
{
    if (deferring(arg, status))
        return;
    keys *k = collect;
    if (k == NULL || k->n == collect_cap) {
        call_now(arg, status);
        return;
    }
    k->h[k->n] = arg;
    k->status[k->n] = status;
    k->n++;
}

/* -- the library's calls with the GIL held -------------------------------- */

/*
** TimerQueue's add and cancel keep the GIL, which is safe: px_timerq_add_at
** and px_timerq_cancel never wait for the GIL (no thread holds the queue's lock
** while it takes the GIL: handlers are called outside it), and they are short.
** Each goes through the gate as every call does: close() in another thread
** waits for it with the GIL released.  While a C thread waits for the GIL
** (gil_wanted), the call is made with the GIL released and handed over.
*/
#define WITH_GIL_HANDED_OVER(result, call)                                        \
    do {                                                                          \
        if (atomic_load_explicit(&gil_wanted, memory_order_relaxed) == 0) {       \
            result = (call);                                                      \
        } else {                                                                  \
            Py_BEGIN_ALLOW_THREADS                                                \
            result = (call);                                                      \
            gil_yield();                                                          \
            Py_END_ALLOW_THREADS                                                  \
        }                                                                         \
    } while (0)

/* `when` is the deadline in seconds on px_now()'s clock, as the handle knows
** it (the clock plus the delay): rounded up to the nanosecond, it is never
** before that delay has passed.  Past the clock's range (2^63 ns) it saturates
** to "never", as px_timerq_add does. */
static uint64_t add_at(pxpy_gate *g, double when, handle *h)
{
    double ns = when * 1e9;
    if (!(ns >= 0))
        return 0;
    int64_t deadline = INT64_MAX;
    if (ns < PXHOST_NS_NEVER) {
        deadline = (int64_t)ns;
        if (deadline < ns)
            deadline++;
    }
    if (pxpy_gate_enter(g) != 0)
        return 0;
    uint64_t id = px_timerq_add_at(g->obj, deadline, trampoline, h);
    pxpy_gate_leave(g);
    return id;
}

static uint64_t add_periodic(pxpy_gate *g, int64_t first_ns, int64_t period_ns, handle *h)
{
    if (pxpy_gate_enter(g) != 0)
        return 0;
    uint64_t id = px_timerq_add_periodic(g->obj, first_ns, period_ns, trampoline_now, h);
    pxpy_gate_leave(g);
    return id;
}

static int cancel(pxpy_gate *g, uint64_t id)
{
    int rc = pxpy_gate_enter(g);
    if (rc != 0)
        return rc;
    rc = px_timerq_cancel(g->obj, id);
    pxpy_gate_leave(g);
    return rc;
}

static int timer_wait(pxpy_gate *g, handle *h)
{
    int rc = pxpy_gate_enter(g);
    if (rc != 0)
        return rc;
    rc = px_timer_async_wait(g->obj, trampoline, h);
    pxpy_gate_leave(g);
    return rc;
}

/* -- TimerHandle ---------------------------------------------------------- */

/* 1 or 0 from px_timerq_cancel as True or False; else the refusal raised. */
static PyObject *cancel_result(int rc, handle *h)
{
    if (rc == 1) {
        h->cancelled = 1;
        Py_RETURN_TRUE;
    }
    if (rc == 0)
        Py_RETURN_FALSE;
    return PyObject_CallFunction(refused, "is", rc, "TimerQueue");
}

static PyObject *handle_cancel(handle *h, PyObject *unused)
{
    (void)unused;
    if (h->gate == NULL)                /* a Timer's wait: not a timer */
        Py_RETURN_FALSE;
    int rc;
    WITH_GIL_HANDED_OVER(rc, cancel(h->gate, h->id));
    return cancel_result(rc, h);
}

static PyObject *handle_cancelled(handle *h, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(h->cancelled);
}

static PyObject *handle_when(handle *h, PyObject *unused)
{
    (void)unused;
    return PyFloat_FromDouble(h->when);
}

static PyObject *handle_repr(handle *h)
{
    char *when = PyOS_double_to_string(h->when, 'f', 6, 0, NULL);
    if (when == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("<parataxis.TimerHandle %swhen=%s%s>",
                                       h->periodic ? "periodic " : "", when,
                                       h->cancelled ? " cancelled" : "");
    PyMem_Free(when);
    return r;
}

static PyMethodDef handle_methods[] = {
    { "cancel", (PyCFunction)handle_cancel, METH_NOARGS,
      "cancel($self, /)\n--\n\nThe same as queue.cancel(self)." },
    { "cancelled", (PyCFunction)handle_cancelled, METH_NOARGS,
      "cancelled($self, /)\n--\n\nTrue once cancel() of this handle returned True (as asyncio's: "
      "the aborts of cancel_all() and close() do not count)." },
    { "when", (PyCFunction)handle_when, METH_NOARGS,
      "when($self, /)\n--\n\nThe deadline (of a periodic timer: its first tick) in seconds on "
      "the clock of parataxis.now()." },
    { NULL, NULL, 0, NULL },
};

/* For _core.py's TimerQueue._cancel_slow. */
static PyMemberDef handle_members[] = {
    { "_owner", T_OBJECT, offsetof(handle, owner), READONLY, NULL },
    { NULL, 0, 0, 0, NULL },
};

static PyTypeObject handle_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "parataxis.TimerHandle",
    .tp_basicsize = sizeof(handle),
    .tp_dealloc = (destructor)handle_dealloc,
    .tp_repr = (reprfunc)handle_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A timer of one TimerQueue, as add() and add_periodic() return it (like\n"
              "asyncio's TimerHandle).  It belongs to its queue: another queue's cancel()\n"
              "does not know it.  It does not keep the queue alive.",
    .tp_methods = handle_methods,
    .tp_members = handle_members,
};

/* -- Gate: a gate's memory ------------------------------------------------ */

/*
** Not tracked by the garbage collector and with no finalizer: it is freed when
** the last Python object holding it (a queue, a timer, a _State, cffi's view) is
** deallocated, after the __del__ of every holder has run.  A finalizer would
** be run by the collector in a reference cycle possibly before the __del__ of
** the queue holding the gate, whose close() would then shut freed memory.
*/
static PyTypeObject gate_type;

/* The gate of a Gate object, or NULL with TypeError set. */
static pxpy_gate *gate_of(PyObject *o)
{
    if (Py_IS_TYPE(o, &gate_type))
        return &((gate *)o)->g;
    PyErr_Format(PyExc_TypeError, "expected a _host.Gate, not %s", Py_TYPE(o)->tp_name);
    return NULL;
}

static PyObject *gate_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kw != NULL && PyDict_GET_SIZE(kw) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Gate() takes no arguments");
        return NULL;
    }
    gate *o = (gate *)type->tp_alloc(type, 0);
    if (o != NULL) {
        atomic_init(&o->g.use, PXPY_SHUT);          /* shut until pxpy_gate_init */
        atomic_init(&o->g.refuse, PX_ECLOSED);
        atomic_init(&o->g.hold, 0);
        o->g.obj = NULL;
        o->owed.prev = o->owed.next = &o->owed;
    }
    return (PyObject *)o;
}

/* The buffer cffi views: the gate's own bytes. */
static int gate_getbuffer(gate *o, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)o, &o->g, sizeof o->g, 0, flags);
}

static PyBufferProcs gate_buffer = { (getbufferproc)gate_getbuffer, NULL };

static PyTypeObject gate_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "parataxis._host.Gate",
    .tp_basicsize = sizeof(gate),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Gate(): the memory of a gate (see _gate.h), shut until pxpy_gate_init.",
    .tp_as_buffer = &gate_buffer,
    .tp_new = gate_new,
};

/* -- _TimerQueueBase: TimerQueue's add and cancel ------------------------- */

/*
** TimerQueue's add and cancel are the C methods of its base class, which keeps
** in C what they need (the _State, the Scheduler, the asyncio loop, the Gate):
** one call, no Python frame.  Whatever the fast path does not cover (a delay
** that is not a float or int in range, a handler that is not callable, an
** asyncio loop executor, a refusal) goes to Python.
*/
typedef struct tqueue {
    PyObject_HEAD
    PyObject *state;            /* _State */
    PyObject *sched;            /* a Scheduler, or None */
    PyObject *loop;             /* an asyncio loop, or None */
    PyObject *gate;             /* its Gate, once made */
} tqueue;

/*
** Besides its own references, an open queue's traversal visits the handler of
** each call it owes.  The handle holds it, on the live list: a root the
** collector cannot see, which would keep for ever a queue that its handlers
** refer to, once dropped.  Counted as the queue's, such a cycle is garbage:
** the collector finalizes the queue, whose close() shuts it and delivers every
** call owed, releasing the handlers, before anything is cleared.  A shut queue
** visits none: calls it still owes (posted to a loop, or a close from one of
** its own handlers) keep their handlers, and what these refer to, alive.
*/
static int queue_traverse(tqueue *q, visitproc visit, void *arg)
{
    Py_VISIT(q->state);
    Py_VISIT(q->sched);
    Py_VISIT(q->loop);
    gate *g = q->gate != NULL && Py_IS_TYPE(q->gate, &gate_type) ? (gate *)q->gate : NULL;
    if (g != NULL && !(atomic_load(&g->g.use) & PXPY_SHUT)) {
        for (hlink *l = g->owed.next; l != &g->owed; l = l->next)
            Py_VISIT(OWN(l)->fn);
    }
    return 0;
}

static int queue_clear(tqueue *q)
{
    Py_CLEAR(q->state);
    Py_CLEAR(q->sched);
    Py_CLEAR(q->loop);
    return 0;
}

static void queue_dealloc(tqueue *q)
{
    PyObject_GC_UnTrack(q);
    queue_clear(q);
    Py_CLEAR(q->gate);
    Py_TYPE(q)->tp_free(q);
}

static int is_set(PyObject *o)
{
    return o != NULL && o != Py_None;
}

/* A handle of queue q with its call owed, the queue's Scheduler held for it
** (until the handler's fiber took its call), or NULL with the error set. */
static handle *queue_handle(tqueue *q, PyObject *fn, pxpy_gate **g)
{
    if (!is_set(q->state) || !is_set(q->gate)) {
        PyErr_SetString(PyExc_RuntimeError, "TimerQueue.__init__ was not called");
        return NULL;
    }
    if ((*g = gate_of(q->gate)) == NULL)
        return NULL;
    if (is_set(q->sched)) {
        PyObject *r = PyObject_CallMethod(q->sched, "_hold", NULL);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
    }
    handle *h = handle_new(q->state, q->sched, *g, fn);
    if (h == NULL && is_set(q->sched)) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *r = PyObject_CallMethod(q->sched, "_unhold", NULL);
        Py_XDECREF(r);
        PyErr_Restore(type, value, tb); /* the first error wins */
    }
    return h;
}

/* h is added (id): returns it; else (0, fn will never be called) drops it and
** lets Python say why. */
static PyObject *queue_added(tqueue *q, handle *h, uint64_t id)
{
    h->id = id;
    if (id != 0)
        return (PyObject *)h;
    handle_drop(h);
    return PyObject_CallMethod((PyObject *)q, "_not_added", NULL);
}

/* _arm(delay, fn): add with the arguments checked; TimerQueue.add's end. */
static PyObject *queue_arm(tqueue *q, double delay, PyObject *fn)
{
    pxpy_gate *g;
    handle *h = queue_handle(q, fn, &g);
    if (h == NULL)
        return NULL;
    h->when = (double)px_now() / 1e9 + delay;
    uint64_t id;
    WITH_GIL_HANDED_OVER(id, add_at(g, h->when, h));
    return queue_added(q, h, id);
}

/* Calls the Python method `name` of the queue with add's or cancel's arguments,
** keywords included. */
static PyObject *queue_slow(tqueue *q, const char *name, PyObject *const *args,
                            Py_ssize_t n, PyObject *kwnames)
{
    PyObject *argv[8];
    Py_ssize_t all = n + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    if (all >= 8) {
        PyErr_Format(PyExc_TypeError, "TimerQueue.%s: too many arguments", name + 1);
        return NULL;
    }
    PyObject *meth = PyUnicode_InternFromString(name);
    if (meth == NULL)
        return NULL;
    argv[0] = (PyObject *)q;
    for (Py_ssize_t i = 0; i < all; i++)
        argv[i + 1] = args[i];
    PyObject *r = PyObject_VectorcallMethod(meth, argv, (size_t)(n + 1), kwnames);
    Py_DECREF(meth);
    return r;
}

/* The delay a float or int in range: below 2^63 ns (pxhost.h's "never"). */
static PyObject *queue_add(tqueue *q, PyObject *const *args, Py_ssize_t n, PyObject *kwnames)
{
    if (n == 2 && kwnames == NULL && !is_set(q->loop) && PyCallable_Check(args[1])) {
        double delay = -1;
        if (PyFloat_CheckExact(args[0])) {
            delay = PyFloat_AS_DOUBLE(args[0]);
        } else if (PyLong_CheckExact(args[0])) {
            delay = PyLong_AsDouble(args[0]);
            if (delay == -1 && PyErr_Occurred())
                PyErr_Clear();          /* past a double: Python explains */
        }
        if (delay >= 0 && delay * 1e9 < PXHOST_NS_NEVER)
            return queue_arm(q, delay, args[1]);
    }
    return queue_slow(q, "_add_slow", args, n, kwnames);
}

static PyObject *queue_arm_method(tqueue *q, PyObject *const *args, Py_ssize_t n)
{
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "_arm(delay, fn)");
        return NULL;
    }
    double delay = PyFloat_AsDouble(args[0]);
    if (delay == -1 && PyErr_Occurred())
        return NULL;
    return queue_arm(q, delay, args[1]);
}

/* _arm_periodic(first_ns, period_ns, fn): add_periodic's end, its arguments
** checked by Python. */
static PyObject *queue_arm_periodic(tqueue *q, PyObject *const *args, Py_ssize_t n)
{
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "_arm_periodic(first_ns, period_ns, fn)");
        return NULL;
    }
    long long first = PyLong_AsLongLong(args[0]);
    if (first == -1 && PyErr_Occurred())
        return NULL;
    long long period = PyLong_AsLongLong(args[1]);
    if (period == -1 && PyErr_Occurred())
        return NULL;
    pxpy_gate *g;
    handle *h = queue_handle(q, args[2], &g);
    if (h == NULL)
        return NULL;
    h->periodic = 1;
    h->when = (double)px_now() / 1e9 + (double)first / 1e9;
    uint64_t id;
    WITH_GIL_HANDED_OVER(id, add_periodic(g, first, period, h));
    return queue_added(q, h, id);
}

static PyObject *queue_cancel(tqueue *q, PyObject *const *args, Py_ssize_t n,
                              PyObject *kwnames)
{
    if (n != 1 || kwnames != NULL)
        return queue_slow(q, "_cancel_slow", args, n, kwnames);
    handle *h = (handle *)args[0];
    if (!Py_IS_TYPE(h, &handle_type)) {
        PyErr_Format(PyExc_TypeError, "the timer id must be the TimerHandle that add() or "
                     "add_periodic() returned, not %s", Py_TYPE(h)->tp_name);
        return NULL;
    }
    if (h->owner != q->state || h->gate == NULL)
        return queue_slow(q, "_cancel_slow", args, n, kwnames);   /* another queue's */
    int rc;
    WITH_GIL_HANDED_OVER(rc, cancel(h->gate, h->id));
    if (rc == 0 || rc == 1)
        return cancel_result(rc, h);
    return queue_slow(q, "_cancel_slow", args, n, kwnames);       /* refused: why */
}

static PyMethodDef queue_methods[] = {
    { "add", (PyCFunction)(void (*)(void))queue_add, METH_FASTCALL | METH_KEYWORDS,
      "add($self, delay, fn)\n--\n\nCall fn(False) after `delay` seconds, or fn(True) if "
      "aborted first.\nReturns the timer's TimerHandle." },
    { "cancel", (PyCFunction)(void (*)(void))queue_cancel, METH_FASTCALL | METH_KEYWORDS,
      "cancel($self, handle)\n--\n\nAbort a timer.  True while its handler has not started "
      "(it is then\ncalled with aborted=True); False when too late, or when the handle "
      "is\nanother queue's (that timer is left alone)." },
    { "_arm", (PyCFunction)(void (*)(void))queue_arm_method, METH_FASTCALL, NULL },
    { "_arm_periodic", (PyCFunction)(void (*)(void))queue_arm_periodic, METH_FASTCALL, NULL },
    { NULL, NULL, 0, NULL },
};

static PyMemberDef queue_members[] = {
    { "_state", T_OBJECT, offsetof(tqueue, state), 0, NULL },
    { "_sched", T_OBJECT, offsetof(tqueue, sched), 0, NULL },
    { "_loop", T_OBJECT, offsetof(tqueue, loop), 0, NULL },
    { "_gate", T_OBJECT, offsetof(tqueue, gate), 0, NULL },
    { NULL, 0, 0, 0, NULL },
};

static PyTypeObject queue_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "parataxis._host._TimerQueueBase",
    .tp_basicsize = sizeof(tqueue),
    .tp_dealloc = (destructor)queue_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "TimerQueue's add and cancel, in C (see _timers.c).",
    .tp_traverse = (traverseproc)queue_traverse,
    .tp_clear = (inquiry)queue_clear,
    .tp_methods = queue_methods,
    .tp_members = queue_members,
    .tp_new = PyType_GenericNew,
};

/* -- Call: one call of the library's, owed to a handler ------------------- */

/*
** A call (fn, arg) the library handed to an executor, carried to where Python
** makes it: a concurrent.futures worker (call(status)), or the fiber a
** scheduler started for it (run(): the status it was posted with, the Python
** handler deferred until the C call returned, see `defer`).  Made once per
** call, and made once: a second making raises RuntimeError (the handler's
** record may be gone).  Handing it on is Python's business (_core._Submitted,
** _fibers._factory).
*/
typedef struct call {
    PyObject_HEAD
    px_handler_fn fn;
    void *arg;
    int status;
} call;

static PyTypeObject call_type;

PyObject *pxh_call_new(px_handler_fn fn, void *arg, int status)
{
    call *c = PyObject_New(call, &call_type);
    if (c != NULL) {
        c->fn = fn;
        c->arg = arg;
        c->status = status;
    }
    return (PyObject *)c;
}

/* Takes the call for its one making: NULL once made (a second call raises). */
static call *call_take(call *c, px_handler_fn *fn)
{
    *fn = c->fn;
    c->fn = NULL;
    if (*fn == NULL)
        PyErr_SetString(PyExc_RuntimeError, "this handler call was made already");
    return *fn == NULL ? NULL : c;
}

static PyObject *call_tp_call(call *c, PyObject *args, PyObject *kw)
{
    int status;
    px_handler_fn fn;
    if (kw != NULL && PyDict_GET_SIZE(kw) != 0) {
        PyErr_SetString(PyExc_TypeError, "call(status) takes no keywords");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "i", &status) || call_take(c, &fn) == NULL)
        return NULL;
    fn(c->arg, status);
    Py_RETURN_NONE;
}

static PyObject *call_run(call *c, PyObject *unused)
{
    (void)unused;
    px_handler_fn fn;
    if (call_take(c, &fn) == NULL)
        return NULL;
    deferred d = { NULL, 0, 0 }, *prev = defer;
    defer = &d;
    fn(c->arg, c->status);
    defer = prev;
    if (d.set && handle_call(d.h, d.status) != 0)    /* a Python handler: may wait */
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef call_methods[] = {
    { "run", (PyCFunction)call_run, METH_NOARGS,
      "run(): makes the call with its status, the Python handler it reaches once the "
      "C call returned (a fiber's: the handler may wait)." },
    { NULL, NULL, 0, NULL },
};

static PyTypeObject call_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "parataxis._host.Call",
    .tp_basicsize = sizeof(call),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A handler call of the library's (see _timers.c): call(status) makes it.",
    .tp_call = (ternaryfunc)call_tp_call,
    .tp_methods = call_methods,
};

/* -- Batch: the executor of a queue's worker ------------------------------ */

/*
** The worker's calls, a batch at a time.  Each call into Python takes the GIL,
** and while the main thread adds and cancels every take is a hand-over between
** the two threads, several microseconds on a VM.  post() only keeps the call;
** flush(), which the worker makes after each batch, takes the GIL once and runs
** them all -- or hands each to `submit` (a Python callable: submit(Call) -> 0,
** or a C code when it could not), whose concurrent.futures executor needs the
** GIL as well.  Its px_executor is the buffer cffi views.
*/
typedef struct posted {
    px_handler_fn fn;
    void *arg;
    int status;
} posted;

typedef struct batch {
    PyObject_HEAD
    px_executor exec;           /* { batch_post, this, batch_flush } */
    PyObject *submit;           /* NULL: run the calls on the worker */
    posted *call;
    size_t len, cap;
    handle **key;               /* the one-shot handlers a flush collected */
    int *status;
    size_t keys_cap;
    pthread_t worker;           /* the thread that flushes it, once `flushed` */
    char flushed;
} batch;

/* Keeps a call; PX_ENOMEM makes the worker run it at once instead. */
static int batch_post(void *ctx, px_handler_fn fn, void *arg, int status)
{
    batch *b = ctx;
    if (b->len == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 256;
        posted *c = realloc(b->call, cap * sizeof *c);
        if (c == NULL)
            return PX_ENOMEM;
        b->call = c;
        b->cap = cap;
    }
    b->call[b->len++] = (posted){ fn, arg, status };
    return 0;
}

/* Makes room for a full batch's keys; 0 when memory ran out (the handlers of
** the batch are then called one by one). */
static int keys_room(batch *b)
{
    if (b->keys_cap >= b->len)
        return 1;
    handle **key = realloc(b->key, b->len * sizeof *key);
    if (key != NULL)
        b->key = key;
    int *status = realloc(b->status, b->len * sizeof *status);
    if (status != NULL)
        b->status = status;
    if (key == NULL || status == NULL)
        return 0;
    b->keys_cap = b->len;
    return 1;
}

/* Hands call c to `submit`; on a refusal (or an error, reported) it runs here,
** aborted. */
static void batch_submit(batch *b, posted c)
{
    PyObject *o = pxh_call_new(c.fn, c.arg, 0);
    PyObject *r = o == NULL ? NULL : PyObject_CallOneArg(b->submit, o);
    long rc = r == NULL ? -1 : PyLong_AsLong(r);
    if (r == NULL || (rc == -1 && PyErr_Occurred()))
        PyErr_WriteUnraisable(b->submit);
    Py_XDECREF(r);
    Py_XDECREF(o);
    if (rc != 0)
        c.fn(c.arg, PX_ECANCELED);      /* not submitted: run here, aborted */
}

static void batch_flush(void *ctx)
{
    batch *b = ctx;
    if (b->len == 0)
        return;
    PyGILState_STATE gil = gil_take();
    /* Alive to the flush's end: once a queue closed from its own handler owes
    ** no call, Python lets its batch go (_core._prune_deferred), maybe while
    ** the last handler of this flush runs. */
    Py_INCREF(b);
    b->worker = pthread_self();
    b->flushed = 1;
    int collecting = b->submit == NULL && keys_room(b);
    keys k = { b->key, b->status, 0 };
    if (collecting) {
        collect = &k;
        collect_cap = b->keys_cap;
    }
    for (size_t i = 0; i < b->len; i++) {
        posted c = b->call[i];
        if (b->submit == NULL)
            c.fn(c.arg, c.status);
        else
            batch_submit(b, c);
    }
    b->len = 0;
    run_collected(&k);
    collect = NULL;
    Py_DECREF(b);
    PyGILState_Release(gil);
}

static PyObject *batch_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *submit;
    if ((kw != NULL && PyDict_GET_SIZE(kw) != 0) || !PyArg_ParseTuple(args, "O", &submit))
        return NULL;
    if (submit != Py_None && !PyCallable_Check(submit)) {
        PyErr_SetString(PyExc_TypeError, "Batch(submit): submit is None or callable");
        return NULL;
    }
    batch *b = (batch *)type->tp_alloc(type, 0);
    if (b == NULL)
        return NULL;
    b->exec = (px_executor){ batch_post, b, batch_flush };
    b->submit = submit == Py_None ? NULL : Py_NewRef(submit);
    return (PyObject *)b;
}

static void batch_dealloc(batch *b)
{
    Py_XDECREF(b->submit);
    free(b->call);
    free(b->key);
    free(b->status);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

/* on_worker(): True on the thread that flushes it, the queue's worker: where
** the queue's close() cannot join that worker (_core.TimerQueue.close). */
static PyObject *batch_on_worker(batch *b, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(b->flushed && pthread_equal(b->worker, pthread_self()));
}

static PyMethodDef batch_methods[] = {
    { "on_worker", (PyCFunction)batch_on_worker, METH_NOARGS,
      "on_worker(): True on the worker thread that flushes this batch." },
    { NULL, NULL, 0, NULL },
};

/* The buffer cffi views as a px_executor, which px_timerq_new copies. */
static int batch_getbuffer(batch *b, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)b, &b->exec, sizeof b->exec, 1, flags);
}

static PyBufferProcs batch_buffer = { (getbufferproc)batch_getbuffer, NULL };

static PyTypeObject batch_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "parataxis._host.Batch",
    .tp_basicsize = sizeof(batch),
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Batch(submit): a worker's executor, a batch at a time under one hold of the "
              "GIL (see _timers.c).",
    .tp_as_buffer = &batch_buffer,
    .tp_methods = batch_methods,
    .tp_new = batch_new,
};

/* -- the module's functions ----------------------------------------------- */

PyDoc_STRVAR(timer_wait_doc, "timer_wait(gate, owner, sched, fn) -> int: a Timer's async_wait "
                             "(its Gate, its queue's _State and Scheduler or None): 0, or the "
                             "C code that refused it (fn will never be called).");

static PyObject *t_timer_wait(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n != 4) {
        PyErr_SetString(PyExc_TypeError, "timer_wait(gate, owner, sched, fn)");
        return NULL;
    }
    pxpy_gate *g = gate_of(args[0]);
    if (g == NULL)
        return NULL;
    handle *h = handle_new(args[1], args[2], NULL, args[3]);
    if (h == NULL)
        return NULL;
    int rc;
    WITH_GIL_HANDED_OVER(rc, timer_wait(g, h));
    if (rc < 0)
        handle_drop(h);
    return PyLong_FromLong(rc);
}

PyDoc_STRVAR(live_owners_doc, "live_owners() -> the set of the owners (_State) with a call owed.");

static PyObject *t_live_owners(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    PyObject *set = PySet_New(NULL);
    for (hlink *l = live.next; set != NULL && l != &live; l = l->next) {
        if (PySet_Add(set, HANDLE(l)->owner) != 0)
            Py_CLEAR(set);
    }
    return set;
}

PyDoc_STRVAR(live_clear_doc, "live_clear(): in a fork's child, drops every owed call (the "
                             "parent's) without a call and without a Scheduler's unhold.");

static PyObject *t_live_clear(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    while (live.next != &live) {
        handle *h = HANDLE(live.next);
        Py_CLEAR(h->sched);
        handle_drop(h);
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(timers_setup_doc, "timers_setup(tls, refused, run_handler), once, from _core.py: "
                               "what the handles and queues call back.");

static PyObject *t_timers_setup(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "timers_setup(tls, refused, run_handler)");
        return NULL;
    }
    Py_XSETREF(tls, Py_NewRef(args[0]));
    Py_XSETREF(refused, Py_NewRef(args[1]));
    Py_XSETREF(run_handler, Py_NewRef(args[2]));
    Py_RETURN_NONE;
}

static PyMethodDef timer_functions[] = {
    { "timers_setup", (PyCFunction)(void (*)(void))t_timers_setup, METH_FASTCALL,
      timers_setup_doc },
    { "timer_wait", (PyCFunction)(void (*)(void))t_timer_wait, METH_FASTCALL, timer_wait_doc },
    { "live_owners", t_live_owners, METH_NOARGS, live_owners_doc },
    { "live_clear", t_live_clear, METH_NOARGS, live_clear_doc },
    { NULL, NULL, 0, NULL },
};

int pxh_add_timers(PyObject *m)
{
    if (str_current == NULL && (str_current = PyUnicode_InternFromString("current")) == NULL)
        return -1;
    if (PyModule_AddFunctions(m, timer_functions) != 0)
        return -1;
    PyTypeObject *types[] = { &handle_type, &gate_type, &queue_type, &call_type, &batch_type };
    const char *names[] = { "TimerHandle", "Gate", "_TimerQueueBase", "Call", "Batch" };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (PyType_Ready(types[i]) != 0
            || PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) != 0)
            return -1;
    }
    return 0;
}
