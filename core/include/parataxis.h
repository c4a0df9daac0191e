/*
** parataxis.h -- the whole public C API of libparataxis, and its reference:
** docs/c-api.md is generated from the comments of this file (docs/gen_capi.py).
**
** Parataxis has three parts, which share one monotonic clock and one ordered
** set of deadlines:
**
**   - the timer queue (px_timerq): a thread-safe queue of one-shot and periodic
**     timers served by one worker thread, whose handlers run exactly once and can
**     be redirected to any executor (px_executor, px_queue); with it the
**     deadline timer (px_timer), a reusable timer in the manner of Asio's
**     steady_timer;
**   - the fiber engine (px_sched, px_fiber): cooperative fibers on one thread
**     per scheduler, with sleeps, joins, timeout and cancellation scopes, and
**     the park/wake contract on which every wait is built;
**   - the synchronization family (px_mutex, px_rwlock, px_waitgroup,
**     px_barrier, px_once, px_sem, px_event, px_chan): primitives that park the
**     fiber, never the thread.
**
** Conventions, which hold for every function below unless its comment says
** otherwise:
**
**   - Names are px_<noun>_<verb>; a call on "the calling fiber" has no noun
**     (px_spawn, px_join, px_park, px_sleep, px_self).  Handles are opaque,
**     made by px_<noun>_new and released by px_<noun>_free.  Every _free accepts
**     NULL and does nothing with it.  No call on an object may follow its _free,
**     and none may still be under way in another thread when _free is called.
**   - Errors are negative PX_E* codes and 0 is success; px_strerror() says
**     what each one means, px_errname() spells its name.  A call that returns
**     a count or a flag returns it as a non-negative number; one that returns
**     a pointer or an id returns NULL or 0 when it fails, and its comment says
**     why.  Bad input returns a code: the library never aborts on it and
**     never loses a handler.  What no code can detect -- a freed or foreign
**     handle, a handle released twice -- is undefined behaviour, as in libc.
**   - The synchronization family differs in two ways: px_<kind>_new returns NULL
**     with errno set (EINVAL for a bad argument, ENOMEM), and px_<kind>_free
**     returns an int: 0 (NULL included), or PX_EBUSY when the object is held or
**     waited on, and then it frees nothing.
**   - Durations and deadlines are int64_t nanoseconds on the clock of px_now().
**     A duration is relative to the call; a deadline is a px_now() value.  A
**     negative duration is bad input unless the comment says otherwise, and a
**     past deadline is simply due.  A duration whose deadline would pass
**     INT64_MAX saturates: it means "never" (it is accepted, never comes due
**     early, and never overflows).  A tolerance (timer_slack_ns,
**     abort_linger_ns) says how late a wake-up may come, not when; more than
**     1 s is taken as 1 s, since an unbounded one would stall handlers.
**   - Ids are never reused: a timer id is never 0 and never handed out again by
**     its queue (two queues may hand out the same number); a fiber id is never
**     0 and never handed out again in the process.  A call given a stale or
**     unknown id does nothing and returns 0.
**   - A handler that the library accepted is called exactly once (a periodic
**     one: once per tick, then once with PX_ECANCELED), so that call is the
**     place to release its `arg`.
**   - After fork(), the child may not use any object made before the fork (the
**     threads that served it are gone): every call on one returns PX_EFORKED (or
**     0 / NULL, as its comment says) before touching it, and its _free releases
**     only what the child can safely release.  Objects made in the child work.
**   - "Thread: any" means any thread may call it at any time, concurrently with
**     any other call except the object's _free.  "Thread: scheduler" and "the
**     scheduler's" thread are defined with the fiber engine below.
**   - "Parks: no" means the call never waits for another thread except to take
**     a short internal lock; "Parks: yes" (fiber engine) means it may suspend
**     the calling fiber, never the thread; "Parks: blocks the thread" means it
**     waits in the kernel and holds up the whole OS thread, and with it every
**     fiber of a scheduler running there.
*/
#ifndef PARATAXIS_H
#define PARATAXIS_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
** Every function is declared PX_API, which is empty for users of the shared
** library.  Define PX_STATIC when linking the static library by hand (the CMake
** target parataxis::parataxis_static defines it); PX_BUILDING is the library's
** own build flag.  The header is C11 and declares everything extern "C" in C++.
*/
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
** The PX_VERSION_* macros give the version of the header compiled against;
** px_version() returns the version of the library linked against, as a static
** string "MAJOR.MINOR.PATCH" (do not free it).  The shared library's SONAME is
** libparataxis.so.MAJOR.  Thread: any.  Parks: no.
*/
PX_API const char *px_version(void);

/* Error codes.  Every one is negative; 0 is success. */
#define PX_EINVAL      (-1)   /* an argument is out of range or NULL, or the call does not
                                 fit the object's state (an unhold without a hold) */
#define PX_ENOMEM      (-2)   /* out of memory; nothing was done */
#define PX_ETIMEDOUT   (-3)   /* a timeout scope ended the wait */
#define PX_ECANCELED   (-4)   /* cancelled: a handler's status when its timer or wait was
                                 aborted; a wait's return when a token ended it */
#define PX_EDEADLK     (-5)   /* the wait could never end */
#define PX_EPERM       (-6)   /* the caller does not own what it tried to release */
#define PX_EBUSY       (-7)   /* the object is in use */
#define PX_EOWNERDEAD  (-8)   /* acquired (the caller holds it now), but the previous
                                 owner ended holding it: the state may be torn */
#define PX_ENOFIBER    (-9)   /* the call needs a fiber and there is none */
#define PX_EYIELD      (-10)  /* a hosted fiber must yield to its scheduler now */
#define PX_ECLOSED     (-11)  /* the object is closed or shutting down */
#define PX_EFORKED     (-12)  /* the object belongs to the parent of a fork() */
#define PX_ETHREAD     (-13)  /* called from a thread that may not call it */
#define PX_EINTR       (-14)  /* a signal interrupted a wait; call again once handled */
#define PX_ENOTSUP     (-15)  /* the object cannot do that: an fd epoll refuses (a regular
                                 file) */

/*
** Returns a static English sentence naming error `code` (0 gives "success"; any
** other value not above, positive ones included, gives "unknown error").  Do not
** free it.  Thread: any.  Parks: no.
*/
PX_API const char *px_strerror(int code);

/*
** Returns the name of error `code` as it is spelled here without "PX_"
** ("EINVAL" for PX_EINVAL), for a binding's error objects and for logs;
** "EUNKNOWN" for 0 and any value that is no PX_E* code.  A static string: do
** not free it.  Thread: any.  Parks: no.
*/
PX_API const char *px_errname(int code);

/* Nanoseconds from microseconds, milliseconds, seconds.  They do not check for
** overflow: PX_SEC(n) overflows for n beyond about 9.2e9 (292 years). */
#define PX_USEC(n) ((int64_t)(n) * 1000)
#define PX_MSEC(n) ((int64_t)(n) * 1000000)
#define PX_SEC(n)  ((int64_t)(n) * 1000000000)

/*
** Returns the monotonic clock (CLOCK_MONOTONIC) in nanoseconds.  Every deadline
** in the library is on this clock, and both engines read it.  Changes to the
** wall clock do not move it; on Linux it does not advance while the system is
** suspended.  Thread: any.  Parks: no.
*/
PX_API int64_t px_now(void);

/* ------------------------------------------------------------------------- */
/* Handlers and executors                                                    */
/* ------------------------------------------------------------------------- */

/*
** A handler.  `status` is 0 when its timer expired and PX_ECANCELED when the timer
** was aborted first (by a cancel, cancel_all or free).  A one-shot handler is
** called exactly once, so that call is the place to release `arg`; a periodic
** one once per tick with 0, then exactly once with PX_ECANCELED.
*/
typedef void (*px_handler_fn)(void *arg, int status);

/*
** An executor: where handlers run.  A timer queue with an executor never calls a
** handler itself: its worker calls post(ctx, fn, arg, status) once for each call
** it owes, and post() must either arrange for fn(arg, status) to be called once,
** later, on a thread of the executor's choosing, and return 0; or return
** non-zero (by convention a negative PX_E* code) without keeping fn, and then the
** worker runs fn(arg, status) itself at once, on the worker thread.  Either way
** the handler is called exactly once.
**
** fn and arg are the queue's own trampoline, not the user's handler: pass them
** through unchanged.  The trampoline decides the status the handler sees (0, or
** PX_ECANCELED when a cancel won before the call started), whatever `status` was
** posted -- except that an executor that accepted a call and then cannot run it
** as asked (shut down, cancelled) calls fn(arg, PX_ECANCELED) instead, on any
** thread: the handler then gets PX_ECANCELED (a periodic timer's final call; it
** is not re-armed).
**
** flush(), which may be NULL, is called on the worker after each batch of posts
** (the calls of one expiry, a bounded number at a time): an executor that pays per
** hand-over -- a lock, a wake-up, a language's global lock -- may queue the calls
** in post() and hand them all over in flush().  The calls queued must then still
** each happen once.  Zero-initialize an executor you fill in yourself, so that a
** field you do not set is NULL.
**
** post() and flush() run on the worker and must not block for long: while they
** run, no other timer of that queue fires.  `ctx` must stay valid until
** px_timerq_free of every queue that uses the executor has returned.  Every call
** the executor accepted must run eventually: the queue keeps its memory until the
** last posted call has run, and a call that never runs leaks it (and its handler
** never runs).  Two executors are built in: px_queue_executor (a thread or event
** loop drains a queue) and px_sched_executor (each call runs as a fiber).
*/
typedef struct px_executor {
    int (*post)(void *ctx, px_handler_fn fn, void *arg, int status);
    void *ctx;
    void (*flush)(void *ctx);
} px_executor;

/* ------------------------------------------------------------------------- */
/* The drainable handler queue                                               */
/* ------------------------------------------------------------------------- */

/*
** A px_queue is a thread-safe FIFO of posted handlers that some thread drains: an
** event loop (through the file descriptor of px_queue_fd), a Lua or Python loop,
** or any thread that calls px_queue_wait and px_queue_drain.  Calls sit in a ring
** that grows by doubling, so a post allocates only when the queue is longer than
** it has ever been.
*/
typedef struct px_queue px_queue;

/*
** Returns a new, empty queue, or NULL when out of memory or out of file
** descriptors (the queue owns one eventfd, non-blocking and close-on-exec).  The
** caller owns it and releases it with px_queue_free.  Thread: any.  Parks: no.
*/
PX_API px_queue *px_queue_new(void);

/*
** Returns, by value, an executor that posts into `q`; the call cannot fail.
** Posting never blocks; it fails only with PX_ENOMEM (PX_EINVAL for a NULL q),
** and the handler then runs inline in the poster (a px_queue has no closed state,
** so never PX_ECLOSED).  `q` must outlive every timer queue that uses the
** executor, until each px_timerq_free has returned; then drain or free `q` so
** that the calls still queued run.  Thread: any.  Parks: no.
*/
PX_API px_executor px_queue_executor(px_queue *q);

/*
** Posts fn(arg, status) into `q`; the post that makes an empty queue non-empty
** makes px_queue_fd readable.  Returns 0, PX_EINVAL (NULL q or fn), PX_ENOMEM
** (the ring could not grow), or PX_EFORKED in the child of a fork (q is the
** parent's: its handlers are owed there).  On an error nothing is queued and the
** call is the caller's to make.  Thread: any, including handlers being drained
** from `q`.  Parks: no.
*/
PX_API int px_queue_post(px_queue *q, px_handler_fn fn, void *arg, int status);

/*
** Runs up to `max` queued handlers (0 means: all that are queued when the call
** starts) on the calling thread, in FIFO order, and returns how many ran (0 when
** the queue was empty; at most INT_MAX); PX_EINVAL for NULL.  The drain that
** empties the queue clears the readiness of px_queue_fd.  Handlers run without
** the queue's lock held, so they may call any px_queue_* function on `q` except
** px_queue_free, and may post more: with max 0 those wait for the next drain
** (a strict "only what was queued"); with max > 0 calls are taken a chunk at a
** time, so a later chunk may hold calls that handlers of an earlier chunk
** posted.  Several threads may drain one queue at once: each call still runs
** exactly once, but no order holds between calls run by different drainers.
** PX_EFORKED in the child of a fork: it never runs the parent's handlers.
** Thread: any; each handler runs on the caller.  Parks: no, apart from what the
** handlers do.
*/
PX_API int px_queue_drain(px_queue *q, size_t max);

/*
** Returns a file descriptor that is readable while handlers wait in `q` (an
** eventfd), for epoll, poll, asyncio's add_reader or a Lua loop; PX_EINVAL for
** NULL.  It is level-triggered in effect: it stays readable until a drain empties
** the queue.  Only px_queue_drain clears it: never read it yourself.  The
** descriptor belongs to the queue (do not close it) and is closed by
** px_queue_free.  PX_EFORKED in the child
** of a fork (the descriptor is shared with the parent).  Thread: any.  Parks: no.
*/
PX_API int px_queue_fd(px_queue *q);

/*
** Waits until a handler is queued or `timeout_ns` has passed (negative, or too
** long for the clock: forever).  It polls the descriptor and consumes nothing; a
** signal (EINTR) does not end the wait early.  Returns 1 when handlers wait, 0 on
** timeout (or when ppoll fails for another reason than EINTR), PX_EINVAL for
** NULL, PX_EFORKED in the child of a fork.  With several drainers, a 1 does not
** promise that the handlers are still there when you drain.
** Thread: any, but not a fiber: it would hold up the whole scheduler.
** Parks: blocks the thread.
*/
PX_API int px_queue_wait(px_queue *q, int64_t timeout_ns);

/*
** Waits as px_queue_wait does, but a signal or another thread can end the wait:
** the form for a binding's or an event loop's thread that must act on Ctrl-C,
** or be told to stop.  Returns 1 when handlers wait, 0 on timeout (never
** early), PX_EINTR when a signal handler ran on this thread during the wait
** (ppoll's EINTR) or px_queue_interrupt(q) was called during it -- then
** whatever was posted meanwhile is still queued and px_queue_fd still readable:
** an interrupt loses no readiness -- PX_ENOMEM when the calling thread's
** interrupt descriptor (an eventfd, made at its first call and closed when the
** thread exits, unless the library was unloaded before: then it stays open)
** cannot be made or the kernel has no memory for the wait, PX_EINVAL for
** NULL, PX_EFORKED in the child of a fork.
** Thread: any, but not a fiber, nor a signal handler.
** Parks: blocks the thread.
*/
PX_API int px_queue_wait_intr(px_queue *q, int64_t timeout_ns);

/*
** Ends every px_queue_wait_intr on `q` under way when it is called: each
** returns PX_EINTR.  A wait that starts later is not affected (a binding that
** stops its waiters sets its own flag first, and calls this until they are
** gone).  px_queue_wait is never interrupted.  Returns how many waits it
** ended, PX_EINVAL for NULL, PX_EFORKED in the child of a fork.
** Thread: any, but not a signal handler (it takes the queue's lock).
** Parks: no.
*/
PX_API int px_queue_interrupt(px_queue *q);

