/*
** timer.c -- px_timer, the reusable deadline timer, built on a timer queue.
**
** The waits of one expiry form a batch, and a batch is one one-shot timer of the
** queue.  Setting a new expiry detaches the current batch and cancels its queue
** timer: if the cancel wins, the queue calls the batch with PX_ECANCELED and the
** batch passes that on to every wait; if the batch has already started, its waits
** are expiring and complete normally.  Either way the queue's exactly-once call
** is what delivers each wait exactly once.
**
** A batch may outlive its timer (px_timer_free while a batch is being delivered),
** so the timer is reference-counted: one reference for its owner, one per batch.
**
** In the child of a fork, a timer on a queue of the parent refuses every call
** with PX_EFORKED before it takes its lock: the queue's worker, which delivers
** its batches and takes that lock, was a thread of the parent.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "parataxis.h"
#include "base/clock.h"
#include "base/deadline.h"
#include "base/names.h"
#include "timerq/timerq.h"

typedef struct wait_item {
    px_handler_fn fn;
    void *arg;
    struct wait_item *next;
} wait_item;

typedef struct batch {
    px_timer *timer;
    wait_item *first, **last;
    int count;
    uint64_t id;             /* its timer in the queue */
} batch;

struct px_timer {
    pthread_mutex_t lock;
    px_timerq *q;
    int64_t expiry;
    batch *current;          /* the waits of the current expiry, or NULL */
    atomic_int refs;
};

static void timer_unref(px_timer *t)
{
    if (atomic_fetch_sub(&t->refs, 1) == 1) {
        pthread_mutex_destroy(&t->lock);
        free(t);
    }
}

/* Refuses a call in the child of a fork on a timer whose queue is the parent's. */
static int forked(const px_timer *t)
{
    return px__timerq_forked(t->q);
}

/* What a call on `t` answers before it starts: PX_EINVAL for NULL, PX_EFORKED
** in the child of a fork (above), 0 to go on. */
static int refusal(const px_timer *t)
{
    if (t == NULL)
        return PX_EINVAL;
    return forked(t) ? PX_EFORKED : 0;
}

/* The queue's one call for a batch: pass `status` to every wait. */
static void batch_fire(void *arg, int status)
{
    batch *b = arg;
    px_timer *t = b->timer;
    pthread_mutex_lock(&t->lock);
    if (t->current == b)
        t->current = NULL;
    pthread_mutex_unlock(&t->lock);
    wait_item *w = b->first, *next;
    for (; w != NULL; w = next) {
        next = w->next;
        w->fn(w->arg, status);
        free(w);
    }
    free(b);
    timer_unref(t);
}

/* Detaches the current batch (lock held); returns how many waits it aborted. */
static int detach_current(px_timer *t)
{
    batch *b = t->current;
    t->current = NULL;
    return b != NULL && px_timerq_cancel(t->q, b->id) == 1 ? b->count : 0;
}

px_timer *px_timer_new(px_timerq *q)
{
    if (q == NULL)
        return NULL;
    px_timer *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    pthread_mutex_init(&t->lock, NULL);
    t->q = q;
    t->expiry = px__clock_real();
    atomic_init(&t->refs, 1);
    return t;
}

int px_timer_expires_at(px_timer *t, int64_t deadline)
{
    int rc = deadline < 0 ? PX_EINVAL : refusal(t);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&t->lock);
    int aborted = detach_current(t);
    t->expiry = deadline;
    pthread_mutex_unlock(&t->lock);
    return aborted;
}

int px_timer_expires_after(px_timer *t, int64_t delay_ns)
{
    if (t == NULL || delay_ns < 0)
        return PX_EINVAL;
    return px_timer_expires_at(t, px__deadline_after(px__clock_real(), delay_ns));
}

int64_t px_timer_expiry(px_timer *t)
{
    int rc = refusal(t);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&t->lock);
    int64_t expiry = t->expiry;
    pthread_mutex_unlock(&t->lock);
    return expiry;
}

/* Starts a batch for the current expiry (lock held); NULL with *err set when
** there is no memory for it or the queue refuses the timer. */
static batch *batch_start(px_timer *t, int *err)
{
    batch *b = calloc(1, sizeof *b);
    if (b == NULL) {
        *err = PX_ENOMEM;
        return NULL;
    }
    b->timer = t;
    b->last = &b->first;
    atomic_fetch_add(&t->refs, 1);
    b->id = px_timerq_add_at(t->q, t->expiry, batch_fire, b);
    if (b->id == 0) {
        *err = px__timerq_refusal(t->q);
        atomic_fetch_sub(&t->refs, 1);
        free(b);
        return NULL;
    }
    t->current = b;
    return b;
}

int px_timer_async_wait(px_timer *t, px_handler_fn fn, void *arg)
{
    int rc = fn == NULL ? PX_EINVAL : refusal(t);
    if (rc != 0)
        return rc;   /* PX_EFORKED even when a batch of the parent's is pending */
    wait_item *w = malloc(sizeof *w);
    if (w == NULL)
        return PX_ENOMEM;
    *w = (wait_item){ fn, arg, NULL };
    pthread_mutex_lock(&t->lock);
    /* The batch cannot fire before we append: firing takes this lock first. */
    int err = 0;
    batch *b = t->current ? t->current : batch_start(t, &err);
    if (b != NULL) {
        *b->last = w;
        b->last = &w->next;
        b->count++;
    }
    pthread_mutex_unlock(&t->lock);
    if (b == NULL) {
        free(w);
        return err;
    }
    return 0;
}

int px_timer_cancel(px_timer *t)
{
    int rc = refusal(t);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&t->lock);
    int aborted = detach_current(t);
    pthread_mutex_unlock(&t->lock);
    return aborted;
}

void px_timer_free(px_timer *t)
{
    if (t == NULL)
        return;
    px__names_forget(t);   /* given up: its name goes with it */
    if (forked(t)) {
        /* The parent's batches never fire here and keep their references;
        ** with none, and the lock free, the memory is ours to release. */
        if (atomic_load(&t->refs) == 1 && pthread_mutex_trylock(&t->lock) == 0) {
            pthread_mutex_unlock(&t->lock);
            timer_unref(t);
        }
        return;
    }
    px_timer_cancel(t);
    timer_unref(t);
}
