/*
** once.c -- an action run exactly once among racing fibers (see parataxis.h).
**
** A Once goes NEW -> RUNNING -> DONE and never back.  The first caller moves
** it to RUNNING and becomes its runner: a hold records the runner and puts
** the Once on the runner's list of holds.  Callers that arrive
** while it runs park; finishing (px_once_end, fn returning, or the runner
** ending inside the action) moves it to DONE and wakes them all.  Nothing
** is ever run again: a failed action is still done.
**
** px_once_do is px_once_begin + fn + px_once_end; bindings call begin and
** end themselves so the action can run in their own language.
*/
#include <stdlib.h>

#include "sync/sync.h"

enum { NEW, RUNNING, DONE };
enum once_op { ONCE_BEGIN };

struct px_once {
    int state;
    px__hold hold;            /* the runner, while RUNNING; on its list of holds */
    px__waitq waiters;        /* fibers parked until DONE */
};

#define once_of_hold(h) ((px_once *)(void *)((char *)(h) - offsetof(px_once, hold)))

/* DONE: every waiter leaves with 0 (`wake` 0 when the scheduler is being
** freed and the waiters with it). */
static void finish(px_once *o, int wake)
{
    o->state = DONE;
    px__waiter *w;
    while ((w = px__waitq_first(&o->waiters)) != NULL) {
        if (!wake) {
            px__waitq_remove(&o->waiters, w);
            continue;
        }
        px__waitq_grant(w, 0);
    }
}

/* The runner ended inside the action: the action is over, done. */
static void once_ended(px__hold *h, uint64_t id, int discarding)
{
    (void)id;
    finish(once_of_hold(h), !discarding);
}

static size_t once_holders(const void *object, uint64_t *out, size_t max)
{
    return px__sync_one_holder(&((const px_once *)object)->hold, out, max);
}

px_once *px_once_new(void)
{
    return PX__SYNC_NEW(px_once, waiters);
}

/*
** begin: 1 when the caller is now the runner, 0 once the action is done
** (parking while another fiber runs it), or an error.  A waiter needs no
** pass_on: the grant is the same for every waiter and takes nothing.
*/
int px_once_begin(px_once *o)
{
    px_fiber *f;
    int r;
    if (px__sync_enter(o, ONCE_BEGIN, &f, &r))   /* NULL, off-fiber, a hosted re-call */
        return r;
    if (o->state == DONE)
        return 0;
    if (o->state == NEW) {
        o->state = RUNNING;
        px__waitq_hold_take(&o->hold, f, once_ended);
        return 1;
    }
    if (px__waitq_held_by(&o->hold, f))
        return PX_EDEADLK;   /* called again from inside its own action */
    if (px__waitq_foreign(px__waitq_holder(&o->hold), f))
        return PX_ETHREAD;
    static const px_park_info pi = { .reason = "Once init", .kind = "once",
                                     .holders = once_holders };
    return px__waitq_wait(&o->waiters, px__waitq_begin(f, o, ONCE_BEGIN, NULL), &pi);
}

int px_once_end(px_once *o)
{
    px_fiber *f;
    int r = px__sync_caller(o, &f);
    if (r != 0)
        return r;
    if (o->state != RUNNING || !px__waitq_held_by(&o->hold, f))
        return PX_EPERM;
    px__waitq_hold_drop(&o->hold);
    finish(o, 1);
    return 0;
}

int px_once_do(px_once *o, px_once_fn fn, void *arg)
{
    if (fn == NULL)
        return PX_EINVAL;
    int r = px_once_begin(o);
    if (r != 1)
        return r;
    r = fn(arg);
    px_once_end(o);
    return r;
}

int px_once_done(const px_once *o)
{
    return o != NULL && o->state == DONE;
}

int px_once_free(px_once *o)
{
    return px__sync_free(o, o && (o->state == RUNNING || o->waiters.len != 0));
}