/*
** Returns how many handlers are queued, a snapshot (0 for NULL and in the child
** of a fork).  Thread: any.  Parks: no.
*/
PX_API size_t px_queue_size(px_queue *q);

/*
** Runs every handler still queued on the calling thread, including those their
** handlers post, until the queue is empty (so that none is lost); then closes the
** descriptor and releases `q`.  Nobody may post into `q` once this is called (no
** timer queue using its executor may still run), and it may not be called from a
** handler that a drain of `q` is running.  In the child of a fork it runs none,
** closes the child's descriptor, and releases the memory unless a thread of the
** parent was using the queue at the fork.  Thread: any.  Parks: no, apart from
** what the handlers do.
*/
PX_API void px_queue_free(px_queue *q);

/* ------------------------------------------------------------------------- */
/* The timer queue                                                           */
/* ------------------------------------------------------------------------- */

/*
** A thread-safe queue of one-shot and periodic timers, served by one worker
** thread.  Add and cancel never scan the pending timers.  The worker sleeps until
** the earliest deadline and is woken only when that deadline moves, when an
** aborted call must be delivered, or at shutdown.  What it promises:
**
**   - Exactly once: every handler that an add accepted is called exactly once,
**     with 0 or PX_ECANCELED (a periodic one: once per tick, then PX_ECANCELED).
**   - Never early: a handler with status 0 runs at or after its deadline on
**     px_now()'s clock.
**   - Cancel wins until the handler starts, even when the timer has expired and
**     its call waits in an executor.
**   - Handlers run without the queue's lock held: a handler may call any
**     function of its own queue, px_timerq_free included (it is then deferred).
**   - Order is by deadline only while the worker keeps up: handlers whose
**     deadlines it reaches on time start in deadline order, to within the
**     resolution of its timing wheel (well under a millisecond); handlers
**     already overdue when it reaches them (it fell behind a burst, or its
**     thread was starved) start in no particular order, which is what lets it
**     run millions a second.  No executor promises more.
*/
typedef struct px_timerq px_timerq;

/* The options of px_timerq_new (zero-initialize, then set the fields you need). */
typedef struct px_timerq_opts {
    /* Where handlers run.  NULL: on the queue's worker thread.  The executor is
    ** copied (the struct may go away after px_timerq_new); what its ctx points
    ** to must outlive the queue. */
    const px_executor *executor;
    /* The worker's timer slack in nanoseconds (Linux PR_SET_TIMERSLACK): how late
    ** the kernel may wake it.  0 selects the library's default (1 us); a negative
    ** value leaves it alone: the worker inherits the slack of the thread that
    ** called px_timerq_new (the kernel's default is 50 us, unless that thread
    ** changed its own).  More than 1 s is taken as 1 s (as abort_linger_ns): a
    ** huge slack would let the kernel put the worker's timed waits off for ever. */
    int64_t timer_slack_ns;
    /* How late the worker may make the PX_ECANCELED call of a cancelled timer: a
    ** cancel wakes the worker only if it would not look by itself within this
    ** time, so that a burst of cancels costs one wake-up, not one each.  0 (or
    ** less) selects the default, 50 us.  A binding whose handlers need a global
    ** lock (Python's GIL) passes more: each delivery is a hand-over of that lock.
    ** More than 1 s is taken as 1 s. */
    int64_t abort_linger_ns;
} px_timerq_opts;

/*
** Returns a new queue with its worker thread started, or NULL when out of memory
** or when its condition variable or thread cannot be made.  `opts` may be NULL
** (the defaults).  The first call in a process installs a pthread_atfork child
** handler.  The caller owns the queue and releases it with px_timerq_free.
** Thread: any.  Parks: no.
*/
PX_API px_timerq *px_timerq_new(const px_timerq_opts *opts);

/*
** Arms a one-shot timer that calls fn(arg, 0) once `delay_ns` (>= 0) has passed,
** or fn(arg, PX_ECANCELED) if it is aborted first.  A timer never fires early; a
** delay of 0 fires on the worker's next pass.  `arg` belongs to the handler from
** a non-zero return on.
**
** Returns the timer's id: never 0, never reused by this queue.  Returns 0 when the
** timer was not added -- NULL q or fn, a negative delay, no memory, a queue that
** is being freed or belongs to the parent of a fork -- and then fn is never
** called.  A delay too long for the clock saturates: the timer is added and never
** comes due (its one call is then the PX_ECANCELED of a cancel or free).
** Thread: any, including handlers of this queue.  Parks: no.  Wakes the worker
** only when the new deadline is earlier than the one it sleeps towards.
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
** `period_ns` (> 0), at first + k * period.  Ticks never overlap: the next tick is
** armed only after the current call returns.  When the handler or the worker runs
** late, the missed ticks coalesce into one and the next tick keeps the original
** phase.  The timer ends with exactly one fn(arg, PX_ECANCELED) call once it is
** cancelled or its queue freed; `arg` belongs to the handler until then.  Returns
** the id, or 0 as px_timerq_add (and for period_ns <= 0).
** Thread: any.  Parks: no.
*/
PX_API uint64_t px_timerq_add_periodic(px_timerq *q, int64_t first_ns, int64_t period_ns,
                                       px_handler_fn fn, void *arg);

/*
** Aborts timer `id`.  Cancel wins until the handler starts: it returns 1 when the
** handler had not started yet -- including when the timer already expired and
** waits in an executor -- and the handler is then called once with PX_ECANCELED
** (on the worker or the executor, never inside this call; up to abort_linger_ns
** plus the timer slack later).  For a periodic timer
** it returns 1 until its final call has started, even while a tick runs; the
** final call follows that tick.  Returns 0 when the handler started or finished,
** the timer was already cancelled, or `id` is unknown (0 included).  Returns
** PX_EINVAL for a NULL q and PX_EFORKED in the child of a fork.
** Thread: any, including this queue's handlers (a handler cancelling its own
** one-shot timer gets 0; a periodic handler cancelling its own timer gets 1, and
** the final call follows its return).  Parks: no.
*/
PX_API int px_timerq_cancel(px_timerq *q, uint64_t id);

/*
** Cancels every timer of `q` whose handler has not started, as px_timerq_cancel
** would, and returns how many it cancelled (0 for NULL or in a forked child).
** Timers added after the call are not affected.  Thread: any.  Parks: no.
*/
PX_API size_t px_timerq_cancel_all(px_timerq *q);

/*
** Returns how many timers wait for their deadline, a snapshot: timers that
** expired, whose calls wait in an executor or run, are not counted.  0 for NULL
** and in the child of a fork.  Thread: any.  Parks: no.
*/
PX_API size_t px_timerq_pending(px_timerq *q);

/*
** Aborts every timer, delivers every handler call still owed, stops the worker
** and releases `q`.  From any thread but the worker, it returns once the worker
** has delivered every call it owes and exited: handlers that run on the worker
** never run after it returns.  Handlers already posted to an executor run there
** later, with PX_ECANCELED unless they had started; the queue's memory lives
** until the last of them has run.
**
** Called from a handler on the worker itself, it cannot wait for itself: it
** aborts every timer and returns at once, and the worker releases the queue
** after the current handler returns and every owed call is delivered.
**
** In the child of a fork() it runs no handler (they belong to the parent), and
** releases the memory only when no call is outstanding in an executor; else it
** leaves the memory alone.  NULL does nothing.  No call on `q` may follow, and
** none may be under way in another thread.  A handler on an executor thread may
** call it, unless the worker could be blocked on that same thread (an executor
** whose post() waits for the thread calling px_timerq_free).
** Thread: any.  Parks: blocks the thread: it joins the worker (except when called
** from it).
*/
PX_API void px_timerq_free(px_timerq *q);

/* ------------------------------------------------------------------------- */
/* The deadline timer                                                        */
/* ------------------------------------------------------------------------- */

/*
** A px_timer groups any number of handlers behind one expiry, like Asio's
** steady_timer: set the expiry, then async_wait as often as needed; all waiters
** of an expiry are called together, as one call through the queue (and its
** executor), in the order they were added.  A new timer's expiry is "now", so a
** wait added before any expiry is set completes at once, with 0.  Every function
** is thread-safe.
*/
typedef struct px_timer px_timer;

/*
** Returns a new timer on `q` whose expiry is px_now() at the call, or NULL for
** NULL q or no memory.  `q` must outlive the timer's pending waits; since setting
** an expiry, waiting and cancelling use `q` too, free every timer before its
** queue.  Thread: any.  Parks: no.
*/
PX_API px_timer *px_timer_new(px_timerq *q);

/*
** Sets the expiry to now + `delay_ns` (>= 0; too long for the clock: INT64_MAX,
** never) and aborts the waits pending on the previous expiry (each is called with
** PX_ECANCELED, through the queue; waits of the previous expiry already being
** delivered complete with 0 and are not counted).  It arms nothing by itself: the
** next px_timer_async_wait uses the new expiry.  Returns how many waits it
** aborted, PX_EINVAL (NULL t, negative delay), or PX_EFORKED in
** the child of a fork when t's queue is the parent's (so do px_timer_expires_at,
** px_timer_expiry, px_timer_async_wait and px_timer_cancel; px_timer_free then
** releases the timer only when no wait of the parent's is pending on it).
** Thread: any.  Parks: no.
*/
PX_API int px_timer_expires_after(px_timer *t, int64_t delay_ns);

/*
** As px_timer_expires_after with an absolute deadline (>= 0) on px_now()'s clock:
** returns the number of aborted waits, or PX_EINVAL (NULL t, negative deadline).
** Thread: any.  Parks: no.
*/
PX_API int px_timer_expires_at(px_timer *t, int64_t deadline);

/*
** Returns the current expiry (a deadline on px_now()'s clock, always >= 0), or
** PX_EINVAL for NULL.
** Thread: any.  Parks: no.
*/
PX_API int64_t px_timer_expiry(px_timer *t);

/*
** Adds a waiter: fn(arg, 0) when the expiry is reached, or fn(arg, PX_ECANCELED)
** when the wait is aborted first (by a new expiry, px_timer_cancel, px_timer_free,
** or its queue's cancel or free).  A wait added when the expiry has passed
** completes at once, on the worker's next pass.  Returns 0 (`arg` then belongs to
** the handler), or PX_EINVAL (NULL t or fn), PX_ENOMEM (no memory for the wait,
** the expiry's batch or the queue's timer record), PX_ECLOSED (its queue is
** being freed and refused the timer) or PX_EFORKED (in the child of a fork, its
** queue is the parent's, even with a wait of the parent's pending) -- and then fn
** is never called.  Thread: any, including wait handlers.  Parks: no.
*/
PX_API int px_timer_async_wait(px_timer *t, px_handler_fn fn, void *arg);

/*
** Aborts the pending waits (each is called with PX_ECANCELED) and keeps the
** expiry.  Returns how many it aborted, or PX_EINVAL.  Thread: any.  Parks: no.
*/
PX_API int px_timer_cancel(px_timer *t);

/*
** Aborts the pending waits and releases the timer.  Waits already being
** delivered still complete, with 0, and the timer's memory is kept until they
** have run, so a wait handler may free its own timer.  NULL does nothing.
** Thread: any.  Parks: no.
*/
PX_API void px_timer_free(px_timer *t);

/* ========================================================================= */
/* The fiber engine                                                          */
/* ========================================================================= */

/*
** Cooperative fibers on one OS thread per scheduler.  A scheduler runs its ready
** fibers in FIFO order, a batch at a time; a fiber runs until it yields, sleeps,
** parks or ends.  Two hand-offs go before the queue: a fiber that joins a ready
** fiber (one that has not run yet, typically) lets it run next, and a fiber
** that ends lets the first of its joiners run next; after 256 hand-offs in a
** row the queue goes on, so every ready fiber still gets its turn.  A fan-out
** that joins its children in turn so runs depth first, and holds few stacks.
** Between batches the scheduler expires the sleeps and timeouts
** that are due and takes in what other threads posted, and only when there is
** still nothing to run does it wait in the kernel (one poll of its own file
** descriptor), until the next deadline or until another thread posts to it.
**
** A scheduler's objects are not thread-safe.  Other threads reach a scheduler
** only through px_sched_post, px_wake, px_token_cancel, px_sched_hold and
** px_sched_unhold, and through a timer queue that uses px_sched_executor.
**
** Vocabulary used below:
**
**   - "Thread: scheduler" means a fiber of the scheduler concerned.  Called
**     from any other thread there is no current fiber: the call returns
**     PX_ENOFIBER (or NULL / 0, as its comment says) and changes nothing; a
**     fiber of another scheduler gets PX_ETHREAD where the comment says so.
**   - "Thread: the scheduler's" means the OS thread that runs the scheduler, on
**     a fiber or off one.
**   - "Parks: yes" means the call may suspend the calling fiber (never the
**     thread) until something wakes it; it needs a fiber and returns PX_ENOFIBER
**     without one.  Every park is bounded by the scopes around it
**     (px_with_timeout, px_with_cancel), so it can return PX_ETIMEDOUT or
**     PX_ECANCELED; in a hosted fiber whose host cannot switch inside C it
**     returns PX_EYIELD instead of suspending (see px_host_ops).
**   - A fiber id is a 64-bit number, never 0, never reused within the process, so
**     a stale id can never reach another fiber.  It is not the handle: it stays
**     meaningful after the fiber ended, and any thread may px_wake it.  A handle
**     (px_fiber *) is valid only until px_fiber_release, or px_sched_free of
**     its scheduler.
**
** Stacks are mmap'd, touched lazily and pooled per scheduler.  A fiber takes
** its stack at its first turn (its spawn only makes sure there will be one),
** the one given back last, whose pages are resident: a fiber that has not run
** costs its record, about 350 bytes, and no stack.  A stack overflow
** ends the process with "parataxis: fiber N overflowed its stack" on stderr and
** SIGABRT when the fiber runs into a guard: each of the first
** PARATAXIS_GUARDED_STACKS stacks of the process (an environment variable, read
** once when the first stack pool is made; docs/fibers.md gives its default) has
** a PROT_NONE guard region of its own; past that budget, default-size stacks
** share slabs with one such guard at the low end (a runaway recursion runs down
** through the other stacks of its slab into it) and a canary between stacks,
** checked whenever the fiber switches out.  Not caught (undefined behaviour): a
** frame that moves the stack pointer further than the guard at once and writes
** below it first (build the fibers' code with -fstack-clash-protection, which
** the library cannot impose, to have such frames probe the guard); on a slab
** stack an overflow that returns before reaching a guard without writing the
** canary; a runaway on a stack of non-default size past the budget (canary
** only, no guard); the overflow of a hosted fiber or of the scheduler's own
** thread; any overflow once the program replaced the library's SIGSEGV handler
** (installed with the first stack pool).  A shared stack
** (px_sched_opts.shared_stacks) is one mapping with a guard of its own: its
** fibers' overflows are reported as on a guarded stack.  docs/fibers.md has
** the details.
**
** With PARATAXIS_TRACE set in the environment to anything but "" or "0" (read
** once per process, by the first px_sched_new or px_sched_run), every scheduler
** writes one line to stderr per fiber event, each with one write(2):
** "parataxis trace <seconds since the first scheduler> fiber <number>[ "<name>"]
** <event>" (the fiber's px_fiber_number and its name, if it has one), the
** events being spawn, park "<reason>", wake "<reason>", timeout "<reason>",
** cancel "<reason>", nomem "<reason>" (a park on a shared stack that could not
** keep its stack: see px_sched_opts.shared_stacks) and exit.
*/

