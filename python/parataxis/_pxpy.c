/*
** _pxpy.c -- the C half of the Python binding, compiled into the cffi extension
** parataxis._parataxis next to the code cffi generates from _build_ffi.py, as a
** translation unit of its own: the project's warnings apply here, not there.
** _pxpy.h declares what it gives Python; _core.py uses it.
*/
#include <Python.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "_pxpy.h"

/* While a batch runs on a worker (pxpy_batch_flush), one-shot handlers are not
** called one by one: their (key, status) pairs are kept here and handed to Python
** in one call after the batch, which saves a cffi callback (about 0.4 us) each.
** The library has already decided their status (the handler has started, as far
** as cancel is concerned).  Periodic ticks are called at once, so that the next
** tick is armed only after the handler returned. */
static _Thread_local pxpy_keys *pxpy_collect;
static _Thread_local size_t pxpy_collect_cap;

/*
** A fiber that runs a timer queue's call (delivered through a fiber scheduler)
** must not run the Python handler inside that C call: the handler may wait,
** and the timer queue counts the call as running until it returns (its close
** would wait for a fiber that cannot run).  So the trampolines, called while
** pxpy_defer is set, only leave the key and status there; the fiber calls
** the handler once the C call returned.
*/
typedef struct pxpy_deferred {
    uintptr_t key;
    int status, set;
} pxpy_deferred;

static _Thread_local pxpy_deferred *pxpy_defer;

static int pxpy_deferring(uintptr_t key, int status)
{
    pxpy_deferred *d = pxpy_defer;
    if (d == NULL || d->set)
        return 0;
    d->key = key;
    d->status = status;
    d->set = 1;
    return 1;
}

int pxpy_deferred_call(px_handler_fn fn, void *arg, int status, uintptr_t *key, int *hstatus)
{
    pxpy_deferred d = { 0, 0, 0 }, *prev = pxpy_defer;
    pxpy_defer = &d;
    fn(arg, status);
    pxpy_defer = prev;
    *key = d.key;
    *hstatus = d.status;
    return d.set;
}

void pxpy_invoke(px_handler_fn fn, void *arg, int status)
{
    fn(arg, status);
}

/*
** The GIL hand-over.  add and cancel keep the GIL (fast_add_at, fast_cancel at
** the end of this file), so a thread that waits for it would get it only when
** the interpreter forces a switch (sys.getswitchinterval(), 5 ms): a worker
** delivering aborts 256 at a time would fall behind a loop of cancels.  So a C
** thread about to take the GIL counts itself in pxpy_gil_wanted, and those two
** hand the GIL over (pxpy_gil_yield) while it is non-zero.
*/
static atomic_int pxpy_gil_wanted;

static PyGILState_STATE pxpy_gil_take(void)
{
    atomic_fetch_add_explicit(&pxpy_gil_wanted, 1, memory_order_relaxed);
    PyGILState_STATE gil = PyGILState_Ensure();
    atomic_fetch_sub_explicit(&pxpy_gil_wanted, 1, memory_order_relaxed);
    return gil;
}

/* Runs the handlers collected so far, in order, and empties `k`.  An exception
** leaves pxpy_run_keys (cffi reports it through sys.unraisablehook) with `done`
** just past that handler: go on from there. */
static void pxpy_run_collected(pxpy_keys *k)
{
    pxpy_collect = NULL;
    while (k->done < k->n) {
        size_t before = k->done;
        PyGILState_STATE gil = pxpy_gil_take();   /* cffi's own take then nests */
        pxpy_run_keys(k);
        PyGILState_Release(gil);
        if (k->done == before)
            k->done++;
    }
    k->n = k->done = 0;
}

/* Calls the handler now, after the ones collected before it (the calls of a
** batch keep their order: a Timer's waits run in the order they were added).
** What it runs (a HandlerQueue drained from inside it, say) is not part of the
** batch being collected. */
static void pxpy_call_now(uintptr_t key, int status)
{
    pxpy_keys *collecting = pxpy_collect;
    if (collecting != NULL)
        pxpy_run_collected(collecting);
    PyGILState_STATE gil = pxpy_gil_take();
    pxpy_handler(key, status);
    PyGILState_Release(gil);
    pxpy_collect = collecting;
}

