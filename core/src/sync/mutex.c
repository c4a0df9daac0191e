/*
** mutex.c -- a non-reentrant lock owned by a fiber (see parataxis.h).
**
** The whole state is a hold and a queue.  The hold's owner is the record of
** the fiber that holds the lock (or a mark: free); the hold puts the lock on
** that fiber's list of holds, so a fiber that ends holding it lets it go.
**
** Unlock never frees a lock that somebody waits for: it makes the first
** waiter the owner (the hold moved to its fiber) and only then wakes it.  So
** the lock is never free while fibers wait, nobody can slip in between the
** unlock and the waiter's return, and trylock needs no fairness rule of its
** own.
**
** A fiber that ends holding the lock gives it to the first waiter with
** PX_EOWNERDEAD, or leaves it free but marked dead (MUTEX_DEAD), and the next
** fiber to take it gets PX_EOWNERDEAD (once: that fiber is now in charge of
** the state the lock protects).
*/
#include <stdlib.h>

#include "base/compiler.h"
#include "sync/sync.h"

/*
** The hold comes first, so that the mutex and its hold have one address (the
** uncontended lock links m itself onto the holder's list).  hold.owner says
** everything the fast paths ask in one word:
**
**   MUTEX_FREE   free (what px_mutex_new makes);
**   MUTEX_DEAD   free, but its last owner ended holding it: the next to take
**                it gets PX_EOWNERDEAD;
**   a record     the fiber that holds it.
**
** Neither mark is NULL or a fiber's record, so the uncontended lock tests one
** word for "free, no death to tell of", and "hold.owner is the caller's
** record" says the caller holds it (no separate test that the caller is a
** fiber: off-fiber it has no record).  The marks are waitq's hold marks
** (PX__WAITQ_MARK), so px__waitq_holder reads them as "nobody"; they stand
** only on a free mutex, never on a hold on a list (the NULL that
** px__waitq_hold_drop leaves lasts until release() or mutex_ended() puts a
** mark or a new holder in).  hold.ended is mutex_ended for good, set by
** px_mutex_new.
*/
struct px_mutex {
    px__hold hold;            /* owner: see above */
    px__waitq waiters;        /* fibers parked in px_mutex_lock, FIFO */
};

_Static_assert(offsetof(struct px_mutex, hold) == 0, "a mutex is its hold");

#define MUTEX_FREE PX__WAITQ_MARK(1)
#define MUTEX_DEAD PX__WAITQ_MARK(2)

enum mutex_op { MUTEX_LOCK };

/* Makes fiber f, which holds no hold on m, the owner of the free m; returns
** what its lock returns. */
static int take(px_mutex *m, px_fiber *f)
{
    int r = m->hold.owner == MUTEX_DEAD ? PX_EOWNERDEAD : 0;
    px__waitq_hold_link(&m->hold, f);
    return r;
}

/* The lock, off every list, is let go with `code` for the next owner (0, or
** PX_EOWNERDEAD when its holder died): hand it to the first waiter that still
** waits (px__waitq_first), or free it. */
static void release(px_mutex *m, int code)
{
    px__waiter *w = px__waitq_first(&m->waiters);
    if (w == NULL) {
        m->hold.owner = code == PX_EOWNERDEAD ? MUTEX_DEAD : MUTEX_FREE;
        return;
    }
    px__waitq_hold_link(&m->hold, px__waitq_fiber(w));   /* hand over ... */
    px__waitq_grant(w, code);                             /* ... then wake */
}

/* Its holder ended (or is discarded with its scheduler: then every waiter
** is being discarded too, and nobody may be woken; the hold is off its list
** already, so m is free). */
static void mutex_ended(px__hold *h, uint64_t id, int discarding)
{
    (void)id;
    if (discarding)
        h->owner = MUTEX_FREE;
    else
        release((px_mutex *)(void *)h, PX_EOWNERDEAD);
}