/* A scheduler, a handle on a fiber (for px_join and px_fiber_release), a
** cancellation token. */
typedef struct px_sched px_sched;
typedef struct px_fiber px_fiber;
typedef struct px_token px_token;

/* A fiber's function.  What it returns is what px_join hands to the joiner. */
typedef void *(*px_fiber_fn)(void *arg);

/* The options of px_sched_new (zero-initialize, then set the fields you need). */
typedef struct px_sched_opts {
    /* Default stack size of its fibers in bytes, rounded up to pages; 0 selects
    ** the library's default (docs/fibers.md gives it).  Stacks are touched
    ** lazily, so a large size costs address space, not memory.  A size no
    ** address space can hold makes px_sched_new return NULL. */
    size_t stack_size;
    /* The scheduler thread's timer slack while it runs (as px_timerq_opts):
    ** 0 selects 1 us, a negative value leaves the thread's slack alone.  The
    ** previous slack is restored when px_sched_run returns. */
    int64_t timer_slack_ns;
    /* Where a deadlock report goes (see px_sched_run).  NULL: written to stderr.
    ** Called on the scheduler's thread, from px_sched_run (or px_sched_next),
    ** with on_deadlock_ctx.  `report` is one NUL-terminated text of several
    ** lines, valid during the call.  It may not run the scheduler: px_run,
    ** px_sched_run and px_sched_next return PX_EBUSY there. */
    void (*on_deadlock)(void *ctx, const char *report);
    void *on_deadlock_ctx;
    /* Called on the scheduler's thread just before it waits in the kernel
    ** (entering 1: nothing can run until a deadline or a post) and just after
    ** (entering 0), with on_wait_ctx.  NULL: nothing.  A host with a global
    ** lock (Python's GIL) releases it there and holds it the rest of the time.
    ** It may post (px_sched_post, px_wake: a host's interrupt handling), but
    ** not run the scheduler: px_run, px_sched_run and px_sched_next return
    ** PX_EBUSY there. */
    void (*on_wait)(void *ctx, int entering);
    void *on_wait_ctx;
    /* Nonzero: an open cancel scope counts as a hold, as in px_run -- a fiber
    ** parked in one waits for another thread's px_token_cancel instead of
    ** being reported as a deadlock.  For a host that, like px_run, gives its
    ** caller no scheduler to hold for that thread (the Python binding's run). */
    int token_scopes_hold;
    /* 0: every fiber has a stack of its own (the default).  N > 0, at most
    ** PX_SHARED_STACKS_MAX: the fibers of the default size (px_spawn,
    ** px_spawn_sized with 0, px_sched_post, px_sched_executor's handlers) run
    ** on N shared stacks of stack_size bytes each, placed round robin at spawn
    ** -- for programs with very many mostly-idle fibers.  A parked fiber then
    ** costs its record and the bytes of stack it uses (a few hundred: see
    ** docs/performance.md), not a page of its own.  The price is a copy of
    ** those bytes at a switch to a fiber whose stack holds another's, and a
    ** rule: while a fiber on a shared stack waits, its stack holds another
    ** fiber's bytes, so no other fiber or thread may use a pointer into it
    ** (a local passed to a child or a thread, a px_mutex declared in it, the
    ** reason or object of a px_park_info, which the deadlock report reads
    ** while the fiber waits); its own pointers to its locals are right
    ** whenever it runs.  The library keeps nothing that others read on such
    ** a stack.  The memory for a fiber's copy is had as it leaves the CPU,
    ** never at a switch: when there is none, what it called (a wait, a park,
    ** a sleep, a join, a yield) returns PX_ENOMEM at once, having waited for
    ** nothing and left nothing queued.  Fibers with an explicit
    ** size and hosted fibers keep a stack of their own (or none).  Each
    ** shared stack has a guard below it, as a stack of its own does, and an
    ** overflow is reported the same way.  docs/fibers.md compares the two
    ** modes.  A larger N makes px_sched_new return NULL. */
    size_t shared_stacks;
    /* PX_CLOCK_REAL (0, the default) or PX_CLOCK_VIRTUAL: a clock of the run's
    ** own, for tests of code that sleeps.  It stands still while any fiber can
    ** run, and when every fiber waits on time alone it jumps to the next
    ** deadline at once; while something from outside could still come (a
    ** fiber waits on an fd, a blocking-pool job, a park with PX_PARK_OUTSIDE,
    ** a px_sched_hold), the run waits in the kernel and the clock moves with
    ** real time meanwhile.  An open cancel scope is no such thing here: its
    ** token's cancel from another thread does not hold the clock back.
    ** px_now() on the run's thread, sleeps, timeouts, deadlines, px_select's
    ** deadlines and the dump all read it; other threads, and the timer queue,
    ** keep real time.  It starts at px_now()'s real reading when the
    ** scheduler is made.  docs/fibers.md has the details. */
    int clock;
    /* Where a hosted fiber is, for px_dump and px_sched_inspect (NULL:
    ** nothing): writes at most `cap` bytes of text (a stack, a traceback) for
    ** fiber `id` with `host_ctx` into buf, NUL-terminated, and returns its
    ** length.  Called on the scheduler's thread, from px_dump or
    ** px_sched_inspect, with describe_ctx; it may not park or run the
    ** scheduler. */
    size_t (*describe)(void *ctx, uint64_t id, void *host_ctx, char *buf, size_t cap);
    void *describe_ctx;
} px_sched_opts;

/* px_sched_opts.clock */
#define PX_CLOCK_REAL    0
#define PX_CLOCK_VIRTUAL 1

/* The most shared stacks a scheduler may have (px_sched_opts.shared_stacks). */
#define PX_SHARED_STACKS_MAX 4096

/*
** Runs a whole fiber program on the calling thread: makes a scheduler with the
** default options, runs main(arg) as its first fiber (detached, default stack),
** runs until every fiber ended (those main spawned and never joined included),
** frees the scheduler and stores main's return value in *result (when result is
** not NULL; *result is set to NULL first, whatever the outcome).
** Returns 0; PX_EDEADLK when fibers were left parked with nothing that could ever
** wake them, as px_sched_run decides it: a fiber parked in a cancel scope is not
** such a fiber, so a token that another thread cancels later needs no hold (the
** report went to stderr, the parked fibers were discarded, *result is NULL);
** PX_EINVAL for NULL main; PX_ENOMEM (the scheduler, its descriptor, the first
** post or the stack pool); PX_EBUSY when the thread already runs a scheduler (a
** call from a fiber, or from a handler on a scheduler thread); PX_EFORKED in the
** child of a fork() made in one of its fibers, once that fiber returned.
** Thread: any thread that runs no scheduler.  Parks: blocks the thread until done.
*/
PX_API int px_run(px_fiber_fn main, void *arg, void **result);

/*
** px_run with a scheduler made from `opts` (NULL: the defaults, as px_run); a
** run on a virtual clock is px_run_with(&(px_sched_opts){ .clock =
** PX_CLOCK_VIRTUAL }, main, arg, &result).  Returns what px_run returns, and
** PX_EINVAL for options px_sched_new refuses (a clock that is neither
** PX_CLOCK_REAL nor PX_CLOCK_VIRTUAL included).  token_scopes_hold is set
** whatever `opts` says, as px_run does.
** Thread: any thread that runs no scheduler.  Parks: blocks the thread until done.
*/
PX_API int px_run_with(const px_sched_opts *opts, px_fiber_fn main, void *arg, void **result);

/*
** Returns a new scheduler, not yet running, or NULL when out of memory or file
** descriptors (each scheduler owns an eventfd), when the process has run out of
** scheduler ids, or when opts->stack_size cannot be mapped at all (a trial
** reservation of that much address space fails) or opts->shared_stacks exceeds
** PX_SHARED_STACKS_MAX.  `opts` may be NULL (the
** defaults); it is copied.  The first call in a process reads PARATAXIS_TRACE.
** The caller owns the scheduler and releases it with px_sched_free.
** Thread: any.  Parks: no.
*/
PX_API px_sched *px_sched_new(const px_sched_opts *opts);

/*
** Runs `s` on the calling thread until no fiber is left, nothing is posted and
** no hold (px_sched_hold) remains.  The first call binds `s` to its thread: a
** scheduler always runs on the same thread.  The stack pool is made on the first
** run.  It may be called again on that thread after it returned (when more work
** was posted, say).
**
** Returns 0 when every fiber ended.  Returns PX_EDEADLK when fibers remain
** parked but none can run, no sleep or timeout is pending, nothing was posted,
** no hold is taken and no fiber is parked on something an outside thread can
** wake (PX_PARK_OUTSIDE) -- a thread that will px_wake, px_sched_post or
** px_token_cancel takes a hold for it (px_run, which has none to take, counts
** an open cancel scope as one instead): it first writes a report
** (opts->on_deadlock, or stderr) naming every parked fiber, its wait reason,
** what it waits on and who holds that, and the wait-for cycle when the
** primitives say who holds what.  The parked fibers stay parked;
** px_sched_free releases them.
** Only these count as something that can still happen: sleeps, scope deadlines,
** posts, holds and PX_PARK_OUTSIDE parks.  A fiber parked plainly is reported
** even if another thread will px_wake it or cancel its token later: take a hold,
** or park with PX_PARK_OUTSIDE.
** Returns PX_EINVAL for NULL, PX_EBUSY when `s` runs already or the thread runs
** another scheduler (a call from one of `s`'s own fibers included), PX_ETHREAD
** when `s` ran on another thread before (a refused
** call changes nothing and does not bind `s`), PX_ENOMEM when the stack pool
** cannot be made on the first run (`s` stays bound to the calling thread),
** PX_EFORKED in the child of a fork when `s` was made before it, PX_EINVAL when
** `s` has had a pulled fiber (see px_sched_next: only that runs it).
**
** fork() in a fiber: in the child, the forking fiber is no fiber any more
** (px_self() is 0, parks return PX_ENOFIBER), so it may px_run a new scheduler
** or exec; once it returns, the px_sched_run (or px_run) it ran under returns
** PX_EFORKED in the child without running any other fiber or posted function
** (they run in the parent).  px_sched_free then releases `s` in the child,
** calling none of its posted handlers (a cancel scope on a parent's token closes
** without touching the token).
** Thread: the thread `s` is bound to, or any thread before the first run, provided
** it runs no scheduler.  Parks: blocks the thread while it runs.
*/
PX_API int px_sched_run(px_sched *s);

/*
** Releases `s` and every fiber record it still has.  Fibers left parked (after
** PX_EDEADLK), or ready and never run, are discarded without running again:
** their open scopes are closed, what they hold of the synchronization family is
** released without waking anyone, and a hosted fiber's release(host_ctx) is
** called.  Every px_fiber handle of `s` becomes invalid, those of ended fibers
** never released included.  Functions posted with px_sched_post that never
** started are dropped (their `arg` is not freed); every handler call posted
** through px_sched_executor that had not started -- taken in as a fiber that
** never ran (a pulled run given up between two pulls), or not taken in yet --
** is called before the free returns, with PX_ECANCELED (aborted: it never
** ran), on the calling thread and off any fiber, in the order it was posted (a
** handler is owed its one call).  From the start of the call, a px_wake of one
** of its fibers from another thread returns 0.  NULL does nothing.  `s` must not
** be running, and no thread may post to it any more -- except between two
** px_sched_next calls on its thread: the free gives that pulled run up (each
** hosted fiber left gets its release call, as above).  In the child of a fork, a scheduler made
** before it is only forgotten (its memory stays), except the one a fiber forked
** in, once its run returned PX_EFORKED.  Thread: any.  Parks: no.
*/
PX_API void px_sched_free(px_sched *s);

/*
** Spawns fn(arg) as a detached fiber of `s` (its result is dropped) and wakes `s`
** if it waits; the new fiber has the default stack.  Posted functions start in
** the order they were posted.  A post to a scheduler that is not running waits
** for px_sched_run (or is dropped by px_sched_free).  Should no fiber be made
** when `s` takes the post in (no memory for the record or the stack, or no ids
** left), fn(arg) runs on the scheduler thread outside any fiber (it may not park
** then: its parks return PX_ENOFIBER).  `arg` passes to fn on a 0 return, unless
** px_sched_free drops the post first.
** Returns 0, PX_EINVAL (NULL s or fn), PX_ENOMEM, or PX_EFORKED in the child of a
** fork when `s` was made before it (as px_sched_hold, px_sched_unhold and the
** executor's post; px_wake of its fibers returns 0).  Thread: any.  Parks: no.
*/
PX_API int px_sched_post(px_sched *s, px_fiber_fn fn, void *arg);

/*
** Ends the kernel wait of `s`'s run once: the wait under way, or else the
** next one, returns at once.  The run goes on as after any wake-up: it calls
** opts.on_wait with 0, takes in what was posted, expires what is due, and
** waits again (on_wait with 1 first) when nothing is ready.  For a signal
** handler that must be sure its run looks at what the handler recorded: a
** signal that lands after the on_wait hook looked and before the kernel wait
** began would otherwise be seen only at the run's next deadline or post.
** Async-signal-safe: one write(2), no lock, no memory.  Returns 0, PX_EINVAL
** for NULL, PX_EFORKED in the child of a fork when `s` was made before it.
** Thread: any, and signal handlers.  Parks: no.
*/
PX_API int px_sched_wake(px_sched *s);

/*
** Returns an executor (see px_executor) whose post() runs each handler call as a
** new detached fiber of `s`, so a px_timerq can deliver into a scheduler.  The
** handler may park.  A timer queue's handlers can arrive while no fiber is live:
** take a hold (px_sched_hold) for as long as the queue may post, or `s` returns
** first.  A handler does not always run on a fiber: when post() fails (PX_ENOMEM;
** PX_EINVAL for a NULL s) the timer queue runs it inline on its worker thread;
** when no fiber can be made at intake it runs on the scheduler thread outside any
** fiber; and see px_sched_free for calls still posted when `s` is freed.
** `s` must outlive the timer queue.  Thread: any.  Parks: no.
*/
PX_API px_executor px_sched_executor(px_sched *s);

