/*
** parataxis.h -- the whole public C API of libparataxis.
**
** Parataxis gives a program two engines that share one monotonic clock and one
** ordered set of deadlines:
**
**   - the timer queue (px_timerq): a thread-safe queue of one-shot and periodic
**     timers served by one worker thread, whose handlers run exactly once and can
**     be redirected to any executor (px_executor, px_queue);
**   - the deadline timer (px_timer): a reusable timer in the manner of Asio's
**     steady_timer, built on a timer queue.
**
** Conventions, which hold for every function below unless its comment says
** otherwise:
**
**   - Names are px_<noun>_<verb>.  Handles are opaque, made by px_<noun>_new and
**     released by px_<noun>_free; every _free accepts NULL and does nothing.
**   - Errors are negative PX_E* codes; px_strerror() names each one.  Bad input
**     returns a code.  It never aborts, and it never loses a handler.
**   - Durations and deadlines are int64_t nanoseconds on the clock of px_now().
**   - "Thread: any" means any thread may call it at any time; "Parks: no" means the
**     call never waits for another thread except to take a short internal lock.
*/
#ifndef PARATAXIS_H
#define PARATAXIS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(PX_STATIC)
#  define PX_API
#elif defined(PX_BUILDING)
#  define PX_API __attribute__((visibility("default")))
#else
#  define PX_API
#endif

/* ------------------------------------------------------------------------- */
/* Version, errors, clock                                                    */
/* ------------------------------------------------------------------------- */

#define PX_VERSION_MAJOR 0
#define PX_VERSION_MINOR 1
#define PX_VERSION_PATCH 0

/*
** Returns the library's version as a static string "MAJOR.MINOR.PATCH".
** Thread: any.  Parks: no.
*/
PX_API const char *px_version(void);

/* Error codes.  Every one is negative; 0 is success. */
#define PX_EINVAL      (-1)   /* an argument is out of range or NULL */
#define PX_ENOMEM      (-2)   /* out of memory */
#define PX_ETIMEDOUT   (-3)   /* a timeout scope ended the wait */
#define PX_ECANCELED   (-4)   /* cancelled: a handler's status when its timer was aborted */
#define PX_EDEADLK     (-5)   /* the wait could never end */
#define PX_EPERM       (-6)   /* the caller does not own what it tried to release */
#define PX_EBUSY       (-7)   /* the object is in use */
#define PX_EOWNERDEAD  (-8)   /* acquired, but the previous owner ended holding it */
#define PX_ENOFIBER    (-9)   /* the call needs a fiber and there is none */
#define PX_EYIELD      (-10)  /* a hosted fiber must yield to its scheduler now */
#define PX_ECLOSED     (-11)  /* the object is closed or shutting down */
#define PX_EFORKED     (-12)  /* the object belongs to the parent of a fork() */
#define PX_ETHREAD     (-13)  /* called from a thread that may not call it */

/*
** Returns a static English sentence naming error `code` (0 gives "success"; an
** unknown code gives "unknown error").  Thread: any.  Parks: no.
*/
PX_API const char *px_strerror(int code);

#define PX_USEC(n) ((int64_t)(n) * 1000)
#define PX_MSEC(n) ((int64_t)(n) * 1000000)
#define PX_SEC(n)  ((int64_t)(n) * 1000000000)

/*
** Returns the monotonic clock (CLOCK_MONOTONIC) in nanoseconds.  Every deadline
** in the library is on this clock.  Thread: any.  Parks: no.
*/
PX_API int64_t px_now(void);

/* ------------------------------------------------------------------------- */
/* Handlers and executors                                                    */
/* ------------------------------------------------------------------------- */

/*
** A handler.  `status` is 0 when its timer expired and PX_ECANCELED when the timer
** was aborted first (by a cancel, cancel_all or free).  A one-shot handler is
** called exactly once, so that call is the place to release `arg`.
*/
typedef void (*px_handler_fn)(void *arg, int status);

/*
** An executor: where handlers run.  post() must arrange for fn(arg, status) to be
** called once, later, on a thread of the executor's choosing, and return 0; or
** return a negative code, and then the caller runs fn(arg, status) itself at once.
** post() is called from the timer queue's worker thread and must not block for
** long.
*/
typedef struct px_executor {
    int (*post)(void *ctx, px_handler_fn fn, void *arg, int status);
    void *ctx;
} px_executor;

/* ------------------------------------------------------------------------- */
/* The drainable handler queue                                               */
/* ------------------------------------------------------------------------- */

/*
** A px_queue is a thread-safe FIFO of posted handlers that some thread drains: an
** event loop (through the file descriptor of px_queue_fd), a Lua or Python loop,
** or any thread that calls px_queue_wait and px_queue_drain.
*/
typedef struct px_queue px_queue;

