/*
** pxswig.c -- the C half of the SWIG module parataxis_core (src/parataxis.i
** says what the module is for and how it works).  It lives here, not in the
** interface file, so that the project's warnings apply to it; SWIG's generated
** wrapper, compiled without them, only calls the functions of pxswig.h.
*/
#define _POSIX_C_SOURCE 200809L     /* pthread_atfork, getpid */

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "parataxis.h"
#include "pxhost.h"
#include "pxlua_exec.h"
#include "pxswig.h"

/* A call recorded: what fired, how, and when the worker queued it (see stamp). */
typedef struct fired { long long key; int status; double posted; } fired;

struct TimerQueue {
    px_timerq *tq;
    px_queue *hq;
    px_executor ex;          /* hq, or run_ex through queue_post, as the executor of tq */
    pxhost_exec *run_ex;      /* px.scheduler()'s run, for a queue made by pxswig_queue_on */
    fired *fired;            /* recorded by handlers, not yet taken: fired[head..len) */
    double posted;           /* of the call being made (stamp), else HUGE_VAL */
    size_t head, len, cap;
    struct TimerQueue *prev, *next;  /* in open_queues while linked */
    pid_t pid;               /* the process that made it */
};

/*
** Every queue not yet closed, for the exit hook.  The lock also guards the
** swap of tq in shutdown_queue, so that the hook and a close never both free it.
** The hook runs on the thread that calls exit(): os.exit runs on the Lua
** thread, which then touches no queue; an exit() from another thread while a
** Lua thread still uses its queues is a race no hook can make safe.
*/
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static TimerQueue open_queues = { .prev = &open_queues, .next = &open_queues };
static pthread_once_t hook_once = PTHREAD_ONCE_INIT;

/*
** At exit(), or when the module is unloaded: stops the worker of every queue
** still open, and reports on stderr each one that owed calls, which no Lua code
** can run any more.  The calls stay in hq, not run: its handlers only record.
**
** Whether a queue owed calls is decided once its worker is stopped, not from a
** snapshot of the running queue: a timer the worker has taken out of the set
** but not yet posted to hq is in neither px_timerq_pending nor hq's size, so a
** snapshot taken then saw nothing owed and the queue went unreported.  Once
** px_timerq_free returns, every call the queue owed is in hq (or recorded); the
** snapshot of pending taken before only splits that total for the message.
** The hook runs on the Lua thread, which drains no hq meanwhile.
*/
static void report_unclosed(TimerQueue *t)
{
    size_t pending = px_timerq_pending(t->tq);
    px_timerq_free(t->tq);
    t->tq = NULL;
    size_t owed = px_queue_size(t->hq) + (t->len - t->head);
    if (owed == 0 || t->pid != getpid())
        return;
    if (pending > owed)
        pending = owed;
    fprintf(stderr, "parataxis: exit with a TimerQueue not closed: %zu timers "
            "pending and %zu calls queued are not delivered (close it, or "
            "exit with os.exit(code, true))\n", pending, owed - pending);
}

static void exit_hook(void)
{
    pthread_mutex_lock(&open_lock);
    for (TimerQueue *t = open_queues.next; t != &open_queues; t = t->next)
        report_unclosed(t);
    pthread_mutex_unlock(&open_lock);
}

/* A child of fork() must not find the lock held by a thread it does not have. */
static void lock_open(void) { pthread_mutex_lock(&open_lock); }
static void unlock_open(void) { pthread_mutex_unlock(&open_lock); }

static void install_hook(void)
{
    /* From a module, atexit also runs the hook when the module is unloaded. */
    (void)atexit(exit_hook);
    (void)pthread_atfork(lock_open, unlock_open, unlock_open);
}

static void track(TimerQueue *t)
{
    (void)pthread_once(&hook_once, install_hook);
    t->pid = getpid();
    pthread_mutex_lock(&open_lock);
    t->prev = open_queues.prev;
    t->next = &open_queues;
    t->prev->next = t;
    open_queues.prev = t;
    pthread_mutex_unlock(&open_lock);
}

static void untrack(TimerQueue *t)
{
    pthread_mutex_lock(&open_lock);
    if (t->next != NULL) {
        t->prev->next = t->next;
        t->next->prev = t->prev;
        t->prev = t->next = NULL;
    }
    pthread_mutex_unlock(&open_lock);
}

typedef struct pending_arg { TimerQueue *owner; long long key; } pending_arg;

/* Runs on the Lua thread, inside px_queue_drain. */
static void on_fire(void *arg, int status)
{
    pending_arg *p = arg;
    TimerQueue *t = p->owner;
    if (t->len == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        fired *f = realloc(t->fired, cap * sizeof *f);
        if (f == NULL)
            abort();   /* cannot lose a handler call, cannot report it either */
        t->fired = f;
        t->cap = cap;
    }
    t->fired[t->len].key = p->key;
    t->fired[t->len].status = status;
    t->fired[t->len].posted = t->posted;
    t->len++;
    if (status != 0 || p->key >= 0)  /* a one-shot's call, a periodic's last */
        free(p);
}