/*
** Runs `s` one turn at a time for a host that switches between its fibers
** itself (a greenlet host: Python switches greenlets faster than C could call
** into Python to resume one).  Its fibers are hosted ones spawned with a NULL
** resume ("pulled" fibers); the scheduler runs everything else in between as
** px_sched_run does.  Each call first ends the turn of the pulled fiber that
** was running, if any -- `status` is what its resume would have returned:
** PX_HOST_DONE once its body ended, 0 otherwise (it parked, got PX_EYIELD, or
** just comes back as a yield) -- then runs the loop until the next pulled
** fiber's turn.  The first call starts a run, which binds `s` to the thread.
** Returns 1 with *host_ctx set to that fiber's host_ctx: px_self() is its id,
** and the host switches to it (to the one that called, it just returns).
** Returns 0 when the run ended with every fiber ended, or an error of
** px_sched_run that ended it (PX_EDEADLK after the report, PX_EFORKED); a
** later call starts a new run.  Returns PX_EINTR when a signal ended its wait
** for something to happen: the run goes on, nothing is running; handle the
** signal and call again.  Refusals, which change nothing: PX_EINVAL for NULL s
** or host_ctx, the px_sched_run errors for a run that cannot start (PX_EBUSY:
** the thread runs another scheduler), PX_ETHREAD from another thread while a
** pulled run is under way, PX_EBUSY from a C fiber or a resumed hosted one,
** and from opts.on_wait, opts.on_deadlock or a hosted fiber's release (the
** loop is in the middle of its wait, its report or a fiber's end).
** Thread: the scheduler's (any before its first run).  Parks: blocks the thread
** while no fiber can run (its GIL, if any, should be released).
*/
PX_API int px_sched_next(px_sched *s, int status, void **host_ctx);

/*
** Cancels every fiber of `s`, for the rest of its life: each wait under way
** ends with PX_ECANCELED, and so does every later wait (a park, sleep, join or
** waiting sync call), as if inside a cancelled scope -- but no scope fired, so
** px_scope_pop returns 0 for each.  What does not wait (a try call, an
** uncontended lock, px_yield) goes on.  The way to unwind a whole fiber
** program: after an error, or after PX_EDEADLK, cancel and run on, and every
** parked fiber gets to clean up.  Returns 0, PX_EINVAL for NULL, PX_EFORKED,
** PX_ETHREAD from a thread other than the one `s` is bound to.
** Thread: the scheduler's (any before its first run).  Parks: no.
*/
PX_API int px_sched_cancel(px_sched *s);

/*
** A hold keeps `s` running while it has no fiber left, and stops it from
** declaring a deadlock while its fibers are parked: something outside (a timer
** queue delivering through px_sched_executor, a thread that will px_wake,
** px_sched_post or px_token_cancel) still has work for it.  Holds are counted:
** each px_sched_hold must be matched by one px_sched_unhold; the last one wakes
** `s` so it can finish or report a deadlock.
** Both return 0, or PX_EINVAL (NULL s, or unhold without a hold).
** Thread: any.  Parks: no.
*/
PX_API int px_sched_hold(px_sched *s);
PX_API int px_sched_unhold(px_sched *s);

/*
** Spawns fn(arg) on the calling fiber's scheduler, at the tail of the ready
** queue, with the scheduler's default stack size; the caller keeps running, and
** the new fiber first runs once the caller yields, parks or ends (first of all
** when the caller joins it).  It takes its stack at that first turn.
** px_spawn_sized takes `stack_size` bytes, rounded up to pages (0 for the
** default); a size other than the default gets a mapping of its own, not pooled
** and unmapped when the fiber ends.  On a scheduler with shared stacks
** (px_sched_opts.shared_stacks), the default size (0) puts the fiber on one of
** them and an explicit size, even the default's value, gives it its own.
** Returns a handle for px_join and px_fiber_release; NULL off-fiber or from
** another thread (no current scheduler), for NULL fn, when out of memory (the
** record, the stack, the id table; also a stack_size that cannot be mapped, such
** as SIZE_MAX), or when the scheduler has run out of fiber ids.  The handle
** stays valid until px_fiber_release, even after the fiber ended, and at most
** until px_sched_free: release every handle, or the ended fiber's record is
** kept until the scheduler is freed.
** Thread: scheduler (from one of its fibers).  Parks: no.
*/
PX_API px_fiber *px_spawn(px_fiber_fn fn, void *arg);
PX_API px_fiber *px_spawn_sized(px_fiber_fn fn, void *arg, size_t stack_size);

/*
** Parks until `f` ended and stores its result in *result (when result is not
** NULL; a hosted fiber's result is NULL).  A fiber that ended already is joined
** at once, without parking.  A join of a fiber that is ready lets it run next,
** before the ready queue.  Any number of fibers may join one fiber; they are
** woken in the order they joined, the first of them running next.  Returns 0,
** PX_ETIMEDOUT / PX_ECANCELED when a scope interrupted the wait (*result is left
** alone, and the caller is no longer a joiner), and, checked in this order,
** PX_EINVAL for NULL, PX_ENOFIBER off-fiber, PX_ETHREAD when `f` belongs to
** another scheduler, PX_EDEADLK when `f` is the calling fiber; PX_ENOMEM in a
** fiber on a shared stack when the memory to keep its stack while it waits
** cannot be had (it did not wait, and is no joiner); and PX_EYIELD in a hosted
** fiber that must yield (see px_spawn_hosted): once resumed, call px_join(f)
** again for the wait's outcome, what a C fiber's join returns -- the scope's
** code when one interrupted it, even if `f` ended since -- or PX_EYIELD again
** after a stray wake; a host that released `f` in the meantime reads
** px_park_result() instead.  Only the end of `f` (or a scope) ends the wait: a
** px_wake aimed at the joiner makes it look and park again, even when it comes
** just as `f` ends.
** Thread: scheduler.  Parks: yes, wait reason "fiber join", object kind "fiber",
** held by `f`, so join cycles show in deadlock reports.
*/
PX_API int px_join(px_fiber *f, void **result);

/*
** Gives the handle up.  A fiber still running goes on as a detached fiber; the
** record of an ended fiber is freed.  NULL does nothing; releasing twice, or
** using `f` afterwards, is an error of the caller (undefined behaviour).  The id
** stays valid for px_wake, which then returns 0.  In the child of a fork, on a
** fiber of a scheduler made before it, it does nothing.
** Thread: the scheduler's, or any thread while the
** scheduler is not running; from another thread while it runs, the call does
** nothing (the record is then kept until px_sched_free).  Parks: no.
*/
PX_API void px_fiber_release(px_fiber *f);

/*
** Returns the id of fiber `f` (0 for NULL); it stays the same after the fiber
** ended.  Thread: scheduler; it only reads the handle, so any thread holding a
** valid handle gets the right id.  Parks: no.
*/
PX_API uint64_t px_fiber_id(const px_fiber *f);

/*
** Returns the calling fiber's id; 0 off-fiber: outside any scheduler, or on a
** scheduler thread outside its fibers (a post or a handler run without a fiber,
** a handler run by px_sched_free).  Thread: any.  Parks: no.
*/
PX_API uint64_t px_self(void);

/*
** Puts the calling fiber at the tail of the ready queue and runs the others that
** are ready first.  Returns 0, PX_ENOFIBER off-fiber, PX_ENOMEM in a fiber on
** a shared stack when the memory to keep its stack while others run cannot be
** had (it went on at once, ahead of them), or PX_EYIELD in a hosted fiber
** without suspend (it must yield to its host now, and is resumed in its
** turn).  Not bounded by scopes: a yield is not a wait.  It sets
** px_park_result() to 0.  Thread: scheduler.  Parks: it suspends the fiber, but never waits.
*/
PX_API int px_yield(void);

/*
** Parks the calling fiber for `ns` nanoseconds (px_sleep) or until `deadline`
** on px_now()'s clock (px_sleep_until); it never returns early with 0: px_wake
** does not end a sleep (and returns 0 when aimed at one).  A sleep costs no thread
** and no syscall of its own: it is a node in the scheduler's ordered set of
** deadlines.  An `ns` too long for the clock sleeps for ever, until a scope ends
** it.  Returns 0 when the time has come, PX_ETIMEDOUT / PX_ECANCELED when a scope
** ended it first, PX_EINVAL for a negative `ns`, PX_ENOFIBER off-fiber,
** PX_ENOMEM in a fiber on a shared stack when the memory to keep its stack while
** it sleeps cannot be had (it did not sleep), PX_EYIELD
** in a hosted fiber that must yield (read the outcome with px_park_result once
** resumed).  A zero sleep, or a deadline at or before now (negative included),
** does not park: it returns the code of a scope that has fired, or else yields
** (0, or PX_EYIELD in a hosted fiber, whose px_park_result() then reads 0;
** PX_ENOMEM as a yield's).
** Thread: scheduler.  Parks: yes, wait reason "sleep".
*/
PX_API int px_sleep(int64_t ns);
PX_API int px_sleep_until(int64_t deadline);

/* ------------------------------------------------------------------------- */
/* The park/wake contract: how to write a primitive                          */
/* ------------------------------------------------------------------------- */

/*
** Every blocking operation of the library is built on px_park and px_wake, and
** so can yours.  A primitive keeps its own FIFO of waiting fiber ids, and an
** operation that may wait goes through four steps:
**
**   1. Resolve the fiber: id = px_self(); 0 means off-fiber -- return
**      PX_ENOFIBER (with a message naming your operation, if you print one).
**   2. If the operation can complete now, complete it and return, without
**      touching the scheduler.
**   3. Otherwise append id to your queue and call px_park(reason, dereg, ctx) as
**      the very last step.  Keep the queue entry in your object, not on the C
**      stack: a hosted fiber returns from the operation before it is woken.
**   4. The releasing side hands over first -- records the new owner, takes the
**      id off the queue -- and then calls px_wake(id).  So the woken fiber only
**      collects what is already its own, and a third fiber can never slip in.
**      Any code may call px_wake with any id, so px_park returning 0 means
**      "look again": park again while the hand-over is not yours yet.  Keep
**      the id queued in its place meanwhile, and do not take a woken fiber
**      that has not run yet for one that is leaving: a release made before
**      it runs must still hand over to it.  Only a park that returns
**      PX_ETIMEDOUT / PX_ECANCELED (or PX_ENOMEM, below) ends a wait without
**      a hand-over.
**
** When a scope interrupts the park (its deadline passed, its token was
** cancelled, or it had fired before the park), the fiber is woken by the
** scheduler instead, runs dereg(ctx) on that fiber (px_self() is the
** interrupted fiber) before px_park returns, and px_park returns PX_ETIMEDOUT or
** PX_ECANCELED.  dereg removes the id from your queue; and since a grant may have
** raced the interrupt (step 4 happened, but the fiber was already on its way
** out), dereg must then pass the grant on to the next waiter.  dereg must not
** park; it may call px_wake.  After px_park returns, nothing of the wait is left
** queued anywhere.  A fiber on a shared stack whose stack bytes cannot be kept
** while it waits (no memory) gets the same treatment with PX_ENOMEM: dereg runs
** and px_park returns at once, without having waited.
**
** A scheduler's fibers run one at a time on one thread, so a primitive used only
** by the fibers of one scheduler needs no lock.  Wake only ids that you took off
** your own queue.  See docs/examples/fibers_gate.c for a complete primitive.
*/

/* px_park_info.flags: an outside thread or a timer may wake this park (so while
** it is parked, the scheduler waits in the kernel instead of reporting a
** deadlock). */
#define PX_PARK_OUTSIDE 1u

typedef struct px_park_info {
    const char *reason;          /* wait reason for traces and reports; kept, not copied,
                                 ** so a static string; NULL shows as "?" */
    void (*dereg)(void *ctx);    /* run when the park is interrupted; may be NULL */
    void *ctx;
    /* For deadlock reports and dumps (all optional): the object waited on, a
    ** word naming its kind ("mutex" gives "mutex@0x...", NULL "object@0x..."),
    ** and a function that writes the ids of the fibers holding it now into
    ** out[0..max) and returns how many it wrote; it is called only while a
    ** report or a dump (px_sched_inspect) is written, on the scheduler's thread,
    ** and lets the report find the wait-for cycle.  A dump may come at any turn
    ** of the loop: the object must be readable then, so not on the stack of a
    ** fiber on a shared stack (another fiber's bytes are there while it waits). */
    const void *object;
    const char *kind;
    size_t (*holders)(const void *object, uint64_t *out, size_t max);
    unsigned flags;              /* PX_PARK_OUTSIDE or 0 */
} px_park_info;

/*
** Parks the calling fiber until px_wake(its id) or until a scope interrupts it.
** `reason` names the wait (a static string), dereg(ctx) is run on interruption;
** it is px_park_with with only those three fields set.
** Returns 0 when woken by px_wake; PX_ETIMEDOUT or PX_ECANCELED when a scope
** interrupted it (dereg has run); PX_ENOMEM in a fiber on a shared stack when
** the memory to keep its stack while it waits cannot be had (it did not wait;
** dereg has run, as for an interrupt); PX_ENOFIBER off-fiber (nothing happens,
** dereg does not run);
** PX_EYIELD in a hosted fiber whose host cannot switch inside C: the park is
** recorded, the host must yield to the scheduler at once, and px_park_result()
** gives the outcome once it is resumed.  A fiber in a scope that has already
** fired does not park: dereg runs and the code returns at once, in a hosted
** fiber too.
** Thread: scheduler.  Parks: yes.
*/
PX_API int px_park(const char *reason, void (*dereg)(void *ctx), void *ctx);

/*
** As px_park, with what a deadlock report can say about the wait; `info` is
** copied.  PX_EINVAL for a NULL info.  Thread: scheduler.  Parks: yes.
*/
PX_API int px_park_with(const px_park_info *info);

/*
** Makes parked fiber `id` ready; it returns 0 from its park.  On the fiber's own
** scheduler thread (on a fiber, or off-fiber during the run) it returns 1 when
** the fiber was parked and is now queued to run; 0 when `id` is 0, finished,
** unknown, not parked (a sleep is no park), or already woken or interrupted (then
** the wake does nothing).  From
** a thread other than the fiber's scheduler's, the wake is handed to that
** scheduler (woken if it waits) and applied there with the same rules, to the
** park the fiber is in when the scheduler takes it in: a late wake can end a
** later park with 0, which px_join and the sync waits treat as "look again".
** Such a stray wake never ends a wait of the library (a join, a sync wait): the
** waiter keeps its place and parks again, and a release still hands over to it.
** A primitive of your own must do the same (a grant flag in the waiter's queue
** entry, say).  From another thread it returns 1 when the wake was handed over
** and 0 when no live scheduler has `id` or the hand-over ran out of memory.
** Thread: any.  Parks: no.
*/
PX_API int px_wake(uint64_t id);

/*
** The outcome of the calling fiber's last park: 0 (woken, or no park yet; a
** yield also sets 0), PX_ETIMEDOUT, PX_ECANCELED; PX_ENOFIBER off-fiber.  A
** hosted fiber that got PX_EYIELD reads its result here once resumed (dereg
** has run by then when it was interrupted); read after a px_join, it collects
** that join: a later px_join is a new one.
** Thread: scheduler.  Parks: no.
*/
PX_API int px_park_result(void);

/* ------------------------------------------------------------------------- */
/* Scopes: timeouts and cancellation                                         */
/* ------------------------------------------------------------------------- */

