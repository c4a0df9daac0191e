/*
** parataxis.i -- the SWIG interface of the bindings.  Lua is its target today:
** `parataxis_core`, the low-level module under bindings/lua/parataxis.lua.
**
** A Lua state is never touched from another thread, so timer handlers do not
** call into Lua: the timer queue's executor is a px_queue, emptied on the Lua
** thread one call at a time by TimerQueue:take(), and each handler only records
** (key, status) for the Lua side to dispatch.  Keys name the Lua functions (kept
** in a Lua table), so no Lua value crosses into C.  Taking one call at a time
** keeps every call the Lua side has not run inside the px_queue, whose
** descriptor is therefore readable exactly while calls wait to be run -- also
** after a Lua handler raised.
**
** A queue the Lua side never closes -- os.exit(code) skips every finalizer, and
** a queue made while lua_close runs the finalizers gets none -- would keep its
** worker running past the end: at exit(), or when lua_close unloads this module
** and with it the worker's code, the exit hook below stops it and says on stderr
** what it owed.
*/
%module parataxis_core

%{
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "parataxis.h"

typedef struct fired { long long key; int status; } fired;

typedef struct TimerQueue {
    px_timerq *tq;
    px_queue *hq;
    px_executor ex;          /* hq as the executor of tq */
    fired *fired;            /* recorded by handlers, not yet taken: fired[head..len) */
    size_t head, len, cap;
    struct TimerQueue *prev, *next;  /* in open_queues while linked */
    pid_t pid;               /* the process that made it */
} TimerQueue;

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
*/
static void exit_hook(void)
{
    pthread_mutex_lock(&open_lock);
    for (TimerQueue *t = open_queues.next; t != &open_queues; t = t->next) {
        size_t pending = px_timerq_pending(t->tq);
        size_t queued = px_queue_size(t->hq) + (t->len - t->head);
        if ((pending > 0 || queued > 0) && t->pid == getpid())
            fprintf(stderr, "parataxis: exit with a TimerQueue not closed: %zu timers "
                    "pending and %zu calls queued are not delivered (close it, or "
                    "exit with os.exit(code, true))\n", pending, queued);
        px_timerq_free(t->tq);
        t->tq = NULL;
    }
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

static int64_t to_ns(double s)
{
    if (!(s >= 0) || s > 9.2e9)
        return -1;
    return (int64_t)(s * 1e9);
}

/* Posted only to keep the descriptor readable while recorded calls wait. */
static void keep_readable(void *arg, int status)
{
    (void)arg;
    (void)status;
}

/*
** Waits for hq without a bound: 1 when calls wait, 0 when a signal ended the
** wait, -1 when poll failed.  One poll: the Lua side loops, so a Lua hook -- the
** interpreter's Ctrl-C handler sets one -- runs between two polls, not never.
*/
static int wait_unbounded(px_queue *hq)
{
    struct pollfd pfd = { .fd = px_queue_fd(hq), .events = POLLIN };
    int r = poll(&pfd, 1, -1);
    if (r > 0)
        return 1;
    return r < 0 && errno == EINTR ? 0 : -1;
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
    if (t->hq == NULL)
        return;
    px_queue_drain(t->hq, 0);        /* frees their args; the calls are dropped */
    t->head = t->len = 0;
    px_queue_free(t->hq);
    t->hq = NULL;
}
%}

/* Ids and keys are 64-bit: Lua integers, never floats (an id above 2^53
** would not survive a double). */
%typemap(in, checkfn="lua_isinteger") long long %{ $1 = (long long)lua_tointeger(L, $input); %}
%typemap(out) long long %{ lua_pushinteger(L, (lua_Integer)$1); SWIG_arg++; %}
%typemap(out) int %{ lua_pushinteger(L, (lua_Integer)$1); SWIG_arg++; %}

/* take() returns the recorded call as two values, key and status, or nothing. */
%typemap(in, numinputs=0) (long long *key, int *status) (long long k = 0, int st = 0)
%{ $1 = &k; $2 = &st; %}
%typemap(argout) (long long *key, int *status)
%{ if (result) { lua_pushinteger(L, (lua_Integer)*$1); lua_pushinteger(L, (lua_Integer)*$2); SWIG_arg += 2; } %}
%typemap(out) int take %{ %}

%rename(version) px_version;
%rename(strerror) px_strerror;
const char *px_version(void);
const char *px_strerror(int code);

%inline %{
/* The library's monotonic clock, in seconds. */
double now(void) { return (double)px_now() / 1e9; }
%}

typedef struct TimerQueue {} TimerQueue;

/* A queue that is closed from the start: no worker, nothing owed, every call
** answers as a closed queue does.  The Lua side puts it in place of a
** collected queue's, for a handler that kept the queue alive. */
%newobject closed_queue;
%inline %{
TimerQueue *closed_queue(void) { return calloc(1, sizeof(TimerQueue)); }
%}

%extend TimerQueue {
    TimerQueue() {
        TimerQueue *t = calloc(1, sizeof *t);
        if (t == NULL)
            return NULL;
        px_timerq_opts o = { 0 };
        if ((t->hq = px_queue_new()) == NULL)
            goto fail;
        t->ex = px_queue_executor(t->hq);
        o.executor = &t->ex;
        if ((t->tq = px_timerq_new(&o)) == NULL)
            goto fail;
        track(t);
        return t;
    fail:
        px_queue_free(t->hq);
        free(t);
        return NULL;
    }
    ~TimerQueue() {
        close_queue($self);
        free($self->fired);
        free($self);
    }
    /* A one-shot timer: its one call records `key` (>= 0).  Returns the id, or
    ** 0 for a bad delay, a closed queue or no memory. */
    long long add(double delay_s, long long key) {
        int64_t ns = to_ns(delay_s);
        if ($self->tq == NULL || ns < 0 || key < 0)
            return 0;
        pending_arg *p = new_arg($self, key);
        if (p == NULL)
            return 0;
        uint64_t id = px_timerq_add($self->tq, ns, on_fire, p);
        if (id == 0)
            free(p);
        return (long long)id;
    }
    /* A periodic timer: its calls record -1 - key, the final aborted one too. */
    long long add_periodic(double first_s, double period_s, long long key) {
        int64_t f = to_ns(first_s), per = to_ns(period_s);
        if ($self->tq == NULL || f < 0 || per <= 0 || key < 0)
            return 0;
        pending_arg *p = new_arg($self, -1 - key);
        if (p == NULL)
            return 0;
        uint64_t id = px_timerq_add_periodic($self->tq, f, per, on_fire, p);
        if (id == 0)
            free(p);
        return (long long)id;
    }
    int cancel(long long id) {
        return $self->tq ? px_timerq_cancel($self->tq, (uint64_t)id) : 0;
    }
    int cancel_all() {
        return $self->tq ? (int)px_timerq_cancel_all($self->tq) : 0;
    }
    int pending() {
        return $self->tq ? (int)px_timerq_pending($self->tq) : 0;
    }
    int fileno() {
        return $self->hq ? px_queue_fd($self->hq) : -1;
    }
    /* Waits up to timeout_s for handler calls, without a bound when timeout_s is
    ** negative or above 9.2e9 s; 1 when some wait, 0 on timeout or when a signal
    ** ended an unbounded wait, -1 when that wait failed (NaN waits 0). */
    int wait(double timeout_s) {
        if ($self->hq == NULL)
            return 0;
        if (timeout_s < 0 || timeout_s > 9.2e9)
            return wait_unbounded($self->hq);
        int64_t ns = to_ns(timeout_s);
        return px_queue_wait($self->hq, ns < 0 ? 0 : ns);
    }
    /* How many calls are queued (a recorded one not yet taken counts too). */
    int size() {
        if ($self->hq == NULL)
            return 0;
        size_t n = px_queue_size($self->hq) + ($self->len - $self->head);
        return n > INT32_MAX ? INT32_MAX : (int)n;
    }
    /* Takes the next call: runs one queued handler, which records what fired,
    ** and returns (key, status); nothing when no call waits. */
    int take(long long *key, int *status) {
        TimerQueue *t = $self;
        if (t->head == t->len) {
            t->head = t->len = 0;
            /* One queued handler records one call (or none: a keep_readable). */
            while (t->hq != NULL && t->len == 0 && px_queue_drain(t->hq, 1) == 1)
                ;
            /* A handler that recorded more than one (a periodic tick and its
            ** final call, made together once the worker has exited) leaves the
            ** rest here, out of hq: keep the descriptor readable until they
            ** are taken.  Should
            ** that post fail (no memory), they still wait here for the next
            ** take; only the descriptor does not show them. */
            if (t->len > 1)
                (void)px_queue_post(t->hq, keep_readable, NULL, 0);
        }
        if (t->head == t->len)
            return 0;
        *key = t->fired[t->head].key;
        *status = t->fired[t->head].status;
        t->head++;
        return 1;
    }
    int closed() {
        return $self->tq == NULL;
    }
    /* Aborts what is pending and stops the worker; the calls it owed wait in
    ** the handler queue for drain().  Later adds fail. */
    void shutdown() {
        shutdown_queue($self);
    }
    /* shutdown(), then frees the handler queue: calls not drained are dropped. */
    void close() {
        close_queue($self);
    }
}