/* The px_handler_fn of a periodic Python handler: hands the key to Python. */
static void pxpy_trampoline_now(void *arg, int status)
{
    if (pxpy_deferring((uintptr_t)arg, status))
        return;
    pxpy_call_now((uintptr_t)arg, status);
}

/* The px_handler_fn of a one-shot Python handler: kept for the batch's one call
** into Python when a batch is collecting and has room, else called at once. */
static void pxpy_trampoline(void *arg, int status)
{
    if (pxpy_deferring((uintptr_t)arg, status))
        return;
    pxpy_keys *k = pxpy_collect;
    if (k == NULL || k->n == pxpy_collect_cap) {
        pxpy_call_now((uintptr_t)arg, status);
        return;
    }
    k->key[k->n] = (uintptr_t)arg;
    k->status[k->n] = status;
    k->n++;
}

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
** objects that hold it, so a late call always finds it.
*/
#define PXPY_SHUT ((size_t)1 << (sizeof(size_t) * 8 - 1))

typedef struct pxpy_gate {
    atomic_size_t use;          /* calls under way, plus PXPY_SHUT once shut */
    atomic_int refuse;          /* what a refused call returns */
    void *obj;                  /* the px_timerq, px_timer or px_queue */
} pxpy_gate;

pxpy_gate *pxpy_gate_new(void *obj)
{
    pxpy_gate *g = malloc(sizeof *g);
    if (g != NULL) {
        atomic_init(&g->use, 0);
        atomic_init(&g->refuse, PX_ECLOSED);
        g->obj = obj;
    }
    return g;
}

void pxpy_gate_free(pxpy_gate *g)
{
    free(g);
}

/* 0 and the call may go on, or the code to refuse it with (it did not enter). */
int pxpy_enter(pxpy_gate *g)
{
    if (atomic_fetch_add_explicit(&g->use, 1, memory_order_acquire) & PXPY_SHUT) {
        atomic_fetch_sub_explicit(&g->use, 1, memory_order_relaxed);
        return atomic_load_explicit(&g->refuse, memory_order_relaxed);
    }
    return 0;
}

