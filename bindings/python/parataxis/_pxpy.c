/*
** _pxpy.c -- the C half of the Python binding, compiled into the cffi extension
** parataxis._parataxis next to the code cffi generates from _build_ffi.py, as a
** translation unit of its own: the project's warnings apply here, not there.
** _pxpy.h declares what it gives Python; _core.py uses it.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

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

static void pxpy_run_keys(pxpy_keys *k);

/* Runs the handlers collected so far, in order, and empties `k`. */
static void pxpy_run_collected(pxpy_keys *k)
{
    pxpy_collect = NULL;
    if (k->n > 0) {
        PyGILState_STATE gil = pxpy_gil_take();
        pxpy_run_keys(k);
        PyGILState_Release(gil);
    }
    k->n = 0;
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
** objects that hold it, so a late call always finds it: its memory is a cdata
** of ffi.new, freed when that object is deallocated, never by a finalizer (see
** _new_gate in _core.py).
*/
#define PXPY_SHUT ((size_t)1 << (sizeof(size_t) * 8 - 1))

/* The gate's memory is Python's (see _new_gate in _core.py): struct pxpy_gate is
** defined in _pxpy.h, so that cffi knows its size. */
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
    pxpy_keys keys = { b->key, b->status, 0 };
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
** The timer handles and the hot pair, add and cancel, in C.
**
** TimerHandle is a C type.  It holds the handler (fn), the contextvars copy it
** runs in (ctx), its queue's _State (owner), the Scheduler of a fiber run it
** delivers into (sched, else NULL), the gate, the timer's id and deadline.  Its
** C arg -- the key of pxpy_handler -- is its address: while a call is owed the
** handle is on the live list below, which holds a reference to it, so the key
** stays valid until the final call (a one-shot's only call, a periodic timer's
** aborted one) takes it off.  That call is the release point; nothing else is.
** The type is not tracked by the garbage collector: fn and ctx are dropped at
** the final call, so a cycle through them (a handler that refers to its own
** handle) ends there.
**
** TimerQueue's add and cancel are the C methods of its base class,
** _TimerQueueBase, which keeps in C what they need (the _State, the Scheduler,
** the asyncio loop, the gate's address): one call, no Python frame.  cffi
** would release the GIL around each call and pass a tuple; these keep the GIL,
** which is safe: px_timerq_add_at and px_timerq_cancel never wait for the GIL
** (no thread holds the queue's lock while it takes the GIL: handlers are called
** outside it), and they are short.  The gate is kept as it is: close() in
** another thread waits for it with the GIL released.  Whatever the fast path
** does not cover (a delay that is not a float or int in range, a handler that
** is not callable, an asyncio loop executor, a refusal) goes to Python.
*/
typedef struct pxpy_link {
    struct pxpy_link *prev, *next;
} pxpy_link;

typedef struct pxpy_handle {
    PyObject_HEAD
    pxpy_link live;             /* on pxpy_live while a call is owed */
    PyObject *fn, *ctx;         /* until the final call */
    PyObject *owner;            /* the queue's _State */
    PyObject *sched;            /* a Scheduler held per owed call, or NULL */
    pxpy_gate *gate;
    unsigned long id;           /* 0 until added (a Timer's wait has none) */
    double when;
    char periodic, cancelled;
} pxpy_handle;

_Static_assert(sizeof(unsigned long) == sizeof(uint64_t), "a timer id fits an unsigned long");

/* The handles with a call owed, in no order; the GIL guards it. */
static pxpy_link pxpy_live = { &pxpy_live, &pxpy_live };

/* What _core.py gives (pxpy_setup): its threading.local (its `current` is the
** _State whose handler runs), _refused(code, what) and the largest delay. */
static PyObject *pxpy_tls, *pxpy_refused, *pxpy_str_current;
static double pxpy_too_long;

#define HANDLE(link) ((pxpy_handle *)((char *)(link) - offsetof(pxpy_handle, live)))

static void live_add(pxpy_handle *h)
{
    Py_INCREF(h);
    h->live.next = pxpy_live.next;
    h->live.prev = &pxpy_live;
    pxpy_live.next->prev = &h->live;
    pxpy_live.next = &h->live;
}

static void live_remove(pxpy_handle *h)
{
    h->live.prev->next = h->live.next;
    h->live.next->prev = h->live.prev;
    h->live.prev = h->live.next = NULL;
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

/* The final call: off the live list, fn and ctx handed to the caller (with the
** list's reference to the handle, which the caller drops), the Scheduler's
** hold given back (see TimerQueue.add). */
static pxpy_handle *handle_release(uintptr_t key, PyObject **fn, PyObject **ctx)
{
    pxpy_handle *h = (pxpy_handle *)key;
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
    return h;
}

/* Sets _tls.current; 0, or -1 with the error reported. */
static int set_current(PyObject *owner)
{
    if (PyObject_SetAttr(pxpy_tls, pxpy_str_current, owner) == 0)
        return 0;
    PyErr_WriteUnraisable(pxpy_tls);
    return -1;
}

/*
** The one-shot handlers a batch collected (see pxpy_trampoline): each call is
** its final one, made as ctx.run(fn, aborted).  An exception goes to
** sys.unraisablehook and the rest run.  The calls of a batch are one queue's:
** _tls.current is set when the owner changes, not per handler.
*/
static void pxpy_run_keys(pxpy_keys *k)
{
    PyObject *prev = PyObject_GetAttr(pxpy_tls, pxpy_str_current);
    if (prev == NULL) {
        PyErr_Clear();                  /* not set on this thread: None */
        prev = Py_NewRef(Py_None);
    }
    PyObject *owner = prev;
    for (size_t i = 0; i < k->n; i++) {
        PyObject *fn, *ctx;
        pxpy_handle *h = handle_release(k->key[i], &fn, &ctx);
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

/* _claim(key, status): (fn, ctx, owner) for pxpy_handler, which makes the call;
** for the final call the handle is released (see handle_release). */
static PyObject *fast_claim(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "_claim(key, status)");
        return NULL;
    }
    uintptr_t key = (uintptr_t)PyLong_AsVoidPtr(args[0]);
    long status = PyLong_AsLong(args[1]);
    if (key == 0 || PyErr_Occurred()) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "_claim: no key");
        return NULL;
    }
    pxpy_handle *h = (pxpy_handle *)key;
    if (status == 0 && h->periodic)             /* the handle keeps fn and ctx */
        return PyTuple_Pack(3, h->fn, ctx_tracked(h->ctx), h->owner);
    PyObject *fn, *ctx;
    handle_release(key, &fn, &ctx);
    PyObject *t = PyTuple_Pack(3, fn, ctx, h->owner);
    Py_DECREF(fn);
    Py_DECREF(ctx);
    Py_DECREF(h);
    return t;
}

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

/* The library's add and cancel with the GIL held, handing it over first when a
** C thread waits for it (see pxpy_gil_wanted). */
static uint64_t held_add_at(pxpy_gate *g, double when, uintptr_t key)
{
    if (atomic_load_explicit(&pxpy_gil_wanted, memory_order_relaxed) == 0)
        return pxpy_add_at(g, when, key);
    uint64_t id;
    Py_BEGIN_ALLOW_THREADS
    id = pxpy_add_at(g, when, key);
    pxpy_gil_yield();
    Py_END_ALLOW_THREADS
    return id;
}

static int held_cancel(pxpy_gate *g, uint64_t id)
{
    if (atomic_load_explicit(&pxpy_gil_wanted, memory_order_relaxed) == 0)
        return pxpy_cancel(g, id);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pxpy_cancel(g, id);
    pxpy_gil_yield();
    Py_END_ALLOW_THREADS
    return rc;
}

static PyTypeObject handle_type;

/* A handle with its call owed (on the live list), not yet added. */
static pxpy_handle *handle_new(PyObject *owner, PyObject *sched, pxpy_gate *g, PyObject *fn)
{
    PyObject *ctx = PyContext_CopyCurrent();
    if (ctx == NULL)
        return NULL;
    ctx_untracked(ctx);
    pxpy_handle *h = PyObject_New(pxpy_handle, &handle_type);
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
    h->periodic = h->cancelled = 0;
    live_add(h);
    return h;
}

/* A handle whose call will never be made: off the live list, without a call. */
static void handle_drop(pxpy_handle *h)
{
    live_remove(h);
    Py_CLEAR(h->fn);
    ctx_tracked(h->ctx);
    Py_CLEAR(h->ctx);
    Py_CLEAR(h->sched);
    Py_DECREF(h);
}

static void handle_dealloc(pxpy_handle *h)
{
    Py_XDECREF(h->fn);
    Py_XDECREF(ctx_tracked(h->ctx));
    Py_XDECREF(h->owner);
    Py_XDECREF(h->sched);
    PyObject_Free(h);
}

/* 1 or 0 from px_timerq_cancel as True or False; else the refusal raised. */
static PyObject *cancel_result(int rc, pxpy_handle *h)
{
    if (rc == 1) {
        h->cancelled = 1;
        Py_RETURN_TRUE;
    }
    if (rc == 0)
        Py_RETURN_FALSE;
    return PyObject_CallFunction(pxpy_refused, "is", rc, "TimerQueue");
}

static PyObject *handle_cancel(pxpy_handle *h, PyObject *unused)
{
    (void)unused;
    if (h->gate == NULL)                /* a Timer's wait: not a timer */
        Py_RETURN_FALSE;
    return cancel_result(held_cancel(h->gate, h->id), h);
}

static PyObject *handle_cancelled(pxpy_handle *h, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(h->cancelled);
}

static PyObject *handle_when(pxpy_handle *h, PyObject *unused)
{
    (void)unused;
    return PyFloat_FromDouble(h->when);
}

static PyObject *handle_key(pxpy_handle *h, void *closure)
{
    (void)closure;
    return PyLong_FromVoidPtr(h);
}

static PyObject *handle_repr(pxpy_handle *h)
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

/* For _core.py's slower paths (add_periodic, Timer.async_wait). */
static PyMemberDef handle_members[] = {
    { "_id", T_ULONG, offsetof(pxpy_handle, id), 0, NULL },
    { "_when", T_DOUBLE, offsetof(pxpy_handle, when), 0, NULL },
    { "_periodic", T_BOOL, offsetof(pxpy_handle, periodic), 0, NULL },
    { "_owner", T_OBJECT, offsetof(pxpy_handle, owner), READONLY, NULL },
    { NULL, 0, 0, 0, NULL },
};

static PyGetSetDef handle_getset[] = {
    { "_key", (getter)handle_key, NULL, NULL, NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject handle_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "parataxis.TimerHandle",
    .tp_basicsize = sizeof(pxpy_handle),
    .tp_dealloc = (destructor)handle_dealloc,
    .tp_repr = (reprfunc)handle_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A timer of one TimerQueue, as add() and add_periodic() return it (like\n"
              "asyncio's TimerHandle).  It belongs to its queue: another queue's cancel()\n"
              "does not know it.  It does not keep the queue alive.",
    .tp_methods = handle_methods,
    .tp_members = handle_members,
    .tp_getset = handle_getset,
};

/* _new_call(owner, sched, fn, gate): a handle with its call owed, for a C call
** that _core.py makes itself (add_periodic, Timer.async_wait, whose gate is 0:
** its handle is never shown), with h._key as the arg; _drop_call(h) if that
** call failed. */
static PyObject *fast_new_call(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n != 4) {
        PyErr_SetString(PyExc_TypeError, "_new_call(owner, sched, fn, gate)");
        return NULL;
    }
    pxpy_gate *g = PyLong_AsVoidPtr(args[3]);
    if (g == NULL && PyErr_Occurred())
        return NULL;
    return (PyObject *)handle_new(args[0], args[1], g, args[2]);
}

static PyObject *fast_drop_call(PyObject *self, PyObject *h)
{
    (void)self;
    if (!Py_IS_TYPE(h, &handle_type) || ((pxpy_handle *)h)->live.next == NULL) {
        PyErr_SetString(PyExc_TypeError, "_drop_call: not a handle with a call owed");
        return NULL;
    }
    handle_drop((pxpy_handle *)h);
    Py_RETURN_NONE;
}

/* _live_owners(): the set of the owners (_State) with a call owed. */
static PyObject *fast_live_owners(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *set = PySet_New(NULL);
    for (pxpy_link *l = pxpy_live.next; set != NULL && l != &pxpy_live; l = l->next) {
        if (PySet_Add(set, HANDLE(l)->owner) != 0)
            Py_CLEAR(set);
    }
    return set;
}

/* _live_clear(): in a fork's child, every owed call is the parent's: drop them
** all without a call (and without a Scheduler's unhold: that run is the
** parent's too). */
static PyObject *fast_live_clear(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    while (pxpy_live.next != &pxpy_live) {
        pxpy_handle *h = HANDLE(pxpy_live.next);
        Py_CLEAR(h->sched);
        handle_drop(h);
    }
    Py_RETURN_NONE;
}

/* _setup(tls, refused, too_long), once, from _core.py. */
static PyObject *fast_setup(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "_setup(tls, refused, too_long)");
        return NULL;
    }
    double too_long = PyFloat_AsDouble(args[2]);
    if (too_long == -1 && PyErr_Occurred())
        return NULL;
    Py_XSETREF(pxpy_tls, Py_NewRef(args[0]));
    Py_XSETREF(pxpy_refused, Py_NewRef(args[1]));
    pxpy_too_long = too_long;
    Py_RETURN_NONE;
}

