/*
** mutex.c -- a non-reentrant lock owned by a fiber (see parataxis.h).
**
** The whole state is an owner id, a hold and a queue.  `owner` is the id of
** the fiber that holds the lock (0: free); the hold puts the lock on that
** fiber's list of holds, so a fiber that ends holding it lets it go.
**
** Unlock never frees a lock that somebody waits for: it makes the first
** waiter the owner (its id recorded, the hold moved to its fiber) and only
** then wakes it.  So the lock is never free while fibers wait, nobody can
** slip in between the unlock and the waiter's return, and trylock needs no
** fairness rule of its own.
**
** A fiber that ends holding the lock gives it to the first waiter with
** PX_EOWNERDEAD, or leaves it free with `dead` set, and the next fiber to
** take it gets PX_EOWNERDEAD (once: that fiber is now in charge of the state
** the lock protects).
*/
#include <stdlib.h>

#include "waitq.h"

struct px_mutex {
    uint64_t owner;          /* fiber id of the holder; 0 while free */
    px_hold hold;            /* on the holder's list of holds */
    px_waitq waiters;        /* fibers parked in px_mutex_lock, FIFO */
    unsigned char dead;      /* free, but its last owner ended holding it */
};

#define mutex_of_hold(h) ((px_mutex *)(void *)((char *)(h) - offsetof(px_mutex, hold)))

static void mutex_ended(px_hold *h, uint64_t id, int discarding);

/* Makes fiber f the owner; returns what its lock returns. */
static int take(px_mutex *m, px_fiber *f)
{
    m->owner = f->id;
    px__hold_take(&m->hold, f, mutex_ended);
    if (m->dead) {
        m->dead = 0;
        return PX_EOWNERDEAD;
    }
    return 0;
}

/* The lock is let go with `code` for the next owner (0, or PX_EOWNERDEAD
** when its holder died): hand it to the first waiter, or free it. */
static void release(px_mutex *m, int code)
{
    px_waiter *w = px__waitq_first(&m->waiters);
    if (w == NULL) {
        m->owner = 0;
        m->dead = code == PX_EOWNERDEAD;
        return;
    }
    m->owner = w->id;                            /* hand over ... */
    px__hold_take(&m->hold, px__waiter_fiber(w), mutex_ended);
    px__grant(w, code);                          /* ... then wake */
}

/* Its holder ended (or is discarded with its scheduler: then every waiter
** is being discarded too, and nobody may be woken). */
static void mutex_ended(px_hold *h, uint64_t id, int discarding)
{
    px_mutex *m = mutex_of_hold(h);
    (void)id;
    if (discarding) {
        m->owner = 0;
        return;
    }
    release(m, PX_EOWNERDEAD);
}

/* A waiter was handed the lock, but a scope interrupted it before it ran:
** it will not use the lock, so the lock goes on, with what the grant said
** (a PX_EOWNERDEAD must reach whoever owns the lock next). */
static void mutex_pass_on(px_waiter *w)
{
    px_mutex *m = (px_mutex *)w->obj;
    px__hold_drop(&m->hold);
    release(m, w->result);
}

static size_t mutex_holders(const void *object, uint64_t *out, size_t max)
{
    const px_mutex *m = object;
    if (m->owner == 0 || max == 0)
        return 0;
    out[0] = m->owner;
    return 1;
}

px_mutex *px_mutex_new(void)
{
    return calloc(1, sizeof(px_mutex));   /* errno is ENOMEM on failure */
}

/* Everything but the free mutex: kept out of line so that the uncontended
** lock needs no stack frame. */
static int __attribute__((noinline)) lock_slow(px_mutex *m, px_fiber *f)
{
    int r;
    if (f->hosted && px__wait_resumed(m, &r))
        return r;                                /* the re-call after PX_EYIELD */
    if (m->owner == 0)
        return take(m, f);
    if (m->owner == f->id)
        return PX_EDEADLK;
    if (m->hold.owner->s != f->s)
        return PX_ETHREAD;
    px_park_info pi = { .reason = "Mutex lock", .object = m, .kind = "mutex",
                        .holders = mutex_holders };
    return px__wait(&m->waiters, px__waiter_begin(m, 0, mutex_pass_on), &pi);
}

int px_mutex_lock(px_mutex *m)
{
    if (m == NULL)
        return PX_EINVAL;
    px_fiber *f = px__fiber_here();
    if (f == NULL)
        return PX_ENOFIBER;
    /* Free means nobody waits.  A hosted fiber may be calling again to
    ** collect a wait, which the slow path looks for first. */
    if (m->owner == 0 && !f->hosted)
        return take(m, f);
    return lock_slow(m, f);
}

int px_mutex_trylock(px_mutex *m)
{
    if (m == NULL)
        return PX_EINVAL;
    px_fiber *f = px__fiber_here();
    if (f == NULL)
        return PX_ENOFIBER;
    if (m->owner == f->id)
        return PX_EDEADLK;
    if (m->owner != 0 || m->waiters.len != 0)
        return PX_EBUSY;
    return take(m, f);
}

int px_mutex_unlock(px_mutex *m)
{
    if (m == NULL)
        return PX_EINVAL;
    px_fiber *f = px__fiber_here();
    if (f == NULL)
        return PX_ENOFIBER;
    if (m->hold.owner != f)   /* the holder's record: one load less than its id */
        return PX_EPERM;
    px__hold_drop(&m->hold);
    if (m->waiters.len == 0)
        m->owner = 0;                            /* `dead` is 0 while held */
    else
        release(m, 0);
    return 0;
}

uint64_t px_mutex_owner(const px_mutex *m)
{
    return m ? m->owner : 0;
}

size_t px_mutex_waiters(const px_mutex *m)
{
    return m ? m->waiters.len : 0;
}

int px_mutex_free(px_mutex *m)
{
    if (m == NULL)
        return 0;
    if (m->owner != 0 || m->waiters.len != 0)
        return PX_EBUSY;
    free(m);
    return 0;
}