static pending_arg *new_arg(TimerQueue *t, long long key)
{
    pending_arg *p = malloc(sizeof *p);
    if (p) {
        p->owner = t;
        p->key = key;
    }
    return p;
}

/* Seconds to the C API's nanoseconds by the bindings' one rule (pxhost_ns:
** 2^63 ns or more, inf too, saturates to INT64_MAX, "never": such a timer
** never fires and is cancelled like any other), or -1 when s is negative or NaN. */
static int64_t to_ns(double s)
{
    int64_t ns;
    return pxhost_ns(s, &ns) == 0 ? ns : -1;
}

/* Posted only to keep the descriptor readable while recorded calls wait. */
static void keep_readable(void *arg, int status)
{
    (void)arg;
    (void)status;
}

/* Stops the timer queue: every call it still owed is in hq when this returns. */
static void shutdown_queue(TimerQueue *t)
{
    pthread_mutex_lock(&open_lock);
    px_timerq *tq = t->tq;
    t->tq = NULL;
    pthread_mutex_unlock(&open_lock);
    px_timerq_free(tq);
}

static void close_queue(TimerQueue *t)
{
    shutdown_queue(t);
    untrack(t);
    pxhost_exec_unref(t->run_ex);     /* no post comes any more */
    t->run_ex = NULL;
    if (t->hq == NULL)
        return;
    px_queue_drain(t->hq, 0);        /* frees their args; the calls are dropped */
    t->head = t->len = 0;
    px_queue_free(t->hq);
    t->hq = NULL;
}

/* The library's monotonic clock, in seconds. */
double pxswig_now(void)
{
    return (double)px_now() / 1e9;
}

/* A queue that is closed from the start: no worker, nothing owed, every call
** answers as a closed queue does. */
TimerQueue *pxswig_closed_queue(void)
{
    return calloc(1, sizeof(TimerQueue));
}

/*
** The executor of a plain queue: each call goes to hq with the time the worker
** queued it (px_now, in seconds), which on_fire records and take returns.  A
** periodic tick's Lua handler runs once its C call is over, so the worker arms
** the next tick before that handler runs: a tick queued before the handler
** returned is one that C's worker would have skipped, and the Lua side
** coalesces it (parataxis.lua, run_one).  Without memory for the stamp the
** call goes to hq as it is, with no stamp (HUGE_VAL: never coalesced).
*/
typedef struct stamped {
    TimerQueue *t;
    px_handler_fn fn;
    void *arg;
    double posted;
} stamped;

static void unstamp(void *arg, int status)
{
    stamped w = *(stamped *)arg;
    free(arg);
    w.t->posted = w.posted;
    w.fn(w.arg, status);
    w.t->posted = HUGE_VAL;
}

static int stamp_post(void *ctx, px_handler_fn fn, void *arg, int status)
{
    TimerQueue *t = ctx;
    stamped *w = malloc(sizeof *w);
    if (w == NULL)
        return px_queue_post(t->hq, fn, arg, status);
    *w = (stamped){ t, fn, arg, pxswig_now() };
    int rc = px_queue_post(t->hq, unstamp, w, status);
    if (rc != 0)
        free(w);
    return rc;
}

/*
** The executor of a queue on px.scheduler(): each call goes to the run, to
** start as a fiber there; once the run is over it waits in hq, aborted (the
** trampoline then gives the handler PX_ECANCELED, a periodic's final call),
** for the Lua thread's run/drain/close.  On the worker: only C.
*/
static int queue_post(void *ctx, px_handler_fn fn, void *arg, int status)
{
    TimerQueue *t = ctx;
    if (pxlua_exec_post(t->run_ex, t, fn, arg, status) == 0)
        return 0;
    return px_queue_post(t->hq, fn, arg, PX_ECANCELED);
}

static TimerQueue *new_queue(pxhost_exec *x)
{
    TimerQueue *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->posted = HUGE_VAL;
    px_timerq_opts o = { 0 };
    if ((t->hq = px_queue_new()) == NULL)
        goto fail;
    if (x != NULL) {
        t->run_ex = x;
        t->ex = (px_executor){ .post = queue_post, .ctx = t };
    } else {
        t->ex = (px_executor){ .post = stamp_post, .ctx = t };
    }
    o.executor = &t->ex;
    if ((t->tq = px_timerq_new(&o)) == NULL)
        goto fail;
    if (x != NULL)
        pxhost_exec_ref(x);
    track(t);
    return t;
fail:
    px_queue_free(t->hq);
    free(t);
    return NULL;
}

