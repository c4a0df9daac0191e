/*
** future.c -- values set once that fibers of any scheduler wait for (see
** parataxis.h, "Future").
**
** A future is a flag, a value or a status, and a list of waiting nodes
** under a lock: any thread may settle it, and fibers of any scheduler wait.
** A wait is a record on the heap with one node per future it waits on, so
** one record serves px_future_wait, wait_all and wait_any alike: it parks
** until its condition holds (the one future settled; all of them, or one
** failed; any of them), and a settlement only takes the nodes off its list
** and wakes their fibers, which look again.  A stray wake finds the
** condition unmet and parks again.  The record is also a hold of its fiber:
** a hosted fiber that got PX_EYIELD finds it again at its re-call, and a
** fiber that ends without collecting it gives it up (the hold's ended()).
**
** A fiber's future (px_fiber_future) is a hold of that fiber too: its end
** settles it with the fiber's result.  The ended fiber's waiter, idle from
** then on, keeps it (op OWNED_OP) until the record is freed.  Fibers of other
** runs may still be waiting on it then (px_sched_free discarded the fiber):
** it is settled with PX_ECANCELED, if it was not, and the last of those
** waits frees it -- the free must not pull a future from under a wait.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/compiler.h"
#include "base/names.h"
#include "fiber/fiber.h"
#include "fiber/waitq.h"

enum { OWNED_OP = -4 };   /* an ended fiber's waiter: wait.value is its future */

struct px_future {
    pthread_mutex_t lock;
    atomic_int done;          /* 1 once settled: read without the lock */
    int status;               /* 0, or the failure it was settled with */
    void *value;
    uint64_t order;           /* when it was settled, among all futures */
    px__list waiters;         /* nodes of waits on it to wake, under the lock */
    size_t nwaiting;          /* waits on it not over (woken ones included) */
    px_future *self;          /* itself: the array of one px_future_wait waits on */
    px_fiber *fiber;          /* px_fiber_future's: whose end settles it */
    px__hold hold;            /* on that fiber until it ends */
    int orphaned;             /* its fiber's record is gone: the last wait frees it */
};

/* The order of settlements, so wait_all reports the first failure to come. */
static atomic_uint_fast64_t settlements;

enum wait_kind { WAIT_ONE, WAIT_ALL, WAIT_ANY };

typedef struct wait_node {
    px__list link;            /* in fu->waiters while `linked` */
    px_future *fu;
    uint64_t fiber;           /* whom a settlement wakes */
    int counted;              /* in fu->nwaiting: the wait began before it settled */
    int linked;               /* in fu->waiters: not woken yet */
} wait_node;

typedef struct wait_rec {
    px__hold hold;            /* on the waiting fiber while the wait is under way */
    px_future *const *fus;    /* the caller's array: a hosted re-call names it */
    size_t n;
    enum wait_kind kind;
    wait_node nodes[];
} wait_rec;

/* -- settling -------------------------------------------------------------- */

px_future *px_future_new(void)
{
    px_future *fu = calloc(1, sizeof *fu);
    if (fu == NULL)
        return NULL;
    pthread_mutex_init(&fu->lock, NULL);
    atomic_init(&fu->done, 0);
    fu->self = fu;
    px__list_init(&fu->waiters);
    return fu;
}

/* Settles fu (unless it is already: PX_EBUSY) and wakes its waiters, whose
** nodes leave its list here: a waiter finds its node off the list. */
static int settle(px_future *fu, void *value, int status)
{
    pthread_mutex_lock(&fu->lock);
    if (atomic_load_explicit(&fu->done, memory_order_relaxed)) {
        pthread_mutex_unlock(&fu->lock);
        return PX_EBUSY;
    }
    fu->value = value;
    fu->status = status;
    fu->order = atomic_fetch_add(&settlements, 1);
    atomic_store_explicit(&fu->done, 1, memory_order_release);
    while (!px__list_empty(&fu->waiters)) {
        wait_node *nd = PX__CONTAINER_OF(fu->waiters.next, wait_node, link);
        px__list_unlink(&nd->link);
        nd->linked = 0;
        /* Under the lock, so the record cannot be freed before the wake:
        ** a waiter unlinks its nodes under this lock.  A wake takes no lock
        ** of a future, so no order of locks can deadlock. */
        px_wake(nd->fiber);
    }
    pthread_mutex_unlock(&fu->lock);
    return 0;
}

int px_future_set_result(px_future *fu, void *value)
{
    return fu == NULL ? PX_EINVAL : settle(fu, value, 0);
}

int px_future_set_error(px_future *fu, int status)
{
    return fu == NULL || status == 0 ? PX_EINVAL : settle(fu, NULL, status);
}

int px_future_done(const px_future *fu)
{
    return fu != NULL && atomic_load_explicit(&((px_future *)fu)->done, memory_order_acquire);
}

