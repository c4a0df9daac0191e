/*
** pxswig.h -- what pxswig.c gives the SWIG module parataxis_core: the functions
** parataxis.i wraps.  The TimerQueue methods have the names SWIG's %extend gives
** them (new_TimerQueue, TimerQueue_add, ...); parataxis.i renames the others.
*/
#ifndef PXSWIG_H
#define PXSWIG_H

#include "parataxis.h"
#include "pxlua_exec.h"

typedef struct TimerQueue TimerQueue;

/* The library's monotonic clock, in seconds. */
double pxswig_now(void);

/* A queue that is closed from the start: no worker, nothing owed, every call
** answers as a closed queue does.  The Lua side puts it in place of a
** collected queue's, for a handler that kept the queue alive. */
TimerQueue *pxswig_closed_queue(void);

/* A queue with its worker, or NULL (no memory or threads). */
TimerQueue *new_TimerQueue(void);
void delete_TimerQueue(TimerQueue *t);

/* A queue whose handler calls start as fibers of x's run (px.scheduler(),
** pxlua_exec.c); once that run is over they wait in its handler queue,
** aborted, as a plain queue's do.  NULL: no memory or threads. */
TimerQueue *pxswig_queue_on(pxhost_exec *x);

/* A number naming t for as long as it lives (the Lua side's qid). */
long long TimerQueue_ident(TimerQueue *t);

/* For pxlua_exec.c, on the Lua thread.  deliver makes one call of t (its
** trampoline fn(arg, status)) and takes what it recorded: 1 with the key and
** status, 0 when it recorded nothing.  give_back hands a call the run cannot
** start to t's handler queue, aborted (or makes it at once, if it cannot). */
int pxswig_deliver(TimerQueue *t, px_handler_fn fn, void *arg, int status,
                   long long *key, int *st);
void pxswig_give_back(TimerQueue *t, px_handler_fn fn, void *arg);

/* A one-shot timer: its one call records `key` (>= 0).  Returns the id, or
** 0 for a bad delay (negative, NaN), a closed queue or no memory.  A delay of
** 2^63 ns or more (inf too) is "never", as in C: the timer never fires. */
long long TimerQueue_add(TimerQueue *t, double delay_s, long long key);

/* A periodic timer: its calls record -1 - key, the final aborted one too.
** Durations as for TimerQueue_add; a period of "never" ticks once. */
long long TimerQueue_add_periodic(TimerQueue *t, double first_s, double period_s,
                                  long long key);

int TimerQueue_cancel(TimerQueue *t, long long id);
int TimerQueue_cancel_all(TimerQueue *t);
int TimerQueue_pending(TimerQueue *t);
int TimerQueue_fileno(TimerQueue *t);

/* Waits up to timeout_s for handler calls, without a bound when timeout_s is
** negative or 2^63 ns or more (too long for the C API: about 9.22e9 s); 1 when
** some wait, 0 on timeout or when a signal ended an unbounded wait, -1 when that
** wait failed (NaN waits 0). */
int TimerQueue_wait(TimerQueue *t, double timeout_s);

/* How many calls are queued (a recorded one not yet taken counts too). */
int TimerQueue_size(TimerQueue *t);

/* Takes the next call: runs one queued handler, which records what fired,
** and returns 1 with (key, status, posted: when the worker queued it, in
** seconds of pxswig_now, HUGE_VAL when not known); 0 when no call waits. */
int TimerQueue_take(TimerQueue *t, long long *key, int *status, double *posted);

int TimerQueue_closed(TimerQueue *t);

/* Aborts what is pending and stops the worker; the calls it owed wait in
** the handler queue for drain().  Later adds fail. */
void TimerQueue_shutdown(TimerQueue *t);

/* shutdown(), then frees the handler queue: calls not drained are dropped. */
void TimerQueue_close(TimerQueue *t);

#endif