/*
** Returns a new, empty queue, or NULL when out of memory or out of file
** descriptors.  Thread: any.  Parks: no.
*/
PX_API px_queue *px_queue_new(void);

/*
** Returns an executor that posts into `q`.  Posting never blocks; it fails with
** PX_ENOMEM (the handler then runs inline in the poster) or PX_ECLOSED.  `q` must
** outlive every timer queue that uses the executor.  Thread: any.  Parks: no.
*/
PX_API px_executor px_queue_executor(px_queue *q);

/*
** Posts fn(arg, status) into `q`.  Returns 0, PX_EINVAL (NULL q or fn) or
** PX_ENOMEM.  Thread: any.  Parks: no.
*/
PX_API int px_queue_post(px_queue *q, px_handler_fn fn, void *arg, int status);

/*
** Runs up to `max` queued handlers (0 means: all that are queued when the call
** starts) on the calling thread, in FIFO order, and returns how many ran; PX_EINVAL
** for NULL.  Handlers may post more; those wait for the next drain.
** Thread: any; each handler runs on the caller.  Parks: no.
*/
PX_API int px_queue_drain(px_queue *q, size_t max);

/*
** Returns a file descriptor that is readable while handlers wait in `q` (an
** eventfd), for epoll, poll, asyncio's add_reader or a Lua loop; PX_EINVAL for
** NULL.  Only px_queue_drain clears it: never read it yourself.  The descriptor
** belongs to the queue and is closed by px_queue_free.  Thread: any.  Parks: no.
*/
PX_API int px_queue_fd(px_queue *q);

/*
** Waits until a handler is queued or `timeout_ns` has passed (negative: forever).
** Returns 1 when handlers wait, 0 on timeout, PX_EINVAL for NULL.
** Thread: any.  Parks: yes, blocks the calling thread.
*/
PX_API int px_queue_wait(px_queue *q, int64_t timeout_ns);

/*
** Returns how many handlers are queued.  Thread: any.  Parks: no.
*/
PX_API size_t px_queue_size(px_queue *q);

/*
** Runs every handler still queued (so that none is lost) and releases `q`.  Nobody
** may post into `q` once this is called.  Thread: any.  Parks: no.
*/
PX_API void px_queue_free(px_queue *q);

/* ------------------------------------------------------------------------- */
/* The timer queue                                                           */
/* ------------------------------------------------------------------------- */

typedef struct px_timerq px_timerq;

typedef struct px_timerq_opts {
    /* Where handlers run.  NULL: on the queue's worker thread.  The executor is
    ** copied; what its ctx points to must outlive the queue. */
    const px_executor *executor;
    /* The worker's timer slack in nanoseconds (Linux PR_SET_TIMERSLACK): how late
    ** the kernel may wake it.  0 selects the library's default (1 us); a negative
    ** value keeps the kernel's default (50 us). */
    int64_t timer_slack_ns;
} px_timerq_opts;

/*
** Returns a new queue with its worker thread started, or NULL when out of memory
** or threads.  `opts` may be NULL.  Thread: any.  Parks: no.
*/
PX_API px_timerq *px_timerq_new(const px_timerq_opts *opts);

/*
** Arms a one-shot timer that calls fn(arg, 0) once `delay_ns` (>= 0) has passed,
** or fn(arg, PX_ECANCELED) if it is aborted first.  A timer never fires early.
**
** Returns the timer's id: never 0, never reused by this queue.  Returns 0 when the
** timer was not added -- NULL q or fn, a negative delay or one that overflows the
** clock, no memory, a queue that is being freed or belongs to the parent of a fork
** -- and then fn is never called.  Thread: any, including handlers of this queue.
** Parks: no.  Wakes the worker only when the earliest deadline moves.
*/
PX_API uint64_t px_timerq_add(px_timerq *q, int64_t delay_ns, px_handler_fn fn, void *arg);

/*
** As px_timerq_add, with an absolute deadline on the clock of px_now(); a deadline
** in the past fires at once.  Returns the id, or 0 as above (a negative deadline
** is bad input).
*/
PX_API uint64_t px_timerq_add_at(px_timerq *q, int64_t deadline, px_handler_fn fn, void *arg);

/*
** Arms a periodic timer: fn(arg, 0) after `first_ns` (>= 0) and then every
** `period_ns` (> 0).  Ticks never overlap; when the handler or the worker runs
** late, the missed ticks coalesce into one and the next tick keeps the original
** phase.  The timer ends with exactly one fn(arg, PX_ECANCELED) call once it is
** cancelled or its queue freed.  Returns the id, or 0 as px_timerq_add.
** Thread: any.  Parks: no.
*/
PX_API uint64_t px_timerq_add_periodic(px_timerq *q, int64_t first_ns, int64_t period_ns,
                                       px_handler_fn fn, void *arg);