/*
** A scope bounds every park of the calling fiber while it is open, however deep
** in the call stack the park is.  Scopes nest; a park is bounded by the nearest
** deadline among the open scopes and by every token among them.  A scope fires
** when a park (or a zero sleep) finds its deadline passed or its token
** cancelled, or when its timer or token interrupts a park under way: the park
** under way (or the next one, if none is) returns PX_ETIMEDOUT or PX_ECANCELED,
** and so does every later park inside that scope: a scope that fired stays fired
** until it closes.  When several scopes fired, a park returns the code of the
** innermost one.  A scope fires only when a park notices, so a scope whose
** deadline passed with no park inside closes as unfired.
*/
typedef int (*px_scope_fn)(void *arg);

/*
** Runs body(arg) with every park inside bounded by a deadline `ns` from now, and
** returns what body returned (a body usually returns the PX_ETIMEDOUT its park
** got).  An `ns` too long for the clock means never; `ns` 0 makes the first park
** inside return PX_ETIMEDOUT at once.  Scopes pushed inside body and left open
** are closed when it returns.  Returns PX_EINVAL (NULL body, negative ns),
** PX_ENOFIBER off-fiber, or PX_ENOMEM in a fiber on a shared stack (its scope
** lives on the heap there: see px_sched_opts.shared_stacks) when out of
** memory, without running body.  Thread: scheduler (not in a
** hosted fiber without suspend: use the push/pop form).  Parks: whatever body
** does.
*/
PX_API int px_with_timeout(int64_t ns, px_scope_fn body, void *arg);

/*
** Runs body(arg) with every park inside interrupted, with PX_ECANCELED, once
** `token` is cancelled (at once if it is already), and returns what body
** returned.  PX_EINVAL (NULL token or body), PX_ENOFIBER or PX_ENOMEM as
** above, without running body; PX_EFORKED for a token made before a fork.  The
** token must outlive the call.  Thread: scheduler (not in a hosted fiber without suspend).
** Parks: whatever body does.
*/
PX_API int px_with_cancel(px_token *token, px_scope_fn body, void *arg);

/*
** The push/pop form of the two scopes above, for bindings whose body cannot be a
** C function (and for hosted fibers, whose body returns to the host at every
** park).  Each push opens a scope in the calling fiber, allocated on the heap:
** px_scope_push_timeout a deadline `ns` from now (too long for the clock: never),
** px_scope_push_deadline an absolute deadline (>= 0; a past one fires at the next
** park), px_scope_push_cancel a token, which must outlive the scope.  A push
** returns 0, PX_EINVAL (negative ns or deadline, NULL token), PX_ENOMEM or
** PX_ENOFIBER (push_cancel also PX_EFORKED, as px_with_cancel).  px_scope_pop
** closes and frees the innermost scope, which must have been opened by a push,
** and returns 0 if it never fired, PX_ETIMEDOUT or PX_ECANCELED if it did,
** PX_EINVAL when the innermost open scope was not opened by a push (or none is
** open), PX_ENOFIBER off-fiber.  Pops
** must match pushes in LIFO order, also around px_with_* calls; a fiber's scopes
** left open when it ends are closed for it.  Thread: scheduler.  Parks: no.
*/
PX_API int px_scope_push_timeout(int64_t ns);
PX_API int px_scope_push_deadline(int64_t deadline);
PX_API int px_scope_push_cancel(px_token *token);
PX_API int px_scope_pop(void);

/*
** A cancellation token, a flag and the list of scopes that use it: once
** cancelled, it stays cancelled and interrupts every park inside a scope that
** uses it, in any scheduler.
** px_token_new returns a token that is not cancelled, or NULL (no memory); the
** caller owns it.  Thread: any.  Parks: no.
** px_token_cancel cancels it and interrupts the fibers parked under it (each
** returns PX_ECANCELED from its park): a fiber of the calling thread's scheduler
** directly, any other through its scheduler; should that hand-over run out of
** memory, such a fiber is interrupted only when something else ends its park,
** and its next park sees the flag.  A fiber not parked sees the flag at its next
** park.  Returns 1 when this call cancelled
** it, 0 when it already was, PX_EINVAL for NULL, PX_EFORKED in the child of a
** fork for a token made before it (as px_with_cancel and px_scope_push_cancel;
** px_token_cancelled still reads it).  Thread: any.  Parks: no.
** px_token_cancelled returns 1 or 0 (0 for NULL).  Thread: any.  Parks: no.
** px_token_free releases it; no open scope, in any fiber, may still use it, and
** no px_token_cancel may be under way.  NULL does nothing.  Thread: any.
** Because any thread may cancel it, px_run does not report a deadlock while
** a fiber has a cancel scope open: it waits for the cancel.  px_sched_run
** does (all fibers parked and no hold); hold the scheduler for the thread.
*/
PX_API px_token *px_token_new(void);
PX_API int px_token_cancel(px_token *token);
PX_API int px_token_cancelled(const px_token *token);
PX_API void px_token_free(px_token *token);

/* ------------------------------------------------------------------------- */
/* Seeing into a run: names, the dump, fiber-local values                    */
/* ------------------------------------------------------------------------- */

/*
** Every report, trace line and dump names a fiber by its number -- a small
** count of its scheduler's fibers, 1 for the first (px_fiber_number) -- and
** its name when it has one: `fiber 7 "accept loop"`.  The 64-bit id stays the
** handle of the API.  Names cost nothing until one is set.
**
** px_fiber_set_name names fiber `id` (0: the calling fiber), a live fiber of
** the calling thread's scheduler; `name` is copied, its first
** PX_NAME_MAX - 1 bytes, and NULL removes the name.  Returns 0, PX_ENOFIBER
** when the thread runs no scheduler or `id` names none of its live fibers,
** PX_ENOMEM.  Thread: scheduler.  Parks: no.
**
** px_fiber_name returns fiber `id`'s name (0: the calling fiber's), NULL when
** it has none or is no live fiber of the thread's scheduler.  The text stays
** valid until the name is set again or the fiber ends.  Thread: scheduler.
** Parks: no.
**
** px_fiber_number returns the number reports print for `id`: its count within
** the scheduler that made it.  Any id, any thread; 0 for 0.  Parks: no.
*/
#define PX_NAME_MAX 64

PX_API int px_fiber_set_name(uint64_t id, const char *name);
PX_API const char *px_fiber_name(uint64_t id);
PX_API uint64_t px_fiber_number(uint64_t id);

/*
** Names an object -- a px_mutex, a px_chan, any object a px_park_info names --
** for deadlock reports and dumps, which then print `mutex "accounts"@0x...`.
** `name` is copied (its first PX_NAME_MAX - 1 bytes); NULL removes it.  The
** library's own objects drop their name when freed; an object of your own
** must be unnamed (NULL) before its memory is reused.  Returns 0, PX_EINVAL
** for a NULL object, PX_ENOMEM.  Thread: any.  Parks: no.
**
** px_object_name copies the name of `object` into buf (at most cap bytes,
** NUL-terminated) and returns its length, or 0 when it has none.
** Thread: any.  Parks: no.
*/
PX_API int px_object_set_name(const void *object, const char *name);
PX_API size_t px_object_name(const void *object, char *buf, size_t cap);

/* px_fiber_info.state */
#define PX_FIBER_READY   0
#define PX_FIBER_RUNNING 1
#define PX_FIBER_PARKED  2
#define PX_FIBER_ENDED   3

/* The most holders a px_fiber_info lists. */
#define PX_INFO_HOLDERS 8

/*
** What px_sched_inspect tells of one fiber.  Every pointer is valid only
** during the visit.
*/
typedef struct px_fiber_info {
    uint64_t id;
    uint64_t number;             /* px_fiber_number(id) */
    const char *name;            /* NULL: unnamed */
    int state;                   /* PX_FIBER_* */
    int hosted;                  /* 1: a hosted fiber (a greenlet, a coroutine) */
    /* Its wait, while parked (else NULL, -1, 0 or INT64_MAX): */
    const char *reason;          /* the park's reason ("mutex lock", "sleep"...) */
    const char *kind;            /* the object's kind ("mutex", "fd"...) */
    const void *object;          /* the object it waits on */
    char object_name[PX_NAME_MAX]; /* px_object_set_name's, "" for none */
    size_t nholders;             /* fibers holding the object, in holders[] */
    uint64_t holders[PX_INFO_HOLDERS];
    int fd;                      /* an fd wait: the fd, else -1 */
    unsigned events;             /* an fd wait: PX_READABLE and/or PX_WRITABLE */
    int64_t deadline;            /* on px_now()'s clock; INT64_MAX: none */
    /* How long it has waited, to a millisecond and to the scheduler's look at
    ** the clock before it parked: the scheduler looks whenever deadlines are
    ** due, after each wait in the kernel and when it takes in posts (a park
    ** costs no clock reading), so in a run without any of them -- fibers that
    ** only hand each other work -- it can read long. */
    int64_t parked_ns;
    /* Where it is: a C fiber's function (its symbol, when the dynamic linker
    ** knows it, else NULL; fn is its address), or a hosted fiber's text from
    ** px_sched_opts.describe ("" without one). */
    const char *where;
    px_fiber_fn fn;
} px_fiber_info;

/*
** Calls visit(ctx, info) for every fiber of `s` (NULL: the calling thread's
** running scheduler) that has not ended, in spawn order, until visit returns
** non-zero.  Returns the number of fibers visited; PX_EINVAL with no
** scheduler; PX_ETHREAD from a thread other than the one running `s`;
** PX_EFORKED.  The fibers must not change during the visit: visit may not
** park, spawn, wake or run the scheduler.  Thread: the scheduler's (a fiber,
** a post, or between runs).  Parks: no.
*/
PX_API int px_sched_inspect(px_sched *s, int (*visit)(void *ctx, const px_fiber_info *info),
                            void *ctx);

/*
** Writes a table of every live fiber of `s` (NULL: the calling thread's
** running scheduler) to `out` (NULL: stderr): number, name, state, what it
** waits for (reason, object and its name, holders, fd and direction, the
** deadline and how far off), how long it waited, and where.  Returns the
** number of fibers listed, or px_sched_inspect's errors.
** Thread: as px_sched_inspect.  Parks: no.
*/
PX_API int px_dump(px_sched *s, FILE *out);

/*
** From now on, signal `signo` makes every scheduler of the process write
** px_dump's table to stderr: the handler only writes a byte to a pipe, a
** thread of the library's reads it and posts the dump to each scheduler, which
** writes it at its next turn of the loop -- at once while it waits in the
** kernel, after the running fiber's turn while fibers run.  The environment
** variable PARATAXIS_DUMP_SIGNAL (a number or a name such as SIGUSR1 or USR1),
** read once per process by the first px_sched_new, does the same.  0 puts the
** previous handler back.  Returns 0; PX_EINVAL for a signal that cannot be
** caught (SIGKILL, SIGSTOP, out of range); PX_ENOMEM when the pipe or the thread
** cannot be had.  Thread: any.  Parks: no.
*/
PX_API int px_dump_signal(int signo);

/*
** Fiber-local values: a key (px_local) holds one value per fiber, as
** pthread_key_t does per thread.  A fiber that never sets one pays nothing.
**
** px_local_new makes a key.  destroy(value), when not NULL, runs once for each
** non-NULL value a fiber still holds when it ends -- on the scheduler's thread,
** px_self() being that fiber -- or is discarded with its scheduler (on the
** thread of px_sched_free, off-fiber: a run left with parked fibers, the
** child of a fork); it may not park.  inherit(value), when not NULL, gives a new
** fiber its value from its spawner's at px_spawn (px_spawn_sized,
** px_spawn_hosted and the group spawns too): what it returns is the child's
** value (return the same pointer to share it, a copy to own one, NULL for
** none).  Without inherit, a new fiber starts with NULL.  Returns NULL when
** out of memory.  Thread: any.  Parks: no.
**
** px_local_set sets the calling fiber's value; the value it replaces, when
** not NULL and not the same, is destroyed.  Returns 0, PX_EINVAL for a NULL
** key, PX_ENOFIBER off-fiber, PX_ENOMEM.  px_local_get returns the calling
** fiber's value, NULL when none, off-fiber or for a NULL key.
** Thread: scheduler (a fiber).  Parks: no.
**
** px_local_free gives the key up; fibers that still hold a value keep it
** until they end, and it is destroyed then.  NULL does nothing.
** Thread: any.  Parks: no.
*/
typedef struct px_local px_local;

PX_API px_local *px_local_new(void (*destroy)(void *value), void *(*inherit)(void *value));
PX_API int px_local_set(px_local *key, void *value);
PX_API void *px_local_get(const px_local *key);
PX_API void px_local_free(px_local *key);

/* ------------------------------------------------------------------------- */
/* Hosted fibers                                                             */
/* ------------------------------------------------------------------------- */

/*
** A hosted fiber runs on its host's own execution context -- a Lua coroutine, a
** Python greenlet -- instead of a C stack, and is scheduled, parked, woken,
** interrupted, joined and traced like any other fiber.
**
** Because every primitive parks as its last step, every primitive works
** unchanged on every host.
**
**   - resume(ctx), NULL for a pulled fiber (see px_sched_next): called on
**     the scheduler's thread, with px_self() set to the fiber, to run it
**     until it parks, yields or ends.  It returns PX_HOST_DONE once the
**     fiber's body has ended, anything else while it lives (returning
**     without a park or yield counts as a yield).  When the
**     last park was interrupted, its dereg has run before resume is called.
**     The body may end in the very turn it recorded a park or a yield (got
**     PX_EYIELD, then ended instead of yielding: an error, a kill): the park
**     is undone with the fiber -- its deadline dropped, its dereg run as for
**     an interrupted park -- and the fiber gets no further turn.
**   - suspend(ctx), for a host that can switch inside C (a greenlet): called
**     from inside px_park, px_park_with, px_yield, px_sleep*, px_join and the
**     waiting sync calls on the fiber, to switch back to the scheduler (making
**     resume return); it returns when the fiber is resumed, and the call then
**     returns its outcome as for a C fiber.  NULL for a host that cannot (Lua):
**     the park is recorded and PX_EYIELD returned; the host must return from
**     resume at once, and once resumed it reads px_park_result() (after a park,
**     sleep), calls the same function again (px_join, a sync wait: it returns
**     the outcome at once), or just goes on (px_yield).
**   - release(ctx), may be NULL: called once, on the scheduler's thread, when
**     the scheduler drops the fiber (it ended, or px_sched_free discarded it):
**     the place to free host_ctx.  It may not run the scheduler (px_sched_next
**     returns PX_EBUSY there).
**
** Only the push/pop scope form may be used in a hosted fiber without suspend.
*/
#define PX_HOST_DONE 1

typedef struct px_host_ops {
    int (*resume)(void *host_ctx);
    void (*suspend)(void *host_ctx);
    void (*release)(void *host_ctx);
} px_host_ops;