TimerQueue *pxswig_queue_on(pxhost_exec *x)
{
    return new_queue(x);
}

int pxswig_deliver(TimerQueue *t, px_handler_fn fn, void *arg, int status,
                   long long *key, int *st)
{
    size_t len = t->len;
    fn(arg, status);                 /* on_fire records it at fired[len] */
    if (t->len == len)
        return 0;
    t->len--;
    *key = t->fired[t->len].key;
    *st = t->fired[t->len].status;
    return 1;
}

void pxswig_give_back(TimerQueue *t, px_handler_fn fn, void *arg)
{
    if (t->hq == NULL || px_queue_post(t->hq, fn, arg, PX_ECANCELED) != 0)
        fn(arg, PX_ECANCELED);       /* recorded for take; on the Lua thread */
}

long long TimerQueue_ident(TimerQueue *t)
{
    return (long long)(intptr_t)t;
}

/* The methods of TimerQueue, named as SWIG's %extend expects them. */

TimerQueue *new_TimerQueue(void)
{
    return new_queue(NULL);
}

void delete_TimerQueue(TimerQueue *t)
{
    close_queue(t);
    free(t->fired);
    free(t);
}

long long TimerQueue_add(TimerQueue *t, double delay_s, long long key)
{
    int64_t ns = to_ns(delay_s);
    if (t->tq == NULL || ns < 0 || key < 0)
        return 0;
    pending_arg *p = new_arg(t, key);
    if (p == NULL)
        return 0;
    uint64_t id = px_timerq_add(t->tq, ns, on_fire, p);
    if (id == 0)
        free(p);
    return (long long)id;
}

long long TimerQueue_add_periodic(TimerQueue *t, double first_s, double period_s, long long key)
{
    int64_t f = to_ns(first_s), per = to_ns(period_s);
    if (t->tq == NULL || f < 0 || per <= 0 || key < 0)
        return 0;
    pending_arg *p = new_arg(t, -1 - key);
    if (p == NULL)
        return 0;
    uint64_t id = px_timerq_add_periodic(t->tq, f, per, on_fire, p);
    if (id == 0)
        free(p);
    return (long long)id;
}

int TimerQueue_cancel(TimerQueue *t, long long id)
{
    return t->tq ? px_timerq_cancel(t->tq, (uint64_t)id) : 0;
}

int TimerQueue_cancel_all(TimerQueue *t)
{
    return t->tq ? (int)px_timerq_cancel_all(t->tq) : 0;
}

int TimerQueue_pending(TimerQueue *t)
{
    return t->tq ? (int)px_timerq_pending(t->tq) : 0;
}

int TimerQueue_fileno(TimerQueue *t)
{
    return t->hq ? px_queue_fd(t->hq) : -1;
}

int TimerQueue_wait(TimerQueue *t, double timeout_s)
{
    if (t->hq == NULL)
        return 0;
    int64_t ns = to_ns(timeout_s);
    if (timeout_s < 0 || ns == INT64_MAX) {
        /* One wait that a signal ends: the Lua side loops, so a Lua hook --
        ** the interpreter's Ctrl-C handler sets one -- runs between two. */
        int r = px_queue_wait_intr(t->hq, -1);
        return r == PX_EINTR ? 0 : r == 1 ? 1 : -1;
    }
    return px_queue_wait(t->hq, ns < 0 ? 0 : ns);
}

int TimerQueue_size(TimerQueue *t)
{
    if (t->hq == NULL)
        return 0;
    size_t n = px_queue_size(t->hq) + (t->len - t->head);
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

int TimerQueue_take(TimerQueue *t, long long *key, int *status, double *posted)
{
    if (t->head == t->len) {
        t->head = t->len = 0;
        /* One queued handler records one call (or none: a keep_readable). */
        while (t->hq != NULL && t->len == 0 && px_queue_drain(t->hq, 1) == 1)
            ;
        /* A handler that recorded more than one (a periodic tick and its
        ** final call, made together once the worker has exited) leaves the
        ** rest here, out of hq: keep the descriptor readable until they
        ** are taken.  Should that post fail (no memory), they still wait
        ** here for the next take; only the descriptor does not show them. */
        if (t->len > 1)
            (void)px_queue_post(t->hq, keep_readable, NULL, 0);
    }
    if (t->head == t->len)
        return 0;
    *key = t->fired[t->head].key;
    *status = t->fired[t->head].status;
    *posted = t->fired[t->head].posted;
    t->head++;
    return 1;
}

int TimerQueue_closed(TimerQueue *t)
{
    return t->tq == NULL;
}

void TimerQueue_shutdown(TimerQueue *t)
{
    shutdown_queue(t);
}

void TimerQueue_close(TimerQueue *t)
{
    close_queue(t);
}
