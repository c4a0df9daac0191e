/*
** exec.c -- the run as an executor of handler calls, and its hold ledger
** (the contract is in pxhost.h).
**
** A post goes through the scheduler's own executor (px_sched_executor), which
** runs take_in on a C fiber of the run, on the run's thread: that is where a
** hosted fiber may be spawned.  The lock guards the ledger (closed, holds,
** inflight, refs) against the posting threads; the scheduler is used under it
** only by post (so never after close) and by the hold calls.
*/
#include <pthread.h>
#include <stdlib.h>

#include "pxhost.h"

struct pxhost_exec {
    pthread_mutex_t lock;
    px_sched *s;             /* valid while !closed */
    const pxhost_exec_ops *ops;
    int closed;              /* the run is over: posts are refused */
    int holds_off;           /* the run was cancelled: no more holds */
    long holds;              /* px_sched_holds taken for calls owed */
    long inflight;           /* posted, not taken in */
    long refs;               /* its owners and the calls in flight */
};

pxhost_exec *pxhost_exec_new(px_sched *s, const pxhost_exec_ops *ops)
{
    pxhost_exec *x = calloc(1, sizeof *x);
    if (x == NULL)
        return NULL;
    pthread_mutex_init(&x->lock, NULL);
    x->s = s;
    x->ops = ops;
    x->refs = 1;
    return x;
}

static void destroy(pxhost_exec *x)
{
    pthread_mutex_destroy(&x->lock);
    free(x);
}

void pxhost_exec_ref(pxhost_exec *x)
{
    if (x == NULL)
        return;
    pthread_mutex_lock(&x->lock);
    x->refs++;
    pthread_mutex_unlock(&x->lock);
}

void pxhost_exec_unref(pxhost_exec *x)
{
    if (x == NULL)
        return;
    pthread_mutex_lock(&x->lock);
    long n = --x->refs;
    pthread_mutex_unlock(&x->lock);
    if (n == 0)
        destroy(x);
}

/*
** On a C fiber of the run; off-fiber when no fiber could be made for the
** call, or when the scheduler is freed with it not taken in.  The call's
** reference to x is given back in the same locked step that counts it in, so
** x's fields the rest needs are read there.
*/
static void take_in(void *arg, int status)
{
    pxhost_call *c = arg;
    pxhost_exec *x = c->exec;
    c->status = status;
    pthread_mutex_lock(&x->lock);
    x->inflight--;
    int over = x->closed;
    px_sched *s = x->s;
    const pxhost_exec_ops *ops = x->ops;
    long refs = --x->refs;
    pthread_mutex_unlock(&x->lock);
    if (refs == 0)
        destroy(x);
    px_fiber *f = px_self() != 0 ? px_spawn_hosted(s, ops->fiber, c) : NULL;
    if (f != NULL)
        px_fiber_release(f);   /* detached: nobody joins it */
    else
        ops->cannot_start(c, over);
}

int pxhost_exec_post(pxhost_exec *x, pxhost_call *c, int status)
{
    if (x == NULL || c == NULL)
        return PX_EINVAL;
    c->exec = x;
    pthread_mutex_lock(&x->lock);
    int rc = PX_ECLOSED;
    if (!x->closed) {
        px_executor in = px_sched_executor(x->s);
        rc = in.post(in.ctx, take_in, c, status);
        if (rc == 0) {
            x->inflight++;
            x->refs++;
        }
    }
    pthread_mutex_unlock(&x->lock);
    return rc;
}

int pxhost_exec_closed(pxhost_exec *x)
{
    pthread_mutex_lock(&x->lock);
    int closed = x->closed;
    pthread_mutex_unlock(&x->lock);
    return closed;
}

int pxhost_exec_hold(pxhost_exec *x)
{
    pthread_mutex_lock(&x->lock);
    int held = !x->closed && !x->holds_off && px_sched_hold(x->s) == 0;
    x->holds += held;
    pthread_mutex_unlock(&x->lock);
    return held;
}

void pxhost_exec_unhold(pxhost_exec *x)
{
    pthread_mutex_lock(&x->lock);
    if (x->holds > 0) {
        x->holds--;
        (void)px_sched_unhold(x->s);
    }
    pthread_mutex_unlock(&x->lock);
}

/* Lets go of every hold, for good (x->lock held). */
static void drop_holds(pxhost_exec *x)
{
    for (; x->holds > 0; x->holds--)
        (void)px_sched_unhold(x->s);
    x->holds_off = 1;
}

void pxhost_exec_cancel(pxhost_exec *x)
{
    pthread_mutex_lock(&x->lock);
    drop_holds(x);
    pthread_mutex_unlock(&x->lock);
}

int pxhost_exec_close(pxhost_exec *x, int force)
{
    pthread_mutex_lock(&x->lock);
    int closing = force || x->inflight == 0;
    if (closing) {
        drop_holds(x);
        x->closed = 1;
    }
    pthread_mutex_unlock(&x->lock);
    return closing;
}