static void destroy(px_future *fu)
{
    px__names_forget(fu);
    pthread_mutex_destroy(&fu->lock);
    free(fu);
}

int px_future_free(px_future *fu)
{
    if (fu == NULL)
        return 0;
    if (fu->fiber != NULL)
        return PX_EINVAL;            /* a fiber's: freed with its record */
    pthread_mutex_lock(&fu->lock);
    int busy = fu->nwaiting != 0;
    pthread_mutex_unlock(&fu->lock);
    if (busy)
        return PX_EBUSY;
    destroy(fu);
    return 0;
}

/* -- waiting --------------------------------------------------------------- */

/* Whether the wait of `kind` on fus[0..n) is over; *out is then what it
** returns (an index for WAIT_ANY, else 0 or a failure status). */
static int wait_over(px_future *const *fus, size_t n, enum wait_kind kind, int *out)
{
    const px_future *failed = NULL, *first = NULL;
    size_t settled = 0;
    for (size_t i = 0; i < n; i++) {
        if (!px_future_done(fus[i]))
            continue;
        settled++;
        if (first == NULL || fus[i]->order < first->order) {
            first = fus[i];
            if (kind == WAIT_ANY)
                *out = (int)i;
        }
        if (fus[i]->status != 0 && (failed == NULL || fus[i]->order < failed->order))
            failed = fus[i];
    }
    if (kind == WAIT_ANY)
        return first != NULL;   /* the first to settle, whatever order they are in */
    if (failed != NULL || settled == n) {
        *out = failed ? failed->status : 0;
        return 1;
    }
    return 0;
}

/* Ends w's wait on every future: its nodes leave the lists they are still
** on, and no future counts it any more (px_future_free may free them). */
static void unlink_all(wait_rec *w)
{
    for (size_t i = 0; i < w->n; i++) {
        wait_node *nd = &w->nodes[i];
        if (!nd->counted)
            continue;   /* settled before the wait began: never touched */
        /* `linked` only under the lock: a settlement clears it on any thread. */
        pthread_mutex_lock(&nd->fu->lock);
        if (nd->linked) {
            px__list_unlink(&nd->link);
            nd->linked = 0;
        }
        int last = --nd->fu->nwaiting == 0 && nd->fu->orphaned;
        pthread_mutex_unlock(&nd->fu->lock);
        nd->counted = 0;
        if (last)
            destroy(nd->fu);   /* no other node of w counts it: this was its last */
    }
}

/* The park's dereg: an interrupted wait leaves every list. */
static void dereg(void *ctx)
{
    unlink_all(ctx);
}

static void finish(wait_rec *w)
{
    unlink_all(w);
    px__waitq_hold_drop(&w->hold);
    free(w);
}

/* The fiber ended (a hosted body, mid-park) or was discarded holding w. */
static void wait_ended(px__hold *h, uint64_t id, int discarding)
{
    (void)id;
    (void)discarding;
    wait_rec *w = PX__CONTAINER_OF(h, wait_rec, hold);
    unlink_all(w);
    free(w);
}

/* The wait that hosted fiber f recorded on fus, or NULL. */
static wait_rec *recorded(px_fiber *f, px_future *const *fus, size_t n, enum wait_kind kind)
{
    for (px__hold *h = px__waitq_holds(f); h; h = h->next) {
        if (h->ended != wait_ended)
            continue;
        wait_rec *w = PX__CONTAINER_OF(h, wait_rec, hold);
        if (w->fus == fus && w->n == n && w->kind == kind)
            return w;
    }
    return NULL;
}

/* Puts a node of w on each future of it not settled yet. */
static void link_all(wait_rec *w, uint64_t fiber)
{
    for (size_t i = 0; i < w->n; i++) {
        wait_node *nd = &w->nodes[i];
        nd->fu = w->fus[i];
        nd->fiber = fiber;
        pthread_mutex_lock(&nd->fu->lock);
        if (!atomic_load_explicit(&nd->fu->done, memory_order_relaxed)) {
            px__list_push(&nd->fu->waiters, &nd->link);
            nd->linked = nd->counted = 1;
            nd->fu->nwaiting++;
        }
        pthread_mutex_unlock(&nd->fu->lock);
    }
}

static wait_rec *begin(px_fiber *f, px_future *const *fus, size_t n, enum wait_kind kind)
{
    wait_rec *w = calloc(1, sizeof *w + n * sizeof w->nodes[0]);
    if (w == NULL)
        return NULL;
    w->fus = fus;
    w->n = n;
    w->kind = kind;
    px__waitq_hold_take(&w->hold, f, wait_ended);
    link_all(w, f->id);
    return w;
}