/*
** Aborts timer `id`.  Cancel wins until the handler starts: it returns 1 when the
** handler had not started yet -- including when the timer already expired and
** waits in an executor -- and the handler is then called once with PX_ECANCELED
** (on the worker or the executor, never inside this call).  For a periodic timer
** it returns 1 until its final call has started, even while a tick runs; the
** final call follows that tick.  Returns 0 when the handler started or finished,
** the timer was already cancelled, or `id` is unknown.  Returns PX_EINVAL for a
** NULL q and PX_EFORKED in the child of a fork.
** Thread: any, including this queue's handlers (a handler cancelling its own
** one-shot timer gets 0).  Parks: no.
*/
PX_API int px_timerq_cancel(px_timerq *q, uint64_t id);

/*
** Cancels every timer of `q` whose handler has not started, as px_timerq_cancel
** would, and returns how many it cancelled (0 for NULL or in a forked child).
** Thread: any.  Parks: no.
*/
PX_API size_t px_timerq_cancel_all(px_timerq *q);

/*
** Returns how many timers wait for their deadline (0 for NULL).
** Thread: any.  Parks: no.
*/
PX_API size_t px_timerq_pending(px_timerq *q);

/*
** Aborts every timer, delivers every handler call still owed, stops the worker
** and releases `q`.  From any thread but the worker, it returns once the worker
** has delivered every call it owes and exited: handlers that run on the worker
** never run after it returns.  Handlers already posted to an executor run there
** later, with PX_ECANCELED unless they had started.
**
** Called from a handler on the worker itself, it cannot wait for itself: it
** aborts every timer and returns at once, and the worker releases the queue
** after the current handler returns and every owed call is delivered.
**
** In the child of a fork() it releases the memory without running any handler
** (they belong to the parent).  NULL does nothing.  No call on `q` may follow, and
** none may be under way in another thread.  Thread: any.  Parks: yes, it joins the
** worker thread (except when called from it).
*/
PX_API void px_timerq_free(px_timerq *q);

/* ------------------------------------------------------------------------- */
/* The deadline timer                                                        */
/* ------------------------------------------------------------------------- */

/*
** A px_timer groups any number of handlers behind one expiry, like Asio's
** steady_timer: set the expiry, then async_wait as often as needed; all waiters
** of an expiry are called together, through the queue (and its executor).  A new
** timer's expiry is "now", so a wait before any expiry is set completes at once.
*/
typedef struct px_timer px_timer;

/*
** Returns a new timer on `q`, or NULL for NULL q or no memory.  `q` must outlive
** the timer's pending waits.  Thread: any.  Parks: no.
*/
PX_API px_timer *px_timer_new(px_timerq *q);

/*
** Sets the expiry to now + `delay_ns` (>= 0) and aborts the waits pending on the
** previous expiry (each is called with PX_ECANCELED).  Returns how many waits it
** aborted, or PX_EINVAL.  Thread: any.  Parks: no.
*/
PX_API int px_timer_expires_after(px_timer *t, int64_t delay_ns);

/*
** As px_timer_expires_after with an absolute deadline (>= 0) on px_now()'s clock.
*/
PX_API int px_timer_expires_at(px_timer *t, int64_t deadline);

/*
** Returns the current expiry (a deadline on px_now()'s clock), or PX_EINVAL.
** Thread: any.  Parks: no.
*/
PX_API int64_t px_timer_expiry(px_timer *t);

/*
** Adds a waiter: fn(arg, 0) when the expiry is reached, or fn(arg, PX_ECANCELED)
** when the wait is aborted first.  Returns 0, or PX_EINVAL, PX_ENOMEM or
** PX_ECLOSED (its queue is closing) -- and then fn is never called.
** Thread: any.  Parks: no.
*/
PX_API int px_timer_async_wait(px_timer *t, px_handler_fn fn, void *arg);

/*
** Aborts the pending waits (each is called with PX_ECANCELED) and keeps the
** expiry.  Returns how many it aborted, or PX_EINVAL.  Thread: any.  Parks: no.
*/
PX_API int px_timer_cancel(px_timer *t);

/*
** Aborts the pending waits and releases the timer; waits already expiring still
** complete.  NULL does nothing.  Thread: any.  Parks: no.
*/
PX_API void px_timer_free(px_timer *t);

#ifdef __cplusplus
}
#endif

#endif /* PARATAXIS_H */