void pxpy_leave(pxpy_gate *g)
{
    atomic_fetch_sub_explicit(&g->use, 1, memory_order_release);
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

/* The timer queue's calls.  `key` is the handle's key (see pxpy_handler).
** `when` is the deadline in seconds on px_now()'s clock, as Python computed it
** (the clock plus the delay, so the handle knows it): rounded up to the
** nanosecond, it is never before that delay has passed.  Past the clock's
** range (2^63 ns) it saturates to "never", as px_timerq_add does. */
uint64_t pxpy_add_at(pxpy_gate *g, double when, uintptr_t key)
{
    double ns = when * 1e9;
    if (!(ns >= 0))
        return 0;
    int64_t deadline = INT64_MAX;
    if (ns < 0x1p63) {
        deadline = (int64_t)ns;
        if (deadline < ns)
            deadline++;
    }
    if (pxpy_enter(g) != 0)
        return 0;
    uint64_t id = px_timerq_add_at(g->obj, deadline, pxpy_trampoline, (void *)key);
    pxpy_leave(g);
    return id;
}

uint64_t pxpy_add_periodic(pxpy_gate *g, int64_t first_ns, int64_t period_ns,
                                  uintptr_t key)
{
    if (pxpy_enter(g) != 0)
        return 0;
    uint64_t id = px_timerq_add_periodic(g->obj, first_ns, period_ns, pxpy_trampoline_now,
                                         (void *)key);
    pxpy_leave(g);
    return id;
}

int pxpy_cancel(pxpy_gate *g, uint64_t id)
{
    int rc = pxpy_enter(g);
    if (rc != 0)
        return rc;
    rc = px_timerq_cancel(g->obj, id);
    pxpy_leave(g);
    return rc;
}

int64_t pxpy_cancel_all(pxpy_gate *g)
{
    int rc = pxpy_enter(g);
    if (rc != 0)
        return rc;
    size_t n = px_timerq_cancel_all(g->obj);
    pxpy_leave(g);
    return (int64_t)n;
}

int64_t pxpy_pending(pxpy_gate *g)
{
    int rc = pxpy_enter(g);
    if (rc != 0)
        return rc;
    size_t n = px_timerq_pending(g->obj);
    pxpy_leave(g);
    return (int64_t)n;
}

/* The deadline timer's calls: its own gate, which the queue's close() shuts
** (pxpy_timer_drop) before it frees the queue. */
int pxpy_timer_expires_after(pxpy_gate *g, int64_t delay_ns)
{
    int rc = pxpy_enter(g);
    if (rc != 0)
        return rc;
    rc = px_timer_expires_after(g->obj, delay_ns);
    pxpy_leave(g);
    return rc;
}

int64_t pxpy_timer_expiry(pxpy_gate *g)
{
    int rc = pxpy_enter(g);
    if (rc != 0)
        return rc;
    int64_t expiry = px_timer_expiry(g->obj);
    pxpy_leave(g);
    return expiry;
}

int pxpy_timer_wait(pxpy_gate *g, uintptr_t key)
{
    int rc = pxpy_enter(g);
    if (rc != 0)
        return rc;
    rc = px_timer_async_wait(g->obj, pxpy_trampoline, (void *)key);
    pxpy_leave(g);
    return rc;
}

int pxpy_timer_cancel(pxpy_gate *g)
{
    int rc = pxpy_enter(g);
    if (rc != 0)
        return rc;
    rc = px_timer_cancel(g->obj);
    pxpy_leave(g);
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
    int rc = pxpy_enter(qg);
    if (rc != 0)
        return rc;
    pxpy_timer_drop(g);
    pxpy_leave(qg);
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
    int rc = pxpy_enter(g);
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
    pxpy_leave(g);
    return done;
}

int pxpy_queue_fd(pxpy_gate *g)
{
    int rc = pxpy_enter(g);
    if (rc != 0)
        return rc;
    rc = px_queue_fd(g->obj);
    pxpy_leave(g);
    return rc;
}

/*
** HandlerQueue.wait: poll(2) on the queue's descriptor until a call is queued
** (1) or px_now() reaches `deadline` (0; a negative deadline is none).  A signal
** returns PXPY_EINTR at once, not a retry as px_queue_wait does: Python runs its
** signal handlers when the call returns (Ctrl-C raises KeyboardInterrupt there)
** and calls again.  A wait that close() interrupted returns the refusal.
*/
int pxpy_queue_wait(pxpy_gate *g, int64_t deadline)
{
    int rc = pxpy_enter(g);
    if (rc != 0)
        return rc;
    struct pollfd pfd = { .fd = px_queue_fd(g->obj), .events = POLLIN };
    rc = pfd.fd < 0 ? pfd.fd : 0;
    while (rc == 0) {
        int ms = -1;
        if (deadline >= 0) {
            int64_t left = deadline - px_now();
            if (left < 0)
                left = 0;
            /* rounded up: never early */
            ms = left / 1000000 >= INT_MAX ? INT_MAX : (int)((left + 999999) / 1000000);
        }
        int r = poll(&pfd, 1, ms);
        if (r > 0)
            rc = 1;
        else if (r < 0 && errno == EINTR)
            rc = PXPY_EINTR;
        else if (r < 0 || (deadline >= 0 && px_now() >= deadline))
            break;
    }
    size_t use = atomic_load_explicit(&g->use, memory_order_relaxed);
    int refuse = atomic_load_explicit(&g->refuse, memory_order_relaxed);
    pxpy_leave(g);
    return use & PXPY_SHUT ? refuse : rc;
}

int64_t pxpy_queue_size(pxpy_gate *g)
{
    int rc = pxpy_enter(g);
    if (rc != 0)
        return rc;
    size_t n = px_queue_size(g->obj);
    pxpy_leave(g);
    return (int64_t)n;
}

static void pxpy_nothing(void *arg, int status)
{
    (void)arg;
    (void)status;
}

/*
** Shuts a handler queue's gate.  `own` counts the drains of this queue under way
** on the caller's own thread (close() from one of its handlers): those cannot
** leave before the caller returns, so it does not wait for them, and Python
** frees the queue when the outermost of them returns.  A thread blocked in
** px_queue_wait would never leave: while others are inside, an empty queue
** gets a no-op handler posted, which wakes every waiter (px_queue_free runs it,
** or a drain under way does).
*/
int pxpy_queue_shut(pxpy_gate *g, size_t own)
{
    if (!gate_close(g))
        return 0;
    for (unsigned round = 0; !gate_idle(g, own); round++) {
        if (px_queue_size(g->obj) == 0)
            px_queue_post(g->obj, pxpy_nothing, NULL, 0);
        gate_pause(round);
    }
    return 1;
}

/*
** The worker's calls, a batch at a time.  Each call into Python takes the GIL, and
** while the main thread adds and cancels (each cffi call releasing the GIL) every
** take is a hand-over between the two threads, several microseconds on a VM.
** post() only keeps the call; flush(), which the worker makes after each batch,
** takes the GIL once and runs them all -- or hands them to the `inner` executor
** (concurrent.futures), whose own post needs the GIL as well.
*/
typedef struct pxpy_call {
    px_handler_fn fn;
    void *arg;
    int status;
} pxpy_call;

typedef struct pxpy_batch {
    px_executor inner;          /* inner.post == NULL: run the calls on the worker */
    pxpy_call *call;
    size_t len, cap;
    uintptr_t *key;             /* the one-shot handlers a flush collected */
    int *status;
    size_t keys_cap;
} pxpy_batch;

pxpy_batch *pxpy_batch_new(px_executor inner)
{
    pxpy_batch *b = calloc(1, sizeof *b);
    if (b != NULL)
        b->inner = inner;
    return b;
}

void pxpy_batch_free(pxpy_batch *b)
{
    if (b != NULL) {
        free(b->call);
        free(b->key);
        free(b->status);
    }
    free(b);
}

/* Makes room for a full batch's keys; 0 when memory ran out (the handlers of
** the batch are then called one by one). */
static int pxpy_keys_room(pxpy_batch *b)
{
    if (b->keys_cap >= b->len)
        return 1;
    uintptr_t *key = realloc(b->key, b->len * sizeof *key);
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

/* Keeps a call; PX_ENOMEM makes the worker run it at once instead. */
static int pxpy_batch_post(void *ctx, px_handler_fn fn, void *arg, int status)
{
    pxpy_batch *b = ctx;
    if (b->len == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 256;
        pxpy_call *call = realloc(b->call, cap * sizeof *call);
        if (call == NULL)
            return PX_ENOMEM;
        b->call = call;
        b->cap = cap;
    }
    b->call[b->len].fn = fn;
    b->call[b->len].arg = arg;
    b->call[b->len].status = status;
    b->len++;
    return 0;
}

static void pxpy_batch_flush(void *ctx)
{
    pxpy_batch *b = ctx;
    if (b->len == 0)
        return;
    PyGILState_STATE gil = pxpy_gil_take();
    int collect = b->inner.post == NULL && pxpy_keys_room(b);
    pxpy_keys keys = { b->key, b->status, 0, 0 };
    if (collect) {
        pxpy_collect = &keys;
        pxpy_collect_cap = b->keys_cap;
    }
    for (size_t i = 0; i < b->len; i++) {
        pxpy_call c = b->call[i];
        if (b->inner.post == NULL)
            c.fn(c.arg, c.status);
        else if (b->inner.post(b->inner.ctx, c.fn, c.arg, c.status) != 0)
            c.fn(c.arg, PX_ECANCELED);  /* not submitted: run here, aborted */
    }
    b->len = 0;
    pxpy_run_collected(&keys);
    pxpy_collect = NULL;
    PyGILState_Release(gil);
}

px_executor pxpy_batch_executor(pxpy_batch *b)
{
    px_executor e = { pxpy_batch_post, b, pxpy_batch_flush };
    return e;
}

/*
** The hot pair, add and cancel, without cffi.  cffi releases the GIL around
** every C call and passes more than one argument in a tuple; for a call of
** 40-80 ns that is most of the cost (about 350 ns of pxpy_add_at's 470 here).
** These two are plain CPython functions, called with the GIL held, which they
** keep: px_timerq_add_at and px_timerq_cancel never wait for the GIL (no thread
** holds the queue's lock while it takes the GIL: handlers are called outside
** it), so holding it across them is safe, and it is short.  The gate is kept
** as it is: close() in another thread waits for it with the GIL released.
** The gate comes as its address (an int), from the _State that owns it.
*/
/* With the GIL released: lets the threads that wait for it take it (they clear
** pxpy_gil_wanted once they have it; this one then waits in
** Py_END_ALLOW_THREADS until they are done).  Bounded: a waiter that is slow to
** be scheduled is left to the interpreter's forced switch. */
static void pxpy_gil_yield(void)
{
    for (int round = 0; round < 1000; round++) {
        if (atomic_load_explicit(&pxpy_gil_wanted, memory_order_relaxed) == 0)
            return;
        sched_yield();
    }
}

static PyObject *fast_add_at(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "_add_at(gate, when, key)");
        return NULL;
    }
    pxpy_gate *g = PyLong_AsVoidPtr(args[0]);
    double when = PyFloat_AsDouble(args[1]);
    uintptr_t key = (uintptr_t)PyLong_AsVoidPtr(args[2]);
    if (g == NULL || PyErr_Occurred()) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "_add_at: no gate");
        return NULL;
    }
    uint64_t id;
    if (atomic_load_explicit(&pxpy_gil_wanted, memory_order_relaxed) == 0) {
        id = pxpy_add_at(g, when, key);
    } else {
        Py_BEGIN_ALLOW_THREADS
        id = pxpy_add_at(g, when, key);
        pxpy_gil_yield();
        Py_END_ALLOW_THREADS
    }
    return PyLong_FromUnsignedLong(id);
}