/* A waiter was handed the lock, but a scope interrupted it before it ran:
** it will not use the lock, so the lock goes on, with what the grant said
** (a PX_EOWNERDEAD must reach whoever owns the lock next). */
static void mutex_pass_on(px__waiter *w)
{
    px_mutex *m = (px_mutex *)w->obj;
    if (px__waitq_holder(&m->hold) != NULL)              /* the waiter's, since the grant */
        px__waitq_hold_drop(&m->hold);
    release(m, w->result);
}

static size_t mutex_holders(const void *object, uint64_t *out, size_t max)
{
    return px__sync_one_holder(&((const px_mutex *)object)->hold, out, max);
}

px_mutex *px_mutex_new(void)
{
    px_mutex *m = calloc(1, sizeof(px_mutex));   /* errno is ENOMEM on failure */
    if (m) {
        m->hold.owner = MUTEX_FREE;
        m->hold.ended = mutex_ended;
        px__waitq_init(&m->waiters);
    }
    return m;
}

/*
** The uncontended lock and unlock are a test of hold.owner and a push on (pop
** off) the caller's list of holds; everything else is kept out of line in
** the slow paths, so the fast ones need no stack frame and no call.
*/
static int PX__NOINLINE lock_slow(px_mutex *m, px_fiber *f)
{
    px_fiber *o = px__waitq_holder(&m->hold);
    if (o == NULL)                               /* free means nobody waits */
        return take(m, f);
    if (o == f)
        return PX_EDEADLK;
    if (px__waitq_foreign(o, f))
        return PX_ETHREAD;
    static const px_park_info pi = { .reason = "Mutex lock", .kind = "mutex",
                                     .holders = mutex_holders };
    return px__waitq_wait(&m->waiters, px__waitq_begin(f, m, MUTEX_LOCK, mutex_pass_on), &pi);
}

int px_mutex_lock(px_mutex *m)
{
    px_fiber *f;
    int r;
    if (px__sync_enter(m, MUTEX_LOCK, &f, &r))   /* NULL, off-fiber, a hosted re-call */
        return r;
    /* Free (and no death to tell of) means nobody waits. */
    if (PX__LIKELY(m->hold.owner == MUTEX_FREE)) {
        px__waitq_hold_link(&m->hold, f);
        return 0;
    }
    return lock_slow(m, f);
}

int px_mutex_trylock(px_mutex *m)
{
    px_fiber *f;
    int r = px__sync_caller(m, &f);
    if (r != 0)
        return r;
    px_fiber *o = px__waitq_holder(&m->hold);
    if (o == f)
        return PX_EDEADLK;
    if (o != NULL || m->waiters.len != 0)
        return PX_EBUSY;
    return take(m, f);
}

/* Not the owner, the hold not first on the owner's list, or fibers waiting. */
static int PX__NOINLINE unlock_slow(px_mutex *m, px_fiber *f)
{
    if (f == NULL)
        return PX_ENOFIBER;
    if (!px__waitq_held_by(&m->hold, f))         /* a mark: never f */
        return PX_EPERM;
    px__waitq_hold_drop(&m->hold);
    release(m, 0);
    return 0;
}

int px_mutex_unlock(px_mutex *m)
{
    if (m == NULL)
        return PX_EINVAL;
    px_fiber *f = px__waitq_self();
    /* Held by the caller (then f is a record, not NULL), last taken of its
    ** holds, nobody waiting: pop it. */
    if (PX__LIKELY(px__waitq_held_by(&m->hold, f) && px__waitq_holds(f) == &m->hold
                  && m->waiters.len == 0)) {
        px__waitq_hold_pop(&m->hold, f);
        m->hold.owner = MUTEX_FREE;
        return 0;
    }
    return unlock_slow(m, f);
}

uint64_t px_mutex_owner(const px_mutex *m)
{
    return m ? px__waitq_hold_id(&m->hold) : 0;
}

size_t px_mutex_waiters(const px_mutex *m)
{
    return m ? m->waiters.len : 0;
}

int px_mutex_free(px_mutex *m)
{
    return px__sync_free(m, m && (px__waitq_holder(&m->hold) != NULL || m->waiters.len != 0));
}