/*
** Spawns a hosted fiber on `s`, at the tail of its ready queue (ops is copied).
** With a NULL ops->resume the fiber is pulled: px_sched_next hands its turns to
** the host, and `s` is run only by px_sched_next from then on.
** Returns a handle as px_spawn (px_join gives a NULL result); NULL for NULL s or
** ops, no memory, a call from a thread other than the one running `s`, a pulled
** fiber for a px_sched_run under way, or in the child of a fork when `s` was
** made before it.  `host_ctx` stays the
** host's until release(host_ctx).
** Thread: the scheduler's, or any while `s` is not running (before its first run
** included).  Parks: no.
*/
PX_API px_fiber *px_spawn_hosted(px_sched *s, const px_host_ops *ops, void *host_ctx);

/* ========================================================================= */
/* The synchronization family                                                */
/* ========================================================================= */

/*
** Mutex, RwLock, WaitGroup, Barrier, Once, Semaphore, Event and Channel, built
** on px_park / px_wake alone.  They park the fiber, never the thread.  Rules
** common to all of them:
**
**   - One scheduler at a time.  An object is not thread-safe: use it from
**     the fibers of one scheduler (and off-fiber from its thread); between
**     schedulers, use a channel per scheduler and px_sched_post.  While
**     fibers of one scheduler wait on an object or hold it, a call from
**     anywhere else -- a fiber or an off-fiber call of another run, or a
**     thread that runs none and is not that scheduler's -- that would park
**     on it, take a hold beside them or hand something over to them (a
**     release, a set, a send, a close, the count reaching zero) returns
**     PX_ETHREAD and changes nothing.  Calls that would do none of these
**     answer as they would (a try form that fails anyway: PX_EBUSY), so the
**     uncontended paths pay nothing, and two threads using an object nobody
**     waits on or holds at the same moment is not detected: still the
**     caller's error.  PX_ETHREAD is one of the common wait codes below.
**   - px_<kind>_new returns the object, or NULL with errno set to EINVAL (a bad
**     argument) or ENOMEM.  Thread: any.  Parks: no.
**   - px_<kind>_free returns 0, or PX_EBUSY when the object is held or fibers
**     wait on it (nothing is freed then: no waiter is ever stranded).  NULL
**     returns 0.  Thread: the scheduler's.  Parks: no.
**   - Every operation that may wait is bounded by the scopes around it: it
**     returns PX_ETIMEDOUT or PX_ECANCELED when one interrupts it, and then
**     nothing of the wait is left queued and nothing was acquired; a grant
**     that raced the interrupt went on to the next waiter.  It returns
**     PX_ENOFIBER off-fiber and PX_EINVAL for a NULL object.  In a fiber on a
**     shared stack (px_sched_opts.shared_stacks) it returns PX_ENOMEM when the
**     memory to keep the fiber's stack while it waits cannot be had: it did
**     not wait, and as after an interrupt nothing is left queued and nothing
**     was acquired.  These, with PX_ETHREAD above and PX_EYIELD below, are
**     the common wait codes.
**   - Only a hand-over (or a scope) ends a wait.  A px_wake that no release
**     sent, from any thread, makes the waiter look and park again, keeping its
**     place in the queue; a release made before it ran still hands over to it.
**     A release goes past a waiter that a scope interrupted but that has not
**     run yet: it is leaving.
**   - In a hosted fiber whose host cannot switch inside C, such an operation
**     returns PX_EYIELD: the host yields, and once resumed calls the same
**     function again with the same arguments, which returns the outcome at
**     once (it does not wait again).
**   - Waits are FIFO, and a release hands over directly: the next waiter owns
**     what it waited for before it wakes, so no fiber can barge in between.
**   - Each wait has a reason that names the primitive and the operation
**     ("Mutex lock", "RwLock read lock", ...), shown by traces and deadlock
**     reports; a report names the fiber holding a mutex or write lock and
**     prints the wait-for cycle when there is one.
**
** Holders are fibers: a fiber that ends holding a Mutex, a write lock or read
** holds of an RwLock, or running a Once, releases them as it ends.
*/

/* -- Mutex ------------------------------------------------------------------ */

/*
** A non-reentrant lock owned by a fiber.
**
** px_mutex_lock parks until the caller owns m.  Returns 0; PX_EOWNERDEAD when
** the caller owns m but its previous owner ended holding it (the state m
** protects may be half-updated; only the first owner after the death is
** told, so it is the one to repair it); PX_EDEADLK when the caller owns m
** already; PX_ETHREAD, without parking, when m is held by a fiber of another
** scheduler (one scheduler at a time, above); and the common wait codes.
** Wait reason "Mutex lock".
** px_mutex_trylock takes m only if it is free and nobody waits: 0 or
** PX_EOWNERDEAD as lock, PX_EBUSY when it is held or waited for, PX_EDEADLK
** when the caller owns it, PX_ENOFIBER, PX_EINVAL.  Parks: no.
** px_mutex_unlock hands m to the first waiter, or frees it.  Returns 0;
** PX_EPERM when the caller does not own it (nothing changes); PX_ENOFIBER,
** PX_EINVAL.  Parks: no.
** px_mutex_owner returns the owner's fiber id, 0 when free (or NULL m);
** px_mutex_waiters how many fibers wait.  Thread: the scheduler's, on or
** off-fiber.  Parks: no.
** The uncontended lock and unlock allocate nothing and take no lock.
*/
typedef struct px_mutex px_mutex;

PX_API px_mutex *px_mutex_new(void);
PX_API int px_mutex_lock(px_mutex *m);
PX_API int px_mutex_trylock(px_mutex *m);
PX_API int px_mutex_unlock(px_mutex *m);
PX_API uint64_t px_mutex_owner(const px_mutex *m);
PX_API size_t px_mutex_waiters(const px_mutex *m);
PX_API int px_mutex_free(px_mutex *m);

/* -- RwLock ----------------------------------------------------------------- */

/*
** A writer-preferring read/write lock: any number of fibers hold it for
** reading, or one for writing.  Once a writer waits, no new reader is
** admitted (a stream of readers cannot starve it); writers are served FIFO;
** the readers queued behind a writer are admitted together when it leaves.
**
** px_rwlock_rdlock adds a read hold.  A fiber that holds read holds already
** gets another at once (reentrant, even with a writer waiting); the writer
** may take read holds too.  Returns 0; PX_EOWNERDEAD (the hold is taken) when
** a writer ended holding the lock and no writer has taken it since (readers
** cannot repair the state, but must know it may be torn); PX_ENOMEM when the
** caller's first read hold needs memory there is none of; PX_ETHREAD as
** px_mutex_lock, and also beside read holds of another scheduler's fibers
** (its writer would then wait for this one's reader); the common wait codes.
** Wait reason "RwLock read lock".
** px_rwlock_wrlock parks until the caller holds the write lock.  Returns 0;
** PX_EOWNERDEAD when a writer ended holding it and no writer took it since
** (the caller is the one to repair the state); PX_EDEADLK at once,
** without parking, when the caller holds it already or holds read holds (an
** upgrade would wait for itself); PX_ETHREAD as px_mutex_lock; the common
** wait codes.  Wait reason "RwLock write lock".
** px_rwlock_tryrdlock / px_rwlock_trywrlock never park and never pass a
** queued waiter: 0, PX_EOWNERDEAD, PX_ENOMEM (read) or PX_EDEADLK as their
** parking forms (PX_ETHREAD too, where the read hold would be taken beside
** another scheduler's readers), or PX_EBUSY where those would park.
** px_rwlock_rdunlock releases one read hold of the caller; px_rwlock_wrunlock
** releases its write lock (read holds it took while writing stay: that is a
** downgrade).  Both return 0, or PX_EPERM when the caller holds no such hold.
** px_rwlock_readers returns the number of fibers holding read holds,
** px_rwlock_writer the writer's id (0 when none), px_rwlock_waiters the
** number of waiting fibers.  Thread: the scheduler's, on or off-fiber.
** A fiber that ends holding the write lock or read holds releases all of
** them; only the write lock's death is reported (PX_EOWNERDEAD above).
** Finding the caller's read holds costs one step per hold the caller has.
*/
typedef struct px_rwlock px_rwlock;

PX_API px_rwlock *px_rwlock_new(void);
PX_API int px_rwlock_rdlock(px_rwlock *l);
PX_API int px_rwlock_wrlock(px_rwlock *l);
PX_API int px_rwlock_tryrdlock(px_rwlock *l);
PX_API int px_rwlock_trywrlock(px_rwlock *l);
PX_API int px_rwlock_rdunlock(px_rwlock *l);
PX_API int px_rwlock_wrunlock(px_rwlock *l);
PX_API size_t px_rwlock_readers(const px_rwlock *l);
PX_API uint64_t px_rwlock_writer(const px_rwlock *l);
PX_API size_t px_rwlock_waiters(const px_rwlock *l);
PX_API int px_rwlock_free(px_rwlock *l);

/* -- WaitGroup -------------------------------------------------------------- */

/*
** A counter of outstanding jobs.  px_waitgroup_add(wg, n) adds n (which may be
** negative) and px_waitgroup_done subtracts one; both are plain arithmetic,
** need no fiber, and return 0, or PX_EINVAL when the count would go below
** zero or past INT64_MAX (it is left unchanged), PX_ETHREAD (unchanged)
** when it would reach zero with fibers of another scheduler waiting.  When
** the count reaches zero every waiter is woken.  px_waitgroup_wait returns
** 0 at once at zero, else parks until zero; a waiter woken at zero returns 0
** even if the count rose again before it ran.  The common wait codes.  Wait
** reason "WaitGroup wait".  px_waitgroup_count returns the count (0 for
** NULL).
*/
typedef struct px_waitgroup px_waitgroup;

PX_API px_waitgroup *px_waitgroup_new(void);
PX_API int px_waitgroup_add(px_waitgroup *wg, int64_t n);
PX_API int px_waitgroup_done(px_waitgroup *wg);
PX_API int px_waitgroup_wait(px_waitgroup *wg);
PX_API int64_t px_waitgroup_count(const px_waitgroup *wg);
PX_API int px_waitgroup_free(px_waitgroup *wg);

/* -- Barrier ---------------------------------------------------------------- */

/*
** `parties` fibers meet at a phase boundary (new: EINVAL for 0 parties).
** px_barrier_arrive_and_wait parks until `parties` fibers arrived in this
** phase.  The last arriver does not park: it returns 1 (the leader), opens
** the next phase at once (so its arrivals never mix with this one's) and wakes
** the others, who return 0.  An interrupted arrival withdraws its count and
** returns the common wait code: it is not counted even when a scope
** interrupted it just before the arrival that would have completed the phase
** (that arrival then waits for another).  Wait reason "Barrier arrive".
** px_barrier_phase returns how many phases have completed;
** px_barrier_waiting how many fibers wait in the current one.
*/
typedef struct px_barrier px_barrier;

PX_API px_barrier *px_barrier_new(size_t parties);
PX_API int px_barrier_arrive_and_wait(px_barrier *b);
PX_API uint64_t px_barrier_phase(const px_barrier *b);
PX_API size_t px_barrier_waiting(const px_barrier *b);
PX_API int px_barrier_free(px_barrier *b);

/* -- Once ------------------------------------------------------------------- */

/*
** An action run exactly once among any number of racing fibers.
**
** px_once_do: the first caller runs fn(arg) in its own fiber and returns
** what fn returned (so keep fn's codes apart from the 0 the others get);
** callers arriving while it runs park until it finished and return 0; later
** callers return 0 at once.  The action is done once fn returned, whatever it
** returned (a failed action is not retried), or once its fiber ended inside
** it.  PX_EDEADLK when called from inside the action by its own fiber;
** PX_EINVAL for NULL o or fn; PX_ETHREAD as px_mutex_lock; the common wait
** codes.  Wait reason "Once init".
** px_once_begin / px_once_end are the same in two steps, for a binding that
** runs the action in its own language: begin returns 1 when the caller must
** run the action and then call end; 0 when it is done (after parking while
** another fiber ran it, if need be); PX_EDEADLK, PX_ETHREAD and the wait codes
** as do.
** end returns 0, or PX_EPERM when the caller did not begin the action (or
** ended it already), PX_ENOFIBER, PX_EINVAL.  A runner that ends between
** begin and end has ended the action: it is done and its waiters return 0.
** px_once_done returns 1 once the action is done, else 0 (on or off-fiber).
*/
typedef struct px_once px_once;
typedef int (*px_once_fn)(void *arg);

PX_API px_once *px_once_new(void);
PX_API int px_once_do(px_once *o, px_once_fn fn, void *arg);
PX_API int px_once_begin(px_once *o);
PX_API int px_once_end(px_once *o);
PX_API int px_once_done(const px_once *o);
PX_API int px_once_free(px_once *o);

/* -- Semaphore -------------------------------------------------------------- */

/*
** A counting semaphore.  px_sem_acquire takes one unit, parking until one is
** handed to it (FIFO); 0 or the common wait codes; wait reason "Semaphore
** acquire".  px_sem_tryacquire: 0, or PX_EBUSY when no unit is free (units
** are never free while fibers wait: tryacquire cannot take one from them).
** px_sem_release gives one unit back (to the first waiter, if any): 0,
** PX_EINVAL when the count would overflow, PX_ETHREAD when the waiters are
** another scheduler's fibers.  Any fiber may release; neither
** release nor tryacquire needs a fiber.  px_sem_value returns the free
** units, px_sem_waiters the waiting fibers.
*/
typedef struct px_sem px_sem;

PX_API px_sem *px_sem_new(size_t initial);
PX_API int px_sem_acquire(px_sem *sem);
PX_API int px_sem_tryacquire(px_sem *sem);
PX_API int px_sem_release(px_sem *sem);
PX_API size_t px_sem_value(const px_sem *sem);
PX_API size_t px_sem_waiters(const px_sem *sem);
PX_API int px_sem_free(px_sem *sem);

/* -- Event ------------------------------------------------------------------ */

/*
** A level, like trio's and asyncio's Event: px_event_wait returns 0 at once
** while it is set, else parks until px_event_set (wait reason "Event wait").
** px_event_set sets it and wakes every waiter, returning how many it woke
** (PX_ETHREAD, not set, when the waiters are another scheduler's fibers); a
** woken waiter returns 0 even if the event was cleared before it ran.
** px_event_clear unsets it (0).  Neither needs a fiber.  px_event_is_set
** returns 1 or 0, px_event_waiters the fibers parked in px_event_wait (and
** select cases waiting on it; 0 for NULL).
*/
typedef struct px_event px_event;

PX_API px_event *px_event_new(void);
PX_API int px_event_set(px_event *e);
PX_API int px_event_clear(px_event *e);
PX_API int px_event_is_set(const px_event *e);
PX_API int px_event_wait(px_event *e);
PX_API size_t px_event_waiters(const px_event *e);
PX_API int px_event_free(px_event *e);

/* -- Channel ---------------------------------------------------------------- */

