"""Generate the C source of the cffi extension parataxis._parataxis (API mode).

Run at build time by python/CMakeLists.txt:  python _build_ffi.py OUT.c
CMake then compiles OUT.c as a Python module and links it to libparataxis.so.
"""
import sys

import cffi

CDEF = r"""
typedef void (*px_handler_fn)(void *arg, int status);
typedef struct px_executor {
    int (*post)(void *ctx, px_handler_fn fn, void *arg, int status);
    void *ctx;
    void (*flush)(void *ctx);
} px_executor;

#define PX_EINVAL     ...
#define PX_ENOMEM     ...
#define PX_ETIMEDOUT  ...
#define PX_ECANCELED  ...
#define PX_EDEADLK    ...
#define PX_EPERM      ...
#define PX_EBUSY      ...
#define PX_EOWNERDEAD ...
#define PX_ENOFIBER   ...
#define PX_EYIELD     ...
#define PX_ECLOSED    ...
#define PX_EFORKED    ...
#define PX_ETHREAD    ...

const char *px_version(void);
const char *px_strerror(int code);
int64_t px_now(void);

typedef struct px_queue px_queue;
px_queue *px_queue_new(void);
px_executor px_queue_executor(px_queue *q);
int px_queue_post(px_queue *q, px_handler_fn fn, void *arg, int status);
int px_queue_drain(px_queue *q, size_t max);
int pxpy_queue_drain(px_queue *q, size_t max);
void pxpy_drain_stop(void);
int px_queue_fd(px_queue *q);
int px_queue_wait(px_queue *q, int64_t timeout_ns);
size_t px_queue_size(px_queue *q);
void px_queue_free(px_queue *q);

typedef struct px_timerq px_timerq;
typedef struct px_timerq_opts {
    const px_executor *executor;
    int64_t timer_slack_ns;
    int64_t abort_linger_ns;
} px_timerq_opts;
px_timerq *px_timerq_new(const px_timerq_opts *opts);
uint64_t px_timerq_add(px_timerq *q, int64_t delay_ns, px_handler_fn fn, void *arg);
uint64_t px_timerq_add_at(px_timerq *q, int64_t deadline, px_handler_fn fn, void *arg);
uint64_t px_timerq_add_periodic(px_timerq *q, int64_t first_ns, int64_t period_ns,
                                px_handler_fn fn, void *arg);
int px_timerq_cancel(px_timerq *q, uint64_t id);
size_t px_timerq_cancel_all(px_timerq *q);
size_t px_timerq_pending(px_timerq *q);
void px_timerq_free(px_timerq *q);

typedef struct px_timer px_timer;
px_timer *px_timer_new(px_timerq *q);
int px_timer_expires_after(px_timer *t, int64_t delay_ns);
int px_timer_expires_at(px_timer *t, int64_t deadline);
int64_t px_timer_expiry(px_timer *t);
int px_timer_async_wait(px_timer *t, px_handler_fn fn, void *arg);
int px_timer_cancel(px_timer *t);
void px_timer_free(px_timer *t);

/* Python callbacks (extern "Python": compiled, no ffi.callback).  A handler's C
** arg is the key (an int) under which the Python side keeps the call alive:
** ints cross the boundary faster than ffi handles. */
extern "Python" void pxpy_handler(uintptr_t key, int status);
uint64_t pxpy_add(px_timerq *q, int64_t delay_ns, uintptr_t key);
uint64_t pxpy_add_periodic(px_timerq *q, int64_t first_ns, int64_t period_ns, uintptr_t key);
int pxpy_timer_wait(px_timer *t, uintptr_t key);
extern "Python" int pxpy_post(void *ctx, px_handler_fn fn, void *arg, int status);

/* The C trampoline a concurrent.futures worker calls: fn(arg, status). */
void pxpy_invoke(px_handler_fn fn, void *arg, int status);

/* The executor of a queue whose handlers run on its worker or go to a
** concurrent.futures executor: a batch at a time under one hold of the GIL. */
typedef struct pxpy_keys {
    uintptr_t *key;
    int *status;
    size_t n, done;
} pxpy_keys;
extern "Python" void pxpy_run_keys(pxpy_keys *k);

typedef struct pxpy_batch pxpy_batch;
pxpy_batch *pxpy_batch_new(px_executor inner);
px_executor pxpy_batch_executor(pxpy_batch *b);
void pxpy_batch_free(pxpy_batch *b);
"""