_Static_assert(sizeof(unsigned long) == sizeof(uint64_t), "a timer id fits an unsigned long");

static PyObject *fast_cancel(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "_cancel(gate, id)");
        return NULL;
    }
    pxpy_gate *g = PyLong_AsVoidPtr(args[0]);
    /* unsigned long, not long long: CPython converts a long long through a
    ** byte array, three times the work; the _Static_assert keeps it 64 bits. */
    unsigned long id = PyLong_AsUnsignedLong(args[1]);
    if (g == NULL || PyErr_Occurred()) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "_cancel: no gate");
        return NULL;
    }
    int rc;
    if (atomic_load_explicit(&pxpy_gil_wanted, memory_order_relaxed) == 0) {
        rc = pxpy_cancel(g, id);
    } else {
        Py_BEGIN_ALLOW_THREADS
        rc = pxpy_cancel(g, id);
        pxpy_gil_yield();
        Py_END_ALLOW_THREADS
    }
    return PyLong_FromLong(rc);
}

static PyMethodDef fast_methods[] = {
    { "_add_at", (PyCFunction)(void (*)(void))fast_add_at, METH_FASTCALL, NULL },
    { "_cancel", (PyCFunction)(void (*)(void))fast_cancel, METH_FASTCALL, NULL },
    { NULL, NULL, 0, NULL },
};

int pxpy_export(void)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *m = PyImport_AddModule("parataxis._parataxis");   /* borrowed */
    int rc = m == NULL ? -1 : PyModule_AddFunctions(m, fast_methods);
    if (rc != 0)
        PyErr_Clear();
    PyGILState_Release(gil);
    return rc;
}