/*
** A FIFO channel of pointers between fibers, holding up to `capacity` values;
** capacity 0 makes each send a rendezvous with a receiver.
**
** px_chan_send parks while the channel is full (wait reason "Channel send");
** 0 once v is buffered or handed to a receiver (with capacity 0: once a
** receiver took it); PX_ECLOSED when the channel is or gets closed (v was
** not sent); the common wait codes (v was not sent).
** px_chan_recv parks while it is empty (wait reason "Channel recv"); 0 with
** the value in *v; PX_ECLOSED once it is closed and drained; the common wait
** codes (nothing was taken: the value stays first in line).  Values come out
** in the order they went in; none is lost or duplicated by an interrupt.
** One exception to the common rule: when a receiver took a parked sender's
** value before an interrupt of that sender took effect (possible only if
** the receiver ran while the scheduler was not running: an off-fiber
** px_chan_tryrecv), the value cannot be taken back and send returns 0.
** px_chan_trysend / px_chan_tryrecv never park: PX_EBUSY when they would;
** PX_ECLOSED and PX_ETHREAD as their parking forms.  Neither needs a fiber.
** Every one of them returns PX_ETHREAD (nothing sent, nothing taken) when
** the fibers it would hand to, take from or wait beside are another
** scheduler's.
** px_chan_close: receivers get what is buffered, then PX_ECLOSED; waiting
** senders get PX_ECLOSED.  Returns 0, PX_ECLOSED when already closed, or
** PX_ETHREAD (not closed) when the waiters are another scheduler's fibers.
** Needs no fiber.  px_chan_len returns the buffered values, px_chan_cap the
** capacity, px_chan_waiters the fibers parked in send or recv (and select
** cases waiting on it; all three 0 for NULL); new: EINVAL for a capacity no
** ring can hold.
*/
typedef struct px_chan px_chan;

PX_API px_chan *px_chan_new(size_t capacity);
PX_API int px_chan_send(px_chan *ch, void *v);
PX_API int px_chan_recv(px_chan *ch, void **v);
PX_API int px_chan_trysend(px_chan *ch, void *v);
PX_API int px_chan_tryrecv(px_chan *ch, void **v);
PX_API int px_chan_close(px_chan *ch);
PX_API size_t px_chan_len(const px_chan *ch);
PX_API size_t px_chan_cap(const px_chan *ch);
PX_API size_t px_chan_waiters(const px_chan *ch);
PX_API int px_chan_free(px_chan *ch);

/* ------------------------------------------------------------------------- */
/* I/O readiness: fibers that wait on file descriptors                       */
/* ------------------------------------------------------------------------- */

/*
** A fiber waits until an fd is ready, then makes the call itself while it runs
** (readiness, not completion): a buffer may live anywhere, a shared stack
** included, and a wait that a scope ends leaves nothing in flight.  Each
** scheduler waits on its fds through one epoll set, made at its first fd wait
** (a run that waits on no fd pays nothing); while fibers wait on fds, the
** scheduler looks at the set once per batch of ready fibers, so a busy run
** never starves I/O.  See docs/io.md.
*/
#define PX_READABLE 1u
#define PX_WRITABLE 2u

/*
** Parks the calling fiber until `fd` is ready for `events` (PX_READABLE,
** PX_WRITABLE or both: then either ends it).  "Ready" means "try the call": an
** error or a hang-up on fd (EPOLLERR, EPOLLHUP) wakes both directions, and the
** call then reports it.  Wait reason "fd readable" / "fd writable"; the fiber
** is an outside park (an fd can become ready at any time), never a deadlock.
** Returns 0 when fd is ready; PX_ETIMEDOUT or PX_ECANCELED when a scope ended
** the wait (fd no longer registered for it); PX_ECLOSED when
** px_fd_notify_closing(fd) ran while it waited; PX_EBUSY, without waiting,
** when another fiber of this scheduler waits on fd in one of the same
** directions (one reader and one writer may wait at once); PX_ENOTSUP for an
** fd epoll refuses (a regular file or a directory: use px_run_blocking);
** PX_EINVAL for a negative or closed fd, the scheduler's own, or `events` 0
** or with other bits; PX_ENOMEM; PX_ENOFIBER off-fiber; PX_EYIELD in a hosted
** fiber whose host cannot switch inside C: the wait is recorded, and the same
** call (same fd and events) once the fiber is resumed returns its outcome --
** that fiber must make it, before any other wait.
** A stray px_wake never ends the wait: the fiber parks again.
** Close an fd only after px_fd_notify_closing: a waiter of an fd closed
** without it is not woken (its scope ends it), and until then it keeps its
** direction of that fd number busy.
** Thread: scheduler.  Parks: yes.
*/
PX_API int px_wait_fd(int fd, unsigned events);

/*
** Wakes every fiber waiting on `fd`, in any scheduler of the process: their
** px_wait_fd returns PX_ECLOSED; and forgets fd, so that once it returns, no
** event of fd can wake anyone -- call it right before close(fd), and the fd
** number can be reused at once.  A waiter of another thread's scheduler is
** woken by a post to that scheduler; its px_wait_fd returns PX_ECLOSED even if
** its scope fires meanwhile.  A fiber whose wait an event of fd ended before
** the call, and that has not run since, is not told: its px_wait_fd returns 0,
** and a call it then makes on fd reaches whatever file has that number by
** then -- as a thread between poll(2) and read(2) would.  A program that closes
** an fd another fiber may still use makes that fiber look again (the Python
** socket compares its fileno after each wait).  Returns 0 (also when nobody
** waited), PX_EINVAL for a negative fd.  In the child of a fork, the parent's schedulers are left
** alone.  Thread: any.  Parks: no.
*/
PX_API int px_fd_notify_closing(int fd);

/* ------------------------------------------------------------------------- */
/* Fiber-aware I/O calls                                                     */
/* ------------------------------------------------------------------------- */

/*
** The calls a fiber makes on sockets and pipes without holding up its thread.
** Each tries the system call first, and only when it would block (EAGAIN)
** waits with px_wait_fd and tries again, so a wait that a scope ends leaves
** nothing in flight: no byte is lost or read twice.  They keep the system
** call's convention, unlike the rest of this header: they return what it
** returns -- a count, 0, or -1 with errno -- and the outcomes of the wait come
** as errno values too:
**
**   - ETIMEDOUT, ECANCELED: a timeout or cancel scope ended the wait;
**   - EBUSY: another fiber of the scheduler waits on the fd in that direction;
**   - EBADF: px_fd_notify_closing(fd) ran while the fiber waited (the fd is
**     being closed), or fd is not open;
**   - ENOMEM: no memory for the wait (a fiber on a shared stack included);
**   - EPERM: the fiber's scheduler belongs to the parent of a fork()
**     (PX_EFORKED): "not permitted", as every use of a parent's object in
**     the child is (the forking fiber itself is no fiber in the child: it
**     waits off-fiber, below);
**   - EOPNOTSUPP: epoll refuses the fd (PX_ENOTSUP: a regular file, which
**     never says EAGAIN, so only a file put at that fd number meanwhile);
**   - EINVAL: an fd px_wait_fd refuses (the scheduler's own).
**
** A call that can complete at once does, inside a scope that fired too.  Off
** a fiber (any thread; a scheduler's thread outside its fibers) they wait
** with poll(2) on the thread, as the plain call on a blocking fd would block
** it, and return -1/EINTR when a signal handler interrupts that wait.  In a
** hosted fiber whose host cannot switch inside C (see px_host_ops) they never
** wait: they return -1/EAGAIN as the non-blocking call does, having recorded
** nothing, and the host waits with px_wait_fd and calls again.
**
** The fd must be non-blocking for px_read, px_write, px_accept (the listening
** socket) and px_connect: on a blocking fd the system call itself blocks the
** thread, and with it every fiber of the scheduler (make it non-blocking with
** px_fd_set_nonblocking, SOCK_NONBLOCK, O_NONBLOCK; px_accept and
** px_tcp_listen return non-blocking fds).  px_recv and px_send pass
** MSG_DONTWAIT and work on blocking sockets too.  A regular file is always
** "ready": px_read and px_write on one never wait, but they hold up the
** thread while the disk works (see docs/io.md, "What blocks a run").
** Before close(fd), call px_fd_notify_closing(fd) when a fiber may be waiting
** on it.  Thread: any (a fiber, or off-fiber as above).  Parks: yes, in
** px_wait_fd (wait reason "fd readable" / "fd writable").
*/

/*
** One read(2) of at most n bytes: returns what is there as soon as something
** is, 0 at the end of the file (a pipe or a socket whose writer closed: a
** hang-up wakes the reader), or -1 with errno.
*/
PX_API ssize_t px_read(int fd, void *buf, size_t n);

/*
** Writes all n bytes with write(2), waiting whenever the fd is full.  Returns
** n; or, when an error or a scope ends it midway, the count written so far
** (less than n) with errno saying why, so the caller knows exactly what the
** reader will get; -1 when nothing was written.  As write(2), it raises
** SIGPIPE on a pipe or socket whose reader is gone, unless the program
** ignores SIGPIPE (then -1/EPIPE); px_send never does.
*/
PX_API ssize_t px_write(int fd, const void *buf, size_t n);

/*
** One recv(2) with `flags` and MSG_DONTWAIT: as px_read, for a socket.
** MSG_WAITALL has no effect (the call returns what is there).
*/
PX_API ssize_t px_recv(int fd, void *buf, size_t n, int flags);

/*
** Sends all n bytes with send(2), `flags` with MSG_NOSIGNAL and MSG_DONTWAIT:
** returns as px_write, and a peer that is gone gives -1/EPIPE (or the count
** sent before, with errno EPIPE), never SIGPIPE.
*/
PX_API ssize_t px_send(int fd, const void *buf, size_t n, int flags);

/*
** Accepts a connection on non-blocking listening socket `fd`, waiting for one:
** accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC, so the new fd is ready for
** the calls above.  addr and len as accept(2) (both may be NULL).  Returns the
** new fd, or -1 with errno.
*/
PX_API int px_accept(int fd, struct sockaddr *addr, socklen_t *len);

/*
** Connects non-blocking socket `fd` to addr and waits until the connection is
** made or fails: returns 0, or -1 with errno, the socket's own error
** (ECONNREFUSED, ETIMEDOUT...) included.  When a scope ends the wait (-1,
** ETIMEDOUT or ECANCELED, as any wait here) the socket is left connecting:
** close it (after px_fd_notify_closing if another fiber may wait on it).  A
** Unix-domain listener with a full backlog gives -1/EAGAIN at once, as
** connect(2) does: nothing says when to try again.
*/
PX_API int px_connect(int fd, const struct sockaddr *addr, socklen_t len);

/* Sets O_NONBLOCK on fd (fcntl).  Returns 0, or -1 with errno. */
PX_API int px_fd_set_nonblocking(int fd);

/*
** A listening TCP socket, non-blocking and close-on-exec, with SO_REUSEADDR,
** bound to numeric address `host` ("127.0.0.1", "::1"; NULL for any address)
** and numeric `port` ("0" for one the kernel picks: getsockname says which),
** with listen(2)'s `backlog`.  Numeric only: a name would need a DNS lookup,
** which blocks the thread.  Returns the fd, or -1 with errno (EINVAL for a
** host or port that is not numeric, or NULL port; bind's and listen's errors,
** EADDRINUSE...).
*/
PX_API int px_tcp_listen(const char *host, const char *port, int backlog);

/* ========================================================================= */
/* The blocking pool                                                         */
/* ========================================================================= */

/*
** A call that blocks its thread -- a file read, a DNS lookup, a library with
** no non-blocking form -- blocks every fiber of its scheduler.  The blocking
** pool runs such a call on a thread of its own while only the calling fiber
** parks.  It is process-wide and lazy: nothing is made until the first job.
** Its threads are started on demand, at most the cap (px_blocking_set_max:
** default 64, or the environment variable PARATAXIS_BLOCKING_THREADS, read
** when the pool is made); a thread idle for 5 seconds exits.  Jobs start in
** the order they were submitted.  Pool threads never run fibers: a fiber call
** made by a job returns PX_ENOFIBER (or 0 / NULL, as its comment says).
**
** After fork(), in the child of a process whose pool was made before the fork,
** every call below refuses with PX_EFORKED (the pool's threads are not in the
** child); a child whose parent never used the pool makes its own.  In the
** parent, jobs in flight at the fork go on and complete.  At process exit,
** threads still running jobs (an abandoned one that never ends, say) are
** neither joined nor waited for: exit() ends them with the process.
*/

/* px_run_blocking's flag: on a scope that fires while fn runs, return at once
** and hand fn's result to release() when it ends. */
#define PX_BLOCKING_ABANDON 1u

/*
** Runs fn(arg) on a thread of the pool while the calling fiber parks, and
** returns 0 with fn's return in *result (when result is not NULL; it is set to
** NULL first).  The park is bounded by the fiber's scopes, and what a scope
** that fires does depends on where the job is:
**
**   - not started (queued behind others: the pool is at its cap), or a scope
**     that had fired before the call: the job is dequeued (never submitted),
**     fn never runs, release(arg, NULL) is called (on the calling fiber,
**     before the return) and the scope's code returned;
**   - running, by default (trio's abandon_on_cancel=False): the fiber waits
**     on for fn to end, whatever its scopes say, and the call returns 0 with
**     the result -- the scope has fired all the same: its next park returns
**     its code, and its pop reports it;
**   - running, with PX_BLOCKING_ABANDON: the call returns the scope's code at
**     once; fn runs on, and release(arg, result) is called on the pool thread
**     when it returns.  `arg` must then outlive the call: never a pointer into
**     the fiber's stack.
**
** Either way px_blocking_cancelled() turns 1 for fn.  A job that ended before
** its fiber noticed the scope delivers its result: 0.  So release, which may be
** NULL, is called exactly once for every job the call accepted whose result the
** caller does not get -- exactly when the call returns PX_ETIMEDOUT or
** PX_ECANCELED -- and never otherwise; the same holds for a fiber that ends or
** is discarded (px_sched_free) before it collects its job.  It may be called on
** a pool thread: it must not call fiber functions (they return PX_ENOFIBER).
**
** A stray px_wake aimed at the fiber does not end the wait.  A fiber on a
** shared stack that has no memory to park on waits holding its thread (as the
** blocking call would).  px_sched_cancel ends the wait as a scope does.
**
** Returns 0; PX_ETIMEDOUT / PX_ECANCELED as above; PX_EINVAL for a NULL fn or
** a flag other than PX_BLOCKING_ABANDON; PX_ENOFIBER off-fiber; PX_EFORKED in
** the child of a fork (see above); PX_ENOMEM when the job's record cannot be
** had, or no thread can be started while none runs (nothing ran; release is
** not called for any of these refusals).  In a hosted fiber whose host cannot
** switch inside C, PX_EYIELD: the job is recorded for the fiber, which must
** yield; once resumed it calls px_run_blocking again with the same fn and
** arg, and that call returns the outcome (or PX_EYIELD again after a stray
** wake, or while it waits on for fn after a scope fired).  A host that never
** calls again leaves the job to the fiber's end, which gives it up as above.
** Thread: scheduler.  Parks: yes, wait reason "blocking job", an outside park
** (PX_PARK_OUTSIDE: no deadlock while a job runs).
*/
PX_API int px_run_blocking(void *(*fn)(void *arg), void *arg,
                           void (*release)(void *arg, void *result), unsigned flags,
                           void **result);