/* The base of TimerQueue: what its add and cancel need, set by TimerQueue's
** __init__ through these members (None until then, `_gp` 0). */
typedef struct pxpy_queue {
    PyObject_HEAD
    PyObject *state;            /* _State */
    PyObject *sched;            /* a Scheduler, or None */
    PyObject *loop;             /* an asyncio loop, or None */
    unsigned long gp;           /* the gate's address, 0 until made */
} pxpy_queue;

_Static_assert(sizeof(unsigned long) == sizeof(void *), "an address fits an unsigned long");

static int queue_traverse(pxpy_queue *q, visitproc visit, void *arg)
{
    Py_VISIT(q->state);
    Py_VISIT(q->sched);
    Py_VISIT(q->loop);
    return 0;
}

static int queue_clear(pxpy_queue *q)
{
    Py_CLEAR(q->state);
    Py_CLEAR(q->sched);
    Py_CLEAR(q->loop);
    return 0;
}

static void queue_dealloc(pxpy_queue *q)
{
    PyObject_GC_UnTrack(q);
    queue_clear(q);
    Py_TYPE(q)->tp_free(q);
}

static int is_set(PyObject *o)
{
    return o != NULL && o != Py_None;
}

/* _arm(delay, fn): add with the arguments checked; TimerQueue.add's end. */
static PyObject *queue_arm(pxpy_queue *q, double delay, PyObject *fn)
{
    if (is_set(q->sched)) {             /* held until the handler's fiber took its call */
        PyObject *r = PyObject_CallMethod(q->sched, "_hold", NULL);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
    }
    pxpy_gate *g = (pxpy_gate *)q->gp;
    pxpy_handle *h = q->state == NULL ? NULL : handle_new(q->state, q->sched, g, fn);
    if (h == NULL) {
        if (q->state == NULL)
            PyErr_SetString(PyExc_RuntimeError, "TimerQueue.__init__ was not called");
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (is_set(q->sched)) {
            PyObject *r = PyObject_CallMethod(q->sched, "_unhold", NULL);
            Py_XDECREF(r);
        }
        PyErr_Restore(type, value, tb); /* the first error wins */
        return NULL;
    }
    h->when = (double)px_now() / 1e9 + delay;
    h->id = g == NULL ? 0 : held_add_at(g, h->when, (uintptr_t)h);
    if (h->id == 0) {                   /* fn will never be called */
        handle_drop(h);
        return PyObject_CallMethod((PyObject *)q, "_not_added", NULL);
    }
    return (PyObject *)h;
}