SOURCE = r"""
#include <Python.h>
#include <stdlib.h>

#include "parataxis.h"

static void pxpy_handler(uintptr_t key, int status);   /* made by cffi below */

typedef struct pxpy_keys {
    uintptr_t *key;
    int *status;
    size_t n, done;
} pxpy_keys;
static void pxpy_run_keys(pxpy_keys *k);               /* made by cffi below */

/* While a batch runs on a worker (pxpy_batch_flush), one-shot handlers are not
** called one by one: their (key, status) pairs are kept here and handed to Python
** in one call after the batch, which saves a cffi callback (about 0.4 us) each.
** The library has already decided their status (the handler has started, as far
** as cancel is concerned).  Periodic ticks are called at once, so that the next
** tick is armed only after the handler returned. */
static _Thread_local pxpy_keys *pxpy_collect;
static _Thread_local size_t pxpy_collect_cap;

static void pxpy_invoke(px_handler_fn fn, void *arg, int status)
{
    fn(arg, status);
}

/* Runs the handlers collected so far, in order, and empties `k`.  An exception
** leaves pxpy_run_keys (cffi reports it through sys.unraisablehook) with `done`
** just past that handler: go on from there. */
static void pxpy_run_collected(pxpy_keys *k)
{
    pxpy_collect = NULL;
    while (k->done < k->n) {
        size_t before = k->done;
        pxpy_run_keys(k);
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
    pxpy_handler(key, status);
    pxpy_collect = collecting;
}

/*
** HandlerQueue.drain: px_queue_drain one call at a time, so that a handler that
** raises KeyboardInterrupt or SystemExit (Python then calls pxpy_drain_stop)
** ends the drain right after it, with every later call still queued, in order,
** and the queue's fd still readable.  Nested drains keep their own flag.
*/
static _Thread_local int pxpy_stop;

static void pxpy_drain_stop(void)
{
    pxpy_stop = 1;
}

static int pxpy_queue_drain(px_queue *q, size_t max)
{
    size_t budget = max ? max : px_queue_size(q);
    int outer = pxpy_stop, done = 0;
    pxpy_stop = 0;
    while ((size_t)done < budget && done < INT32_MAX && !pxpy_stop) {
        int n = px_queue_drain(q, 1);
        if (n <= 0) {
            if (done == 0)
                done = n;               /* PX_EINVAL for a NULL queue, or 0 */
            break;
        }
        done++;
    }
    pxpy_stop = outer;
    return done;
}

/* The px_handler_fn of a periodic Python handler: hands the key to Python. */
static void pxpy_trampoline_now(void *arg, int status)
{
    pxpy_call_now((uintptr_t)arg, status);
}

/* The px_handler_fn of a one-shot Python handler: kept for the batch's one call
** into Python when a batch is collecting and has room, else called at once. */
static void pxpy_trampoline(void *arg, int status)
{
    pxpy_keys *k = pxpy_collect;
    if (k == NULL || k->n == pxpy_collect_cap) {
        pxpy_call_now((uintptr_t)arg, status);
        return;
    }
    k->key[k->n] = (uintptr_t)arg;
    k->status[k->n] = status;
    k->n++;
}

static uint64_t pxpy_add(px_timerq *q, int64_t delay_ns, uintptr_t key)
{
    return px_timerq_add(q, delay_ns, pxpy_trampoline, (void *)key);
}

static uint64_t pxpy_add_periodic(px_timerq *q, int64_t first_ns, int64_t period_ns,
                                  uintptr_t key)
{
    return px_timerq_add_periodic(q, first_ns, period_ns, pxpy_trampoline_now, (void *)key);
}

static int pxpy_timer_wait(px_timer *t, uintptr_t key)
{
    return px_timer_async_wait(t, pxpy_trampoline, (void *)key);
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

static pxpy_batch *pxpy_batch_new(px_executor inner)
{
    pxpy_batch *b = calloc(1, sizeof *b);
    if (b != NULL)
        b->inner = inner;
    return b;
}

static void pxpy_batch_free(pxpy_batch *b)
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
    PyGILState_STATE gil = PyGILState_Ensure();
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

static px_executor pxpy_batch_executor(pxpy_batch *b)
{
    px_executor e = { pxpy_batch_post, b, pxpy_batch_flush };
    return e;
}
"""


def make_ffi() -> cffi.FFI:
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source("parataxis._parataxis", SOURCE)
    return ffi


if __name__ == "__main__":
    make_ffi().emit_c_code(sys.argv[1])
