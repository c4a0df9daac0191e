/*
** sem.c -- a counting semaphore (see parataxis.h).
**
** `value` counts the free units.  A release with a fiber waiting does not
** raise it: the unit becomes that waiter's before it wakes, so value > 0
** means nobody can use a unit that is waited for, and acquire and
** tryacquire may take one at once without a fairness rule of their own.
**
** A release skips waiters whose park a scope already interrupted (they are
** leaving; see px__waitq_first), never a waiter that a stray px_wake made
** ready (it still waits: the unit goes to it).  A grant can still race an
** interrupt when the release was made while the scheduler was not running
** (the wake then waits in its inbox behind a cancel): the interrupted fiber
** will not use its unit, and sem_pass_on releases it again, to the next
** waiter or back to the count.
*/
#include <stdlib.h>

#include "sync/sync.h"
#include "sync/select.h"

enum sem_op { SEM_ACQUIRE };

struct px_sem {
    size_t value;            /* free units; 0 while fibers wait */
    px__waitq waiters;        /* fibers parked in px_sem_acquire, FIFO */
};

px_sem *px_sem_new(size_t initial)
{
    px_sem *sem = PX__SYNC_NEW(px_sem, waiters);
    if (sem)
        sem->value = initial;
    return sem;
}

/* One unit comes free: it is the first waiter's, or the count's. */
static void give(px_sem *sem)
{
    px__waiter *w = px__waitq_first(&sem->waiters);
    if (w)
        px__waitq_grant(w, 0);                         /* the unit is w's already */
    else
        sem->value++;
}

static void sem_pass_on(px__waiter *w)
{
    give((px_sem *)w->obj);
}

int px_sem_acquire(px_sem *sem)
{
    px_fiber *f;
    int r;
    if (px__sync_enter(sem, SEM_ACQUIRE, &f, &r))   /* NULL, off-fiber, a hosted re-call */
        return r;
    if (sem->value > 0) {
        sem->value--;
        return 0;
    }
    static const px_park_info pi = { .reason = "Semaphore acquire", .kind = "semaphore" };
    return px__waitq_wait(&sem->waiters, px__waitq_begin(f, sem, SEM_ACQUIRE, sem_pass_on), &pi);
}

int px_sem_tryacquire(px_sem *sem)
{
    if (sem == NULL)
        return PX_EINVAL;
    if (sem->value == 0)
        return PX_EBUSY;                         /* value > 0: nobody waits */
    sem->value--;
    return 0;
}

int px_sem_release(px_sem *sem)
{
    if (sem == NULL)
        return PX_EINVAL;
    if (sem->value == SIZE_MAX)
        return PX_EINVAL;
    if (sem->waiters.len == 0)
        sem->value++;
    else if (px__waitq_elsewhere(&sem->waiters))
        return PX_ETHREAD;                       /* the unit would be handed over */
    else
        give(sem);
    return 0;
}

int px__sem_case(px_sem *sem, px__choice *c, size_t i)
{
    px__waiter *w = px__waitq_case(c, i, sem, SEM_ACQUIRE, sem_pass_on);
    return px__waitq_case_join(&sem->waiters, w);
}

size_t px_sem_value(const px_sem *sem)
{
    return sem ? sem->value : 0;
}

size_t px_sem_waiters(const px_sem *sem)
{
    return sem ? sem->waiters.len : 0;
}

int px_sem_free(px_sem *sem)
{
    return px__sync_free(sem, sem && (sem->waiters.len != 0));
}