/* Calls the Python method `name` of the queue with add's or cancel's arguments,
** keywords included. */
static PyObject *queue_slow(pxpy_queue *q, const char *name, PyObject *const *args,
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

static PyObject *queue_add(pxpy_queue *q, PyObject *const *args, Py_ssize_t n,
                           PyObject *kwnames)
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
        if (delay >= 0 && delay < pxpy_too_long)
            return queue_arm(q, delay, args[1]);
    }
    return queue_slow(q, "_add_slow", args, n, kwnames);
}

static PyObject *queue_arm_method(pxpy_queue *q, PyObject *const *args, Py_ssize_t n)
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

static PyObject *queue_cancel(pxpy_queue *q, PyObject *const *args, Py_ssize_t n,
                              PyObject *kwnames)
{
    if (n != 1 || kwnames != NULL)
        return queue_slow(q, "_cancel_slow", args, n, kwnames);
    pxpy_handle *h = (pxpy_handle *)args[0];
    if (!Py_IS_TYPE(h, &handle_type)) {
        PyErr_Format(PyExc_TypeError, "the timer id must be the TimerHandle that add() or "
                     "add_periodic() returned, not %s", Py_TYPE(h)->tp_name);
        return NULL;
    }
    if (h->owner != q->state || h->gate == NULL)
        return queue_slow(q, "_cancel_slow", args, n, kwnames);   /* another queue's */
    int rc = held_cancel(h->gate, h->id);
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
    { NULL, NULL, 0, NULL },
};