static int park(wait_rec *w)
{
    static const px_park_info info = {
        .reason = "future wait", .dereg = dereg, .kind = "future",
        .flags = PX_PARK_OUTSIDE };
    px_park_info pi = info;
    pi.ctx = w;
    pi.object = w->fus[0];
    return px_park_with(&pi);
}

/* Copies the values of a wait that ended with 0 (wait_any asks for none):
** before finish(), which may free an orphaned future. */
static void take_values(px_future *const *fus, size_t n, int out, void **values)
{
    for (size_t i = 0; out == 0 && values != NULL && i < n; i++)
        values[i] = fus[i]->value;
}

/* Whether fiber f's own future is among fus: a wait for its own end, which
** nothing would ever report (the wait is an outside park). */
static int waits_for_itself(px_future *const *fus, size_t n, const px_fiber *f)
{
    for (size_t i = 0; i < n; i++)
        if (fus[i]->fiber == f)
            return 1;
    return 0;
}

/* The one wait of the three calls: parks until wait_over says so. */
static int wait_for(px_future *const *fus, size_t n, enum wait_kind kind, void **values)
{
    int out;
    px_fiber *f = px__fiber_here();
    wait_rec *w = f ? recorded(f, fus, n, kind) : NULL;
    int r = w ? px_park_result() : 0;   /* a hosted re-call: its park's outcome */
    if (f != NULL && w == NULL && waits_for_itself(fus, n, f))
        return PX_EDEADLK;              /* as a join of itself, whatever else is settled */
    if (w == NULL && wait_over(fus, n, kind, &out)) {
        take_values(fus, n, out, values);
        return out;
    }
    if (f == NULL)
        return PX_ENOFIBER;
    if (w == NULL && (w = begin(f, fus, n, kind)) == NULL)
        return PX_ENOMEM;
    for (;;) {
        if (wait_over(fus, n, kind, &out)) {
            take_values(fus, n, out, values);
            finish(w);
            return out;
        }
        if (r != 0) {                   /* a scope, or no memory to park */
            finish(w);
            return r;
        }
        r = park(w);
        if (r == PX_EYIELD)
            return r;                   /* recorded: the fiber holds w */
    }
}

static int check_all(px_future *const *fus, size_t n)
{
    if (fus == NULL)
        return PX_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (fus[i] == NULL)
            return PX_EINVAL;
    return 0;
}

int px_future_wait(px_future *fu, void **value)
{
    if (fu == NULL)
        return PX_EINVAL;
    return wait_for(&fu->self, 1, WAIT_ONE, value);
}

int px_future_wait_all(px_future *const *fus, size_t n, void **values)
{
    int r = check_all(fus, n);
    return r != 0 || n == 0 ? r : wait_for(fus, n, WAIT_ALL, values);
}

int px_future_wait_any(px_future *const *fus, size_t n)
{
    int r = check_all(fus, n);
    return r != 0 ? r : n == 0 ? PX_EINVAL : wait_for(fus, n, WAIT_ANY, NULL);
}

/* -- a fiber's future ------------------------------------------------------- */

/* Its fiber ended: settled with what the body returned.  A fiber discarded
** with its scheduler never returned: its future stays unsettled, and goes
** with the record. */
static void fiber_ended(px__hold *h, uint64_t id, int discarding)
{
    (void)id;
    px_future *fu = PX__CONTAINER_OF(h, px_future, hold);
    px_fiber *f = fu->fiber;
    f->wait.op = OWNED_OP;
    f->wait.value = fu;
    if (!discarding)
        settle(fu, f->hosted ? NULL : f->result, 0);
}

px_future *px_fiber_future(px_fiber *f)
{
    if (f == NULL)
        return NULL;
    if (f->state == PX__FIBER_DONE && f->wait.op == OWNED_OP)
        return f->wait.value;
    for (px__hold *h = px__waitq_holds(f); h; h = h->next)
        if (h->ended == fiber_ended)
            return PX__CONTAINER_OF(h, px_future, hold);
    px_future *fu = px_future_new();
    if (fu == NULL)
        return NULL;
    fu->fiber = f;
    if (f->state == PX__FIBER_DONE)
        fiber_ended(&fu->hold, f->id, 0);
    else
        px__waitq_hold_take(&fu->hold, f, fiber_ended);
    return fu;
}

void px__future_fiber_freed(px_fiber *f)
{
    if (f->wait.op != OWNED_OP)
        return;
    px_future *fu = f->wait.value;
    /* Discarded, it never returned: a wait of another run would wait for good. */
    settle(fu, NULL, PX_ECANCELED);
    pthread_mutex_lock(&fu->lock);
    int waited = fu->nwaiting != 0;
    fu->orphaned = waited;
    pthread_mutex_unlock(&fu->lock);
    if (!waited)
        destroy(fu);
}
