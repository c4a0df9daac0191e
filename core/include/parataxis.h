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
**     A duration whose deadline would pass INT64_MAX saturates: it means "never"
**     (it is accepted, never comes due early, and never overflows).
**   - After fork(), the child may not use any object made before the fork (the
**     threads that served it are gone): every call on one returns PX_EFORKED (or
**     0 / NULL, as its comment says) before touching it, and its _free releases
**     only what the child can safely release.  Objects made in the child work.
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
** long.  An executor that accepted a call and then cannot run it as asked (shut
** down, cancelled) calls fn(arg, PX_ECANCELED) instead, on any thread: the
** handler then gets PX_ECANCELED (a periodic timer's final call).
**
** flush(), which may be NULL, is called on the worker after each batch of posts
** (up to 256): an executor that pays per hand-over -- a lock, a wake-up, a
** language's global lock -- may queue the calls in post() and hand them all over
** in flush().  The calls queued must then still each happen once.
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
** or any thread that calls px_queue_wait and px_queue_drain.
*/
typedef struct px_queue px_queue;

/*
** Returns a new, empty queue, or NULL when out of memory or out of file
** descriptors.  Thread: any.  Parks: no.
*/
PX_API px_queue *px_queue_new(void);

/*
** Returns an executor that posts into `q`.  Posting never blocks; it fails only
** with PX_ENOMEM (PX_EINVAL for a NULL q), and the handler then runs inline in
** the poster.  `q` must outlive every timer queue that uses the executor.
** Thread: any.  Parks: no.
*/
PX_API px_executor px_queue_executor(px_queue *q);

/*
** Posts fn(arg, status) into `q`.  Returns 0, PX_EINVAL (NULL q or fn),
** PX_ENOMEM, or PX_EFORKED in the child of a fork (q is the parent's: its
** handlers are owed there).  Thread: any.  Parks: no.
*/
PX_API int px_queue_post(px_queue *q, px_handler_fn fn, void *arg, int status);

/*
** Runs up to `max` queued handlers (0 means: all that are queued when the call
** starts) on the calling thread, in FIFO order, and returns how many ran; PX_EINVAL
** for NULL.  Handlers may post more.  With max 0 those wait for the next drain;
** with max > 0 calls are taken 64 at a time, so a later chunk may hold calls
** that handlers of an earlier chunk posted.  PX_EFORKED in the child of a fork:
** it never runs the parent's handlers.
** Thread: any; each handler runs on the caller.  Parks: no.
*/
PX_API int px_queue_drain(px_queue *q, size_t max);

/*
** Returns a file descriptor that is readable while handlers wait in `q` (an
** eventfd), for epoll, poll, asyncio's add_reader or a Lua loop; PX_EINVAL for
** NULL.  Only px_queue_drain clears it: never read it yourself.  The descriptor
** belongs to the queue and is closed by px_queue_free.  PX_EFORKED in the child
** of a fork (the descriptor is shared with the parent).  Thread: any.  Parks: no.
*/
PX_API int px_queue_fd(px_queue *q);

/*
** Waits until a handler is queued or `timeout_ns` has passed (negative, or too
** long for the clock: forever).  Returns 1 when handlers wait, 0 on timeout,
** PX_EINVAL for NULL, PX_EFORKED in the child of a fork.
** Thread: any.  Parks: yes, blocks the calling thread.
*/
PX_API int px_queue_wait(px_queue *q, int64_t timeout_ns);

/*
** Returns how many handlers are queued (0 in the child of a fork).
** Thread: any.  Parks: no.
*/
PX_API size_t px_queue_size(px_queue *q);

/*
** Runs every handler still queued (so that none is lost) and releases `q`.  Nobody
** may post into `q` once this is called.  In the child of a fork it runs none,
** closes the child's descriptor, and releases the memory unless a thread of the
** parent was using the queue at the fork.  Thread: any.  Parks: no.
*/
PX_API void px_queue_free(px_queue *q);

/* ------------------------------------------------------------------------- */
/* The timer queue                                                           */
/* ------------------------------------------------------------------------- */

/*
** Handlers whose deadlines the worker reaches on time start in deadline order, to
** within about 66 us; handlers already overdue when it reaches them start in no
** particular order.
*/
typedef struct px_timerq px_timerq;

typedef struct px_timerq_opts {
    /* Where handlers run.  NULL: on the queue's worker thread.  The executor is
    ** copied; what its ctx points to must outlive the queue. */
    const px_executor *executor;
    /* The worker's timer slack in nanoseconds (Linux PR_SET_TIMERSLACK): how late
    ** the kernel may wake it.  0 selects the library's default (1 us); a negative
    ** value leaves it alone: the worker inherits the slack of the thread that
    ** called px_timerq_new (the kernel's default is 50 us).  More than 1 s is
    ** taken as 1 s (as abort_linger_ns): a tolerance, not a deadline. */
    int64_t timer_slack_ns;
    /* How late the worker may make the PX_ECANCELED call of a cancelled timer, so
    ** that a burst of cancels costs one wake-up, not one each.  0 (or less)
    ** selects the default, 50 us.  A binding whose handlers need a global lock
    ** (Python's GIL) passes more: each delivery is a hand-over of that lock.
    ** More than 1 s is taken as 1 s. */
    int64_t abort_linger_ns;
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
** timer was not added -- NULL q or fn, a negative delay, no memory, a queue that
** is being freed or belongs to the parent of a fork -- and then fn is never
** called.  A delay too long for the clock saturates: the timer is added and never
** comes due (its one call is then the PX_ECANCELED of a cancel or free).  Thread: any, including handlers of this queue.
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
** In the child of a fork() it runs no handler (they belong to the parent), and
** releases the memory only when no call is outstanding in an executor; else it
** leaves the memory alone.  NULL does nothing.  No call on `q` may follow, and
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
** Sets the expiry to now + `delay_ns` (>= 0; too long for the clock: INT64_MAX,
** never) and aborts the waits pending on the previous expiry (each is called with
** PX_ECANCELED).  Returns how many waits it aborted, PX_EINVAL, or PX_EFORKED in
** the child of a fork when t's queue is the parent's (so do px_timer_expires_at,
** px_timer_expiry, px_timer_async_wait and px_timer_cancel; px_timer_free then
** releases the timer only when no wait of the parent's is pending on it).
** Thread: any.  Parks: no.
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
** when the wait is aborted first.  Returns 0, or PX_EINVAL, PX_ENOMEM (no memory
** for the wait, the expiry's batch or the queue's timer record), PX_ECLOSED (its
** queue is closing) or PX_EFORKED (in the child of a fork, its queue is the
** parent's) -- and then fn is never called.
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

/* ========================================================================= */
/* The fiber engine                                                          */
/* ========================================================================= */

/*
** Cooperative fibers on one OS thread per scheduler.  A scheduler runs its ready
** fibers in FIFO order; a fiber runs until it yields, sleeps, parks or ends.  When
** nothing is runnable the scheduler expires the sleeps and timeouts that are due,
** and only when there is still nothing to run does it wait in the kernel, until
** the next deadline or until another thread posts to it.
**
** Vocabulary used below:
**
**   - "Thread: scheduler" means a fiber of the scheduler concerned.  Called
**     from any other thread there is no current fiber: the call returns
**     PX_ENOFIBER (or NULL / 0, as its comment says) and changes nothing; a
**     fiber of another scheduler gets PX_ETHREAD where the comment says so.
**   - "Parks: yes" means the call may suspend the calling fiber (never the
**     thread); it needs a fiber and returns PX_ENOFIBER without one.  Every park
**     is bounded by the scopes around it (px_with_timeout, px_with_cancel).
**   - A fiber id is a 64-bit number, never 0, never reused within the process, so
**     a stale id can never reach another fiber.
**
** Stacks are mmap'd and touched lazily.  A stack overflow ends the process
** with "parataxis: fiber N overflowed its stack" on stderr and SIGABRT when the
** fiber runs into a guard: each of the first PARATAXIS_GUARDED_STACKS (10,000)
** stacks has a 64 KiB PROT_NONE guard of its own (a page if pages are larger);
** past that, default-size stacks share slabs of about 16 MiB with one such
** guard at the low end (a runaway recursion runs down through the other stacks
** of its slab into it) and a 64-byte canary between stacks, checked whenever
** the fiber switches out.  Not caught (undefined behaviour): a frame that moves
** the stack pointer more than 64 KiB at once and writes below the guard first
** (build the fibers' code with -fstack-clash-protection, which the library
** cannot impose, to have such frames probe the guard); on a slab stack an
** overflow that returns before reaching a guard without writing the canary; a
** runaway on a stack of non-default size past the budget (canary only, no
** guard); the overflow of a hosted fiber or of the scheduler's own thread; any
** overflow once the program replaced the library's SIGSEGV handler (installed
** with the first stack pool).  docs/fibers.md has the details.
**
** With PARATAXIS_TRACE=1 in the environment (read once, by the first
** px_sched_new), every scheduler writes one line to stderr per fiber event:
** "parataxis trace <seconds since the first scheduler> fiber <id> <event>", the
** events being spawn, park "<reason>", wake, timeout "<reason>", cancel
** "<reason>" and exit.
*/
typedef struct px_sched px_sched;
typedef struct px_fiber px_fiber;
typedef struct px_token px_token;

/* A fiber's function.  What it returns is what px_join hands to the joiner. */
typedef void *(*px_fiber_fn)(void *arg);

typedef struct px_sched_opts {
    /* Default stack size of its fibers in bytes, rounded up to pages; 0: 64 KiB.
    ** Stacks are touched lazily, so a large size costs address space, not memory.
    ** A size no address space can hold makes px_sched_new return NULL. */
    size_t stack_size;
    /* The scheduler thread's timer slack while it runs (as px_timerq_opts):
    ** 0 selects 1 us, a negative value leaves the thread's slack alone.  The
    ** previous slack is restored when px_sched_run returns. */
    int64_t timer_slack_ns;
    /* Where a deadlock report goes (see px_sched_run).  NULL: written to stderr.
    ** `report` is one NUL-terminated text of several lines, valid during the call. */
    void (*on_deadlock)(void *ctx, const char *report);
    void *on_deadlock_ctx;
} px_sched_opts;

/*
** The seed's `async { }`: makes a scheduler on the calling thread, runs
** main(arg) as its first fiber, runs until every fiber ended, frees the
** scheduler and stores main's return value in *result (when result is not NULL).
** Returns 0; PX_EDEADLK when fibers were left parked with nothing that could ever
** wake them, as px_sched_run decides it: a fiber parked in a cancel scope is not
** such a fiber, so a token that another thread cancels later needs no hold (the
** report went to stderr; *result is then NULL); PX_EINVAL for NULL
** main; PX_ENOMEM; PX_EBUSY when the thread already runs a scheduler.
** Thread: any thread that runs no scheduler.  Parks: blocks the thread until done.
*/
PX_API int px_run(px_fiber_fn main, void *arg, void **result);

/*
** Returns a new scheduler, not yet running, or NULL when out of memory or file
** descriptors, or when opts->stack_size cannot be mapped at all (above
** SIZE_MAX / 32, or a trial reservation of that much address space fails).
** `opts` may be NULL.  Thread: any.  Parks: no.
*/
PX_API px_sched *px_sched_new(const px_sched_opts *opts);

/*
** Runs `s` on the calling thread until no fiber is left, nothing is posted and
** no hold (px_sched_hold) remains.  The first call binds `s` to its thread: a
** scheduler always runs on the same thread.
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
** Returns PX_EINVAL for NULL, PX_EBUSY when `s` runs already or the thread runs
** another scheduler, PX_ETHREAD when `s` ran on another thread before (a refused
** call changes nothing and does not bind `s`), PX_ENOMEM when the stack pool
** cannot be made on the first run (`s` stays bound to the calling thread),
** PX_EFORKED in the child of a fork when `s` was made before it.
**
** fork() in a fiber: in the child, the forking fiber is no fiber any more
** (px_self() is 0, parks return PX_ENOFIBER), so it may px_run a new scheduler
** or exec; once it returns, the px_sched_run (or px_run) it ran under returns
** PX_EFORKED in the child without running any other fiber or posted function
** (they run in the parent).  px_sched_free then releases `s` in the child,
** calling none of its posted handlers.
** Thread: see above.  Parks: blocks the calling thread while it runs.
*/
PX_API int px_sched_run(px_sched *s);

/*
** Releases `s` and every fiber record it still has: fibers left parked (after
** PX_EDEADLK) are discarded without running again, and posted functions that
** never started are dropped.  NULL does nothing.  `s` must not be running, and
** no thread may post to it any more.  In the child of a fork, a scheduler made
** before it is only forgotten (its memory stays), except the one a fiber forked
** in, once its run returned PX_EFORKED.  Thread: any.  Parks: no.
*/
PX_API void px_sched_free(px_sched *s);

/*
** Spawns fn(arg) as a detached fiber of `s` (its result is dropped) and wakes `s`
** if it waits.  Posted functions start in the order they were posted.  Should no
** stack be available when `s` gets to it, fn(arg) runs on the scheduler thread
** outside any fiber (it may not park then).
** Returns 0, PX_EINVAL (NULL s or fn), PX_ENOMEM, or PX_EFORKED in the child of a
** fork when `s` was made before it (as px_sched_hold, px_sched_unhold and the
** executor's post; px_wake of its fibers returns 0).  Thread: any.  Parks: no.
*/
PX_API int px_sched_post(px_sched *s, px_fiber_fn fn, void *arg);

/*
** Returns an executor (see px_executor) whose post() runs each handler call as a
** new fiber of `s`, so a px_timerq can deliver into a scheduler.  The handler may
** park.  A timer queue's handlers can arrive while no fiber is live: take a hold
** (px_sched_hold) for as long as the queue may post, or `s` returns first.
** `s` must outlive the timer queue.  Thread: any.  Parks: no.
*/
PX_API px_executor px_sched_executor(px_sched *s);

/*
** A hold keeps `s` running while it has no fiber left, and stops it from
** declaring a deadlock while its fibers are parked: something outside (a timer
** queue delivering through px_sched_executor, a thread that will px_wake,
** px_sched_post or px_token_cancel) still has work for it.  Each
** px_sched_hold must be matched by one px_sched_unhold; the last one wakes `s`
** so it can finish.
** Both return 0, or PX_EINVAL (NULL s, or unhold without a hold).
** Thread: any.  Parks: no.
*/
PX_API int px_sched_hold(px_sched *s);
PX_API int px_sched_unhold(px_sched *s);

/*
** The seed's `fiber { }`: spawns fn(arg) on the calling fiber's scheduler, at the
** tail of the ready queue, with the scheduler's default stack size
** (px_spawn_sized: `stack_size` bytes rounded up to pages, 0 for the default).
** Returns a handle for px_join and px_fiber_release; NULL off-fiber or from
** another thread (no current scheduler), for NULL fn, or when out of memory
** (also: a stack_size that cannot be mapped, such as SIZE_MAX).  The handle
** stays valid until px_fiber_release, even after the fiber ended.
** Thread: scheduler (from one of its fibers).  Parks: no.
*/
PX_API px_fiber *px_spawn(px_fiber_fn fn, void *arg);
PX_API px_fiber *px_spawn_sized(px_fiber_fn fn, void *arg, size_t stack_size);

/*
** The seed's `->await`: parks until `f` ended and stores its result in *result
** (when result is not NULL).  Any number of fibers may join one fiber.  Returns
** 0, PX_ETIMEDOUT / PX_ECANCELED when a scope interrupted the wait (*result is
** left alone), PX_EDEADLK when `f` is the calling fiber, PX_EINVAL for NULL,
** PX_ENOFIBER off-fiber, PX_ETHREAD when `f` belongs to another scheduler, and
** PX_EYIELD in a hosted fiber that must yield (see px_spawn_hosted; call
** px_join again once resumed: it then returns at once).  Only the end of `f`
** (or a scope) ends the wait: a px_wake aimed at the joiner makes it look and
** park again, even when it comes just as `f` ends.
** Thread: scheduler.  Parks: yes, wait reason "fiber join".
*/
PX_API int px_join(px_fiber *f, void **result);

/*
** Gives the handle up.  A fiber still running goes on as a detached fiber; the
** record of an ended fiber is freed.  NULL does nothing; releasing twice is an
** error of the caller.  Thread: the scheduler's, or any thread while the
** scheduler is not running; from another thread while it runs, the call does
** nothing (the record is then kept until px_sched_free).  Parks: no.
*/
PX_API void px_fiber_release(px_fiber *f);

/* Returns the id of fiber `f` (0 for NULL).  Thread: scheduler.  Parks: no. */
PX_API uint64_t px_fiber_id(const px_fiber *f);

/*
** Returns the calling fiber's id; 0 off-fiber (outside any scheduler, or on a
** scheduler thread outside its fibers).  Thread: any.  Parks: no.
*/
PX_API uint64_t px_self(void);

/*
** Puts the calling fiber at the tail of the ready queue and runs the others that
** are ready first.  Returns 0, PX_ENOFIBER off-fiber, or PX_EYIELD in a hosted
** fiber (it must yield to its host now).  Not bounded by scopes: a yield is not
** a wait.  Thread: scheduler.  Parks: it suspends the fiber, but never waits.
*/
PX_API int px_yield(void);

/*
** Parks the calling fiber for `ns` nanoseconds (px_sleep) or until `deadline`
** on px_now()'s clock (px_sleep_until); it never returns early with 0.  A sleep
** costs no thread and no syscall of its own: it is a node in the scheduler's
** ordered set of deadlines.  Returns 0 when the time has come, PX_ETIMEDOUT /
** PX_ECANCELED when a scope ended it first, PX_EINVAL for a negative `ns`,
** PX_ENOFIBER off-fiber, PX_EYIELD in a hosted fiber that must yield (read the
** outcome with px_park_result once resumed).  A zero or past sleep yields.
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
**      PX_ETIMEDOUT / PX_ECANCELED ends a wait without a hand-over.
**
** When a scope interrupts the park (its deadline passed, its token was
** cancelled, or it had fired before the park), the fiber is woken by the
** scheduler instead, runs dereg(ctx) before px_park returns, and px_park returns
** PX_ETIMEDOUT or PX_ECANCELED.  dereg removes the id from your queue; and since
** a grant may have raced the interrupt (step 4 happened, but the fiber was
** already on its way out), dereg must then pass the grant on to the next
** waiter.  After px_park returns, nothing of the wait is left queued anywhere.
** See docs/examples/fibers_gate.c for a complete primitive.
*/

/* px_park_info.flags: an outside thread or a timer may wake this park (so while
** it is parked, the scheduler waits instead of reporting a deadlock). */
#define PX_PARK_OUTSIDE 1u

typedef struct px_park_info {
    const char *reason;          /* wait reason for traces and reports; kept, not copied */
    void (*dereg)(void *ctx);    /* run when the park is interrupted; may be NULL */
    void *ctx;
    /* For deadlock reports (all optional): the object waited on, a word naming
    ** its kind ("mutex" gives "mutex@0x..."), and a function that writes the ids
    ** of the fibers holding it now into out[0..max) and returns how many it
    ** wrote; it is called only while a report is written. */
    const void *object;
    const char *kind;
    size_t (*holders)(const void *object, uint64_t *out, size_t max);
    unsigned flags;              /* PX_PARK_OUTSIDE or 0 */
} px_park_info;

/*
** Parks the calling fiber until px_wake(its id) or until a scope interrupts it.
** `reason` names the wait (a static string), dereg(ctx) is run on interruption.
** Returns 0 when woken by px_wake; PX_ETIMEDOUT or PX_ECANCELED when a scope
** interrupted it (dereg has run); PX_ENOFIBER off-fiber (nothing happens);
** PX_EYIELD in a hosted fiber whose host cannot switch inside C: the park is
** recorded, the host must yield to the scheduler at once, and px_park_result()
** gives the outcome once it is resumed.  A fiber in a scope that has already
** fired does not park: dereg runs and the code returns at once.
** Thread: scheduler.  Parks: yes.
*/
PX_API int px_park(const char *reason, void (*dereg)(void *ctx), void *ctx);

/* As px_park, with what a deadlock report can say about the wait (NULL: EINVAL). */
PX_API int px_park_with(const px_park_info *info);

/*
** Makes parked fiber `id` ready; it returns 0 from its park.  Returns 1 when the
** fiber was parked and is now queued to run; 0 when `id` is finished, unknown,
** not parked (a sleep is no park), or already woken or interrupted (then the
** wake does nothing).  From
** a thread other than the fiber's scheduler's, the wake is handed to that
** scheduler (woken if it waits) and applied there with the same rules, to the
** park the fiber is in when the scheduler takes it in: a late wake can end a
** later park with 0, which px_join and the sync waits treat as "look again".
** Such a stray wake never ends a wait of the library (a join, a sync wait): the
** waiter keeps its place and parks again, and a release still hands over to it.
** It then returns 1 when it was handed over and 0 when no live scheduler has
** `id` or the hand-over ran out of memory.
** Thread: any.  Parks: no.
*/
PX_API int px_wake(uint64_t id);

/*
** The outcome of the calling fiber's last park: 0 woken, PX_ETIMEDOUT,
** PX_ECANCELED; PX_ENOFIBER off-fiber.  A hosted fiber that got PX_EYIELD reads
** its result here once resumed (dereg has run by then when it was interrupted).
** Thread: scheduler.  Parks: no.
*/
PX_API int px_park_result(void);

/* ------------------------------------------------------------------------- */
/* Scopes: timeouts and cancellation                                         */
/* ------------------------------------------------------------------------- */

/*
** A scope bounds every park of the calling fiber while it is open.  Scopes nest;
** a park is bounded by the nearest deadline among the open scopes and by every
** token among them.  When a scope fires -- its deadline passes, its token is
** cancelled -- the park under way (or the next one, if none is) returns
** PX_ETIMEDOUT or PX_ECANCELED, and so does every later park inside that scope:
** a scope that fired stays fired until it closes.
*/
typedef int (*px_scope_fn)(void *arg);

/*
** Runs body(arg) with every park inside bounded by a deadline `ns` from now, and
** returns what body returned (a body usually returns the PX_ETIMEDOUT its park
** got).  Returns PX_EINVAL (NULL body, negative ns) or PX_ENOFIBER off-fiber
** without running body.  Thread: scheduler.  Parks: whatever body does.
*/
PX_API int px_with_timeout(int64_t ns, px_scope_fn body, void *arg);

/*
** Runs body(arg) with every park inside interrupted, with PX_ECANCELED, once
** `token` is cancelled (at once if it is already), and returns what body
** returned.  PX_EINVAL (NULL token or body) or PX_ENOFIBER as above.  The token
** must outlive the call.  Thread: scheduler.  Parks: whatever body does.
*/
PX_API int px_with_cancel(px_token *token, px_scope_fn body, void *arg);

/*
** The push/pop form of the two scopes above, for bindings whose body cannot be a
** C function (and for hosted fibers, whose body returns to the host at every
** park).  Each push opens a scope in the calling fiber and returns 0, PX_EINVAL,
** PX_ENOMEM or PX_ENOFIBER; px_scope_pop closes the innermost scope opened by a
** push and returns 0 if it never fired, PX_ETIMEDOUT or PX_ECANCELED if it did,
** PX_EINVAL when there is no pushed scope open, PX_ENOFIBER off-fiber.  Pops
** must match pushes in LIFO order, also around px_with_* calls; a fiber's scopes
** left open when it ends are closed for it.  Thread: scheduler.  Parks: no.
*/
PX_API int px_scope_push_timeout(int64_t ns);
PX_API int px_scope_push_deadline(int64_t deadline);
PX_API int px_scope_push_cancel(px_token *token);
PX_API int px_scope_pop(void);

/*
** A cancellation token: once cancelled, it stays cancelled and interrupts every
** park inside a scope that uses it, in any scheduler.
** px_token_new returns a token or NULL (no memory).  Thread: any.  Parks: no.
** px_token_cancel cancels it and wakes the fibers parked under it (through
** their schedulers; should that hand-over run out of memory, such a fiber is
** interrupted only at its next park); returns 1 when this call cancelled
** it, 0 when it already was, PX_EINVAL for NULL, PX_EFORKED in the child of a
** fork for a token made before it (as px_with_cancel and px_scope_push_cancel;
** px_token_cancelled still reads it).  Thread: any.  Parks: no.
** px_token_cancelled returns 1 or 0 (0 for NULL).  Thread: any.  Parks: no.
** px_token_free releases it; no scope may still use it.  NULL does nothing.
** Because any thread may cancel it, px_run does not report a deadlock while
** a fiber has a cancel scope open: it waits for the cancel.  px_sched_run
** does (all fibers parked and no hold); hold the scheduler for the thread.
*/
PX_API px_token *px_token_new(void);
PX_API int px_token_cancel(px_token *token);
PX_API int px_token_cancelled(const px_token *token);
PX_API void px_token_free(px_token *token);

/* ------------------------------------------------------------------------- */
/* Hosted fibers                                                             */
/* ------------------------------------------------------------------------- */

/*
** A hosted fiber runs on its host's own execution context -- a Lua coroutine, a
** Python greenlet -- instead of a C stack, and is scheduled, parked, woken,
** interrupted, joined and traced like any other fiber.
**
**   resume(ctx)   runs the fiber until it parks, yields or ends.  It returns
**                 PX_HOST_DONE once the fiber's body has ended, anything else
**                 while it lives (returning without a park or yield counts as a
**                 yield).  Required.
**   suspend(ctx)  for a host that can switch inside C (a greenlet): called by
**                 px_park / px_yield / px_sleep on the fiber to switch back to
**                 the scheduler; it returns when the fiber is resumed, and the
**                 park then returns its outcome as for a C fiber.  NULL for a
**                 host that cannot (Lua): the park is recorded and PX_EYIELD
**                 returned; the host must yield at once, and once resumed it
**                 reads px_park_result().
**   release(ctx)  called once when the scheduler drops the fiber (it ended, or
**                 the scheduler was freed with it parked).  May be NULL.
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
** Spawns a hosted fiber on `s` (ops is copied).  Returns a handle as px_spawn
** (px_join gives a NULL result); NULL for NULL s, ops or ops->resume, no memory,
** or a call from a thread other than the one running `s`.
** Thread: the scheduler's, or any while `s` is not running.  Parks: no.
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
**   - An object is used by the fibers of one scheduler (and off-fiber by its
**     thread); it is not thread-safe.  From several schedulers, use a channel
**     per scheduler and px_sched_post between them.
**   - px_<kind>_new returns the object, or NULL with errno set to EINVAL (a bad
**     argument) or ENOMEM.  Thread: any.  Parks: no.
**   - px_<kind>_free returns 0, or PX_EBUSY when the object is held or fibers
**     wait on it (nothing is freed then: no waiter is ever stranded).  NULL
**     returns 0.  Thread: the scheduler's.  Parks: no.
**   - Every operation that may wait is bounded by the scopes around it: it
**     returns PX_ETIMEDOUT or PX_ECANCELED when one interrupts it, and then
**     nothing of the wait is left queued and nothing was acquired; a grant
**     that raced the interrupt went on to the next waiter.  It returns
**     PX_ENOFIBER off-fiber and PX_EINVAL for a NULL object.
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
** scheduler (using one mutex from two schedulers is the caller's error, and
** is caught only when the lock would wait); and the common wait codes.  Wait
** reason "Mutex lock".
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
** px_mutex_lock; the common wait codes.  Wait reason "RwLock read lock".
** px_rwlock_wrlock parks until the caller holds the write lock.  Returns 0;
** PX_EOWNERDEAD when a writer ended holding it and no writer took it since
** (the caller is the one to repair the state); PX_EDEADLK at once,
** without parking, when the caller holds it already or holds read holds (an
** upgrade would wait for itself); PX_ETHREAD as px_mutex_lock; the common
** wait codes.  Wait reason "RwLock write lock".
** px_rwlock_tryrdlock / px_rwlock_trywrlock never park and never pass a
** queued waiter: 0, PX_EOWNERDEAD, PX_ENOMEM (read) or PX_EDEADLK as their
** parking forms, or PX_EBUSY where those would park.
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
** zero or past INT64_MAX (it is left unchanged).  When the count reaches
** zero every waiter is woken.  px_waitgroup_wait returns 0 at once at zero,
** else parks until zero; a waiter woken at zero returns 0 even if the count
** rose again before it ran.  The common wait codes.  Wait reason "WaitGroup
** wait".  px_waitgroup_count returns the count (0 for NULL).
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
** another fiber ran it, if need be); PX_EDEADLK and the wait codes as do.
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
** px_sem_release gives one unit back (to the first waiter, if any): 0, or
** PX_EINVAL when the count would overflow.  Any fiber may release; neither
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
** px_event_set sets it and wakes every waiter, returning how many it woke;
** a woken waiter returns 0 even if the event was cleared before it ran.
** px_event_clear unsets it (0).  Neither needs a fiber.  px_event_is_set
** returns 1 or 0.
*/
typedef struct px_event px_event;

PX_API px_event *px_event_new(void);
PX_API int px_event_set(px_event *e);
PX_API int px_event_clear(px_event *e);
PX_API int px_event_is_set(const px_event *e);
PX_API int px_event_wait(px_event *e);
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
** PX_ECLOSED as their parking forms.  Neither needs a fiber.
** px_chan_close: receivers get what is buffered, then PX_ECLOSED; waiting
** senders get PX_ECLOSED.  Returns 0, or PX_ECLOSED when already closed.
** Needs no fiber.  px_chan_len returns the buffered values, px_chan_cap the
** capacity; new: EINVAL for a capacity no ring can hold.
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
PX_API int px_chan_free(px_chan *ch);

#ifdef __cplusplus
}
#endif

#endif /* PARATAXIS_H */