static PyMemberDef queue_members[] = {
    { "_state", T_OBJECT, offsetof(pxpy_queue, state), 0, NULL },
    { "_sched", T_OBJECT, offsetof(pxpy_queue, sched), 0, NULL },
    { "_loop", T_OBJECT, offsetof(pxpy_queue, loop), 0, NULL },
    { "_gp", T_ULONG, offsetof(pxpy_queue, gp), 0, NULL },
    { NULL, 0, 0, 0, NULL },
};

static PyTypeObject queue_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "parataxis._parataxis._TimerQueueBase",
    .tp_basicsize = sizeof(pxpy_queue),
    .tp_dealloc = (destructor)queue_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "TimerQueue's add and cancel, in C (see _pxpy.c).",
    .tp_traverse = (traverseproc)queue_traverse,
    .tp_clear = (inquiry)queue_clear,
    .tp_methods = queue_methods,
    .tp_members = queue_members,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef fast_methods[] = {
    { "_setup", (PyCFunction)(void (*)(void))fast_setup, METH_FASTCALL, NULL },
    { "_claim", (PyCFunction)(void (*)(void))fast_claim, METH_FASTCALL, NULL },
    { "_new_call", (PyCFunction)(void (*)(void))fast_new_call, METH_FASTCALL, NULL },
    { "_drop_call", fast_drop_call, METH_O, NULL },
    { "_live_owners", fast_live_owners, METH_NOARGS, NULL },
    { "_live_clear", fast_live_clear, METH_NOARGS, NULL },
    { NULL, NULL, 0, NULL },
};

int pxpy_export(void)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *m = PyImport_AddModule("parataxis._parataxis");   /* borrowed */
    int rc = m == NULL ? -1 : PyModule_AddFunctions(m, fast_methods);
    if (rc == 0 && pxpy_str_current == NULL)
        rc = (pxpy_str_current = PyUnicode_InternFromString("current")) == NULL ? -1 : 0;
    if (rc == 0)
        rc = PyType_Ready(&handle_type);
    if (rc == 0)
        rc = PyType_Ready(&queue_type);
    if (rc == 0)
        rc = PyModule_AddObjectRef(m, "TimerHandle", (PyObject *)&handle_type);
    if (rc == 0)
        rc = PyModule_AddObjectRef(m, "_TimerQueueBase", (PyObject *)&queue_type);
    if (rc != 0)
        PyErr_Clear();
    PyGILState_Release(gil);
    return rc;
}
