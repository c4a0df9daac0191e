/*
** waitq.c -- queues of waiting fibers, hand-off and holds (see waitq.h).
*/
#include "fiber/waitq.h"

px_fiber *px__waitq_fiber(px__waiter *w)
{
    return PX__CONTAINER_OF(w, px_fiber, wait);
}

px__waiter *px__waitq_begin(px_fiber *f, const void *obj, int op,
                            void (*pass_on)(px__waiter *w))
{
    px__waiter *w = &f->wait;
    if (w->op == PX__POLL_OP)
        px__poll_fiber_ended(f);   /* a hosted fiber's uncollected fd wait */
    px__list_init(&w->link);
    w->q = NULL;
    w->obj = obj;
    w->pass_on = pass_on;
    w->op = op;
    w->result = 0;
    w->granted = 0;
    w->value = NULL;
    w->n = 0;
    return w;
}

/* The caller is not on the run of s: a fiber or an off-fiber call of another
** run, or a thread that runs none and is not the one s is bound to (s has
** parked fibers, so it ran: it is bound). */
static int caller_elsewhere(px_sched *s)
{
    px_sched *here = px__sched_here();
    if (here != NULL)
        return here != s;
    pthread_mutex_lock(&s->lock);   /* s->thread is written under it */
    int other = !s->bound || !pthread_equal(s->thread, pthread_self());
    pthread_mutex_unlock(&s->lock);
    return other;
}

/* Every waiter of q is of one scheduler (the rule keeps it so): the first
** one's says whose. */
int px__waitq_elsewhere_slow(const px__waitq *q)
{
    px__waiter *w = PX__CONTAINER_OF(q->list.next, px__waiter, link);
    return caller_elsewhere(px__waitq_fiber(w)->s);
}

uint64_t px__waitq_hold_id(const px__hold *h)
{
    px_fiber *f = px__waitq_holder(h);
    return f ? f->id : 0;
}

static px__waiter *waiter_of(px__list *l)
{
    return PX__CONTAINER_OF(l, px__waiter, link);
}

void px__waitq_remove(px__waitq *q, px__waiter *w)
{
    px__list_unlink(&w->link);
    w->q = NULL;
    q->len--;
}

int px__waitq_interrupted(const px__waiter *w)
{
    return px__waitq_fiber((px__waiter *)w)->park_result != 0;
}

px__waiter *px__waitq_first_slow(px__waitq *q)
{
    while (!px__list_empty(&q->list)) {
        px__waiter *w = waiter_of(q->list.next);
        if (!px__waitq_interrupted(w))
            return w;
        px__waitq_remove(q, w);   /* its dereg finds it off q: nothing to do */
    }
    return NULL;
}

size_t px__waitq_waiting(px__waitq *q)
{
    for (px__list *l = q->list.next, *next; l != &q->list; l = next) {
        next = l->next;
        if (px__waitq_interrupted(waiter_of(l)))
            px__waitq_remove(q, waiter_of(l));
    }
    return q->len;
}

static void waitq_append(px__waitq *q, px__waiter *w)
{
    px__list_push(&q->list, &w->link);
    w->q = q;
    q->len++;
}

/* The park was interrupted: leave the queue, or hand on a grant that raced. */
static void waiter_dereg(void *ctx)
{
    px__waiter *w = ctx;
    if (w->q)
        px__waitq_remove(w->q, w);
    if (w->granted && w->pass_on)
        w->pass_on(w);
    w->granted = 0;
}

void px__waitq_abandon(px_fiber *f)
{
    px__waiter *w = &f->wait;
    if (w->obj == NULL || w->op < 0)
        return;   /* no primitive's wait left uncollected */
    waiter_dereg(w);
    w->obj = NULL;
}

static int outcome(px__waiter *w, int park_result)
{
    w->obj = NULL;
    return park_result == 0 ? w->result : park_result;
}

int px__waitq_wait(px__waitq *q, px__waiter *w, const px_park_info *info)
{
    px_fiber *f = px__waitq_fiber(w);   /* the caller */
    if (px__waitq_elsewhere(q)) {
        w->obj = NULL;                  /* no wait under way: no re-call to collect */
        return PX_ETHREAD;
    }
    f->park = *info;                    /* in the record, not in a frame */
    f->park.object = w->obj;
    f->park.dereg = waiter_dereg;
    f->park.ctx = w;
    waitq_append(q, w);
    int r;
    do   /* anybody may px_wake any id: a wake without a grant is not ours */
        r = px__fiber_park(f);
    while (r == 0 && !w->granted);
    if (r == PX_EYIELD)
        return r;
    return outcome(w, r);
}

/* Step 1 found a hosted fiber calling again the operation it waits in:
** the outcome, once the wait is over. */
int px__waitq_collect(px_fiber *f)
{
    int r = f->park_result;
    while (r == 0 && !f->wait.granted) {   /* a stray wake: wait on */
        px_park_info pi = f->park;
        if ((r = px_park_with(&pi)) == PX_EYIELD)
            return r;
    }
    return outcome(&f->wait, r);
}

void px__waitq_grant(px__waiter *w, int result)
{
    if (w->q)
        px__waitq_remove(w->q, w);
    w->granted = 1;
    w->result = result;
    px_wake(px__waitq_fiber(w)->id);
}

void px__waitq_fiber_ended(px_fiber *f, int discarding)
{
    px__waiter *w = &f->wait;
    if (w->q)
        px__waitq_remove(w->q, w);   /* discarded while parked */
    w->obj = NULL;
    while (f->holds) {
        px__hold *h = f->holds;
        px__waitq_hold_drop(h);
        h->ended(h, f->id, discarding);
    }
}