/*
** Returns 1 on a pool thread whose current job's fiber gave up on it or was
** interrupted (a scope fired, or the fiber ended), so that fn may stop early;
** 0 otherwise, and on any thread that is not running a job of the pool.
** Thread: any.  Parks: no.
*/
PX_API int px_blocking_cancelled(void);

/*
** Sets the cap on the pool's threads to n (n >= 1), overriding
** PARATAXIS_BLOCKING_THREADS.  A lower cap ends idle threads above it at once
** and busy ones once their job ends; a higher one starts threads for the jobs
** that wait.  Returns 0, PX_EINVAL for n = 0, PX_EFORKED in the child of a
** fork (see above).  Thread: any.  Parks: no.
*/
PX_API int px_blocking_set_max(size_t n);

/* ------------------------------------------------------------------------- */
/* DNS                                                                       */
/* ------------------------------------------------------------------------- */

/*
** getaddrinfo(3) on the blocking pool: the calling fiber parks while a pool
** thread makes the lookup.  It keeps getaddrinfo's convention: returns 0 and
** sets *res (free it with freeaddrinfo), or an EAI_* code.  A scope that fires
** abandons the lookup: EAI_SYSTEM with errno ETIMEDOUT or ECANCELED, and the
** lookup's thread frees what it finds, and the copies of node, service and
** hints it works on, when it ends.  EAI_MEMORY when the pool refuses for want
** of memory.  Off-fiber (and in the child of a fork whose pool refuses) it
** simply calls getaddrinfo, which blocks the thread.  In a hosted fiber that
** cannot switch inside C it returns EAI_SYSTEM with errno EAGAIN: yield, and
** call it again once resumed (any arguments: the recorded lookup's are used).
** Thread: any.  Parks: yes (on a fiber), wait reason "blocking job".
*/
struct addrinfo;   /* <netdb.h>'s */
PX_API int px_getaddrinfo(const char *node, const char *service,
                          const struct addrinfo *hints, struct addrinfo **res);

/* ------------------------------------------------------------------------- */
/* Structured concurrency: groups, futures, select                           */
/* ------------------------------------------------------------------------- */

/* -- Group ------------------------------------------------------------------ */

/*
** A group (a nursery) owns the fibers spawned into it: px_group_wait returns
** only once every one of them ended, so no member outlives the code that made
** the group, and a failure goes somewhere.  A member is a function that
** returns 0, or a non-zero status that says it failed (a PX_E* code or a
** value of the program's own).  The first failure cancels the group: every
** member runs inside the group's own cancel scope, so each wait of each
** member -- a lock, a channel, a sleep, an fd -- ends with PX_ECANCELED, and
** the members return.  A member that returns PX_ECANCELED once the group is
** cancelled has not failed: it did what the cancel asked.  Every failure is
** kept, in the order it came: the first is px_group_wait's return,
** px_group_failures gives them all.
**
** px_group_new makes a group of the calling fiber's scheduler; NULL off-fiber
** (no scheduler) or out of memory.  Thread: scheduler.  Parks: no.
**
** px_group_spawn spawns fn(arg) as a member (a fiber of the default stack
** size, detached: the group joins it).  Any fiber of the scheduler may spawn
** into an open group, a member into its own group included, and so may the
** owner while it waits in px_group_wait.  Returns 0; PX_ECANCELED, spawning
** nothing, once the group is cancelled (a member that would start cancelled
** is not started); PX_ECLOSED once px_group_wait returned; PX_EINVAL for
** NULL g or fn; PX_ENOMEM (fiber, stack, record); PX_ETHREAD from another
** scheduler's fiber or thread; PX_ENOFIBER off-fiber.  Thread: scheduler.
** Parks: no.
**
** px_group_wait parks until every member ended (wait reason "group wait",
** held by the members), then closes the group: from then on spawns are
** refused.  Returns 0 when no member failed; the first failure's status
** otherwise; PX_ETIMEDOUT or PX_ECANCELED when a scope of the caller fired
** while it waited and no member failed -- the scope cancels the group and
** the wait goes on, shielded, until every member ended, so even then no
** member outlives the call.  PX_EINVAL for NULL g, a group already waited
** for or one another fiber waits for; PX_EDEADLK from a member of g (it would
** wait for its own end); PX_ETHREAD from a fiber of another scheduler;
** PX_ENOFIBER off-fiber;
** PX_EYIELD in a hosted fiber without suspend: call it again once resumed.
** Thread: scheduler.  Parks: yes.
**
** px_group_cancel cancels the group: its members' waits end with
** PX_ECANCELED, and spawns are refused.  Returns 1 when this call cancelled
** it, 0 when it already was; PX_EINVAL for NULL.  Thread: any.  Parks: no.
** Unlike a token's scope, a member's does not keep px_run from reporting a
** deadlock: members parked for good are one (PX_EDEADLK), even if a thread
** would cancel the group later.  A program that parks every fiber until
** another thread cancels a group opens a cancel scope of its own, or runs
** px_sched_run with a hold.
**
** px_group_failures writes up to `max` failure statuses into out[], first
** first, and returns how many failures there were (out may be NULL with max
** 0).  px_group_live returns how many members have not ended yet.  Thread:
** scheduler.  Parks: no.
**
** px_group_free frees a group that has no live member (PX_EBUSY: kept); 0;
** NULL does nothing.  A scope px_group_scope_push opened on it uses its
** token, as a cancel scope uses a token px_token_free frees: pop it first.
** A group may be freed without px_group_wait once its members ended (a
** hosted fiber's wait that got PX_EYIELD and was never called again
** included: it is let go of).  Thread: scheduler.  Parks: no.
**
** For bindings, whose fibers are hosted (px_spawn_hosted):
** px_group_spawn_hosted spawns a hosted fiber (ops, host_ctx as
** px_spawn_hosted takes them) as a member into *out, with the refusals of
** px_group_spawn (*out NULL then).  A hosted body's outcome is its host's, so
** such a member reports its failure itself: px_group_fail(g, status) records
** `status` as a member's failure exactly as a C member's non-zero return is
** recorded (the first cancels the group; PX_ECANCELED after the cancel is
** none).  Returns 1 when it was recorded as a failure, 0 when not; PX_EINVAL
** for NULL g or status 0.  Thread: scheduler.  Parks: no.
** px_group_scope_push(g) opens the group's cancel scope in the calling fiber,
** as the push/pop scopes do (px_scope_pop closes it): the code that spawns
** the members -- a binding's with block or function body -- is cancelled
** with them, and its scope, like theirs, does not keep px_run from reporting
** a deadlock.  Returns 0; PX_EINVAL for NULL g; PX_ENOMEM; PX_ENOFIBER
** off-fiber; PX_ETHREAD from a fiber of another scheduler.  Thread:
** scheduler.  Parks: no.
*/
typedef struct px_group px_group;
typedef int (*px_group_fn)(void *arg);

PX_API px_group *px_group_new(void);
PX_API int px_group_spawn(px_group *g, px_group_fn fn, void *arg);
PX_API int px_group_wait(px_group *g);
PX_API int px_group_cancel(px_group *g);
PX_API size_t px_group_failures(const px_group *g, int *out, size_t max);
PX_API size_t px_group_live(const px_group *g);
PX_API int px_group_free(px_group *g);
PX_API int px_group_spawn_hosted(px_group *g, const px_host_ops *ops, void *host_ctx,
                                  px_fiber **out);
PX_API int px_group_scope_push(px_group *g);
PX_API int px_group_fail(px_group *g, int status);

/*
** Runs fn(items[i], &results[i]) for every i < n, at most `concurrency` at
** once (0: all at once), in a group: results[] keeps the input order
** whatever order the calls end in.  fn returns 0 or a failure status as a
** group member does; the first failure cancels the calls still running and
** starts no more.  Returns 0, or what px_group_wait returns (the first
** failure); results[i] of a call that did not end with 0 is left alone.
** PX_EINVAL for NULL fn, or NULL items or results with n > 0; PX_ENOMEM;
** PX_ENOFIBER off-fiber (n 0 returns 0 anywhere); PX_ENOTSUP in a hosted
** fiber without suspend, whose C frame cannot wait (a binding maps on a
** group of its own).  The calls read items[] and write results[] while the
** caller waits: on a shared stack (px_sched_opts.shared_stacks) neither may
** be a local of the caller's.  Thread: scheduler.  Parks: yes.
*/
typedef int (*px_map_fn)(void *item, void **result);

PX_API int px_map(px_map_fn fn, void *const *items, void **results, size_t n,
                  size_t concurrency);

/* -- Future ----------------------------------------------------------------- */

/*
** A value that is set once and that any number of fibers wait for, of any
** scheduler: px_future_set_result or px_future_set_error settle it, from any
** thread, and a second settlement is refused.
**
** px_future_new returns an unsettled future or NULL (no memory).  Thread:
** any.  Parks: no.
** px_future_set_result(fu, value) / px_future_set_error(fu, status) settle
** it with a value or with a failure status (non-zero; a PX_E* code or the
** program's own) and wake every waiter.  Return 0; PX_EBUSY when it was
** settled already (nothing changes); PX_EINVAL for NULL, or status 0.
** Thread: any.  Parks: no.
** px_future_wait parks until it is settled (wait reason "future wait"; an
** outside park: any thread may settle it), then returns 0 with the value in
** *value (when value is not NULL), or the failure status.  PX_ETIMEDOUT /
** PX_ECANCELED when a scope ended the wait; PX_EINVAL for NULL fu;
** PX_EDEADLK for the calling fiber's own px_fiber_future (a wait for its
** own end), in wait_all and wait_any too, whatever else is settled;
** PX_ENOFIBER off-fiber while unsettled (a settled future answers anywhere);
** PX_EYIELD in a hosted fiber without suspend: call it again once resumed.
** Thread: any fiber.  Parks: yes.
** px_future_done returns 1 once settled, else 0 (0 for NULL).  Thread: any.
** px_future_wait_all waits for every one of fus[0..n): 0 once all succeeded,
** with their values in values[i] (values may be NULL); the status of the
** first failure to come as soon as one fails; and the wait codes above.
** px_future_wait_any waits for the first of them to settle and returns its
** index (>= 0): of several settled already, the one settled first, so the
** answer does not depend on the order of fus.  What it settled with is
** px_future_wait's on it, at once.
** PX_EINVAL for a NULL fus or member, or n 0 for wait_any.  Both are bounded
** by scopes like any wait.  Thread: any fiber.  Parks: yes.
** px_future_free frees it; no fiber may be waiting (PX_EBUSY: kept) and no
** settlement may be under way; 0, NULL does nothing.  Thread: any.
**
** px_fiber_future(f) returns a future that f's end settles with the value f
** returned, or NULL (NULL f, no memory); it is f's, freed with f's record
** (px_fiber_release of an ended fiber, the end of a released one, or
** px_sched_free) -- after the waits on it then under way ended: do not free
** it (px_future_free refuses it, PX_EINVAL), nor use it after.  A fiber that
** px_sched_free discarded never returned: the waits on its future still
** under way (fibers of other runs) end with PX_ECANCELED, and the last of
** them frees it -- a wait_any that returns its index is the last look at it.
** Thread: scheduler.  Parks: no.
*/
typedef struct px_future px_future;

PX_API px_future *px_future_new(void);
PX_API int px_future_set_result(px_future *fu, void *value);
PX_API int px_future_set_error(px_future *fu, int status);
PX_API int px_future_wait(px_future *fu, void **value);
PX_API int px_future_done(const px_future *fu);
PX_API int px_future_wait_all(px_future *const *fus, size_t n, void **values);
PX_API int px_future_wait_any(px_future *const *fus, size_t n);
PX_API int px_future_free(px_future *fu);
PX_API px_future *px_fiber_future(px_fiber *f);

/* -- Select ----------------------------------------------------------------- */

/*
** Waits for the first of several cases to be ready and completes exactly
** that one, as Go's select does.  A case is one of:
**
**   PX_SELECT_SEND      send `value` on the channel `obj`
**   PX_SELECT_RECV      receive from the channel `obj` into `value`
**   PX_SELECT_EVENT     the event `obj` is set
**   PX_SELECT_SEM       acquire one unit of the semaphore `obj`
**   PX_SELECT_FD        `fd` is ready for `events` (PX_READABLE, PX_WRITABLE)
**   PX_SELECT_DEADLINE  px_now() reached `deadline`
**   PX_SELECT_DEFAULT   nothing else is ready now: makes the call never park
**
** Returns the index of the case that fired; its `result` says how: 0, or
** PX_ECLOSED for a send or a receive on a closed channel (a receive gets
** what is buffered first) and for an fd that px_fd_notify_closing closed.
** Only that case took effect: a send case that lost never delivered its
** value, a receive case that lost took nothing, a semaphore case that lost
** took no unit, and nothing of the call stays queued anywhere.  Among the
** cases ready when the call looks, each is as likely to fire as another.
** A case whose `obj` is NULL never fires (Go's nil channel): a case can be
** switched off in place.  With no case that can fire (none, or all NULL) and
** no DEFAULT, the fiber waits until a scope ends it.  The cases are tried
** in a random order first, without waiting, and only when none can fire
** does the fiber wait on all of them; an FD case's try is a poll(2), so a
** select with one costs a system call.  Several DEADLINE cases are allowed:
** the earliest fires.
**
** PX_ETIMEDOUT / PX_ECANCELED when a scope ended the wait (nothing taken,
** nothing sent); PX_EINVAL for NULL cases with n > 0, an unknown kind, two
** DEFAULT cases, an FD case with a negative fd or bad events -- checked
** before anything is done -- and an FD case on an fd that is not open;
** PX_ETHREAD when an object's waiters are another scheduler's fibers;
** PX_EBUSY and PX_ENOTSUP as px_wait_fd returns them for an FD case;
** PX_ENOMEM; PX_ENOFIBER off-fiber unless a DEFAULT case makes the call
** never park; PX_EYIELD in a hosted fiber without suspend: call it again,
** with the same `cases`, once resumed.  Thread: scheduler.  Parks: yes,
** wait reason "select".
*/
enum {
    PX_SELECT_SEND = 1,
    PX_SELECT_RECV,
    PX_SELECT_EVENT,
    PX_SELECT_SEM,
    PX_SELECT_FD,
    PX_SELECT_DEADLINE,
    PX_SELECT_DEFAULT
};

typedef struct px_select_case {
    int kind;                /* PX_SELECT_* */
    void *obj;               /* the px_chan, px_event or px_sem */
    void *value;             /* SEND: the value offered; RECV: the value received */
    int fd;                  /* FD */
    unsigned events;         /* FD: PX_READABLE, PX_WRITABLE or both */
    int64_t deadline;        /* DEADLINE: on px_now()'s clock */
    int result;              /* set for the case that fired: 0 or PX_ECLOSED */
} px_select_case;

PX_API int px_select(px_select_case *cases, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* PARATAXIS_H */
