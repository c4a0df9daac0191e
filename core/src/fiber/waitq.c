/*
** waitq.c -- queues of waiting fibers, hand-off and holds (see waitq.h).
*/
#include <stdlib.h>

#include "fiber/waitq.h"

px_fiber *px__waitq_fiber(px__waiter *w)
{
    return w->choice ? w->choice->f : PX__CONTAINER_OF(w, px_fiber, wait);
}

static void choice_abandon(px__choice *c);
static void choice_free(px__choice *c);
static void choice_ended(px__choice *c, int discarding);

/* A hosted fiber begins a wait with another one recorded that it never came
** back for: that one is given up. */
static void drop_uncollected(px_fiber *f)
{
    if (f->wait.op == PX__POLL_OP)
        px__poll_fiber_ended(f);
    else if (f->wait.op == PX__WAITQ_CHOICE_OP)
        choice_abandon(f->wait.value);
}

px__waiter *px__waitq_begin(px_fiber *f, const void *obj, int op,
                            void (*pass_on)(px__waiter *w))
{
    px__waiter *w = &f->wait;
    if (w->op < 0)
        drop_uncollected(f);
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
    if (w->choice && w->choice->winner >= 0)
        return 1;   /* another case of its select was granted: withdrawn */
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
    if (w->op == PX__WAITQ_CHOICE_OP) {
        choice_abandon(w->value);
        return;
    }
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
    if (w->choice)
        w->choice->winner = (int)(w - w->choice->cases);   /* decided */
    px_wake(px__waitq_fiber(w)->id);
}

void px__waitq_fiber_ended(px_fiber *f, int discarding)
{
    px__waiter *w = &f->wait;
    if (w->op == PX__WAITQ_CHOICE_OP)
        choice_ended(w->value, discarding);
    if (w->q)
        px__waitq_remove(w->q, w);   /* discarded while parked */
    w->obj = NULL;
    while (f->holds) {
        px__hold *h = f->holds;
        px__waitq_hold_drop(h);
        h->ended(h, f->id, discarding);
    }
}

/* -- choices ------------------------------------------------------------------ */

px__choice *px__waitq_choice_new(px_fiber *f, const void *cases, size_t n)
{
    if (f->wait.op < 0)
        drop_uncollected(f);
    if (n > (SIZE_MAX - sizeof(px__choice)) / sizeof(px__waiter))
        return NULL;
    px__choice *c = malloc(sizeof *c + n * sizeof c->cases[0]);
    if (c == NULL)
        return NULL;
    c->f = f;
    c->winner = -1;
    c->n = n;
    for (size_t i = 0; i < n; i++)
        c->cases[i] = (px__waiter){ .choice = c };
    px__waiter *w = px__waitq_begin(f, cases, PX__WAITQ_CHOICE_OP, NULL);
    w->value = c;
    return c;
}

px__waiter *px__waitq_case(px__choice *c, size_t i, const void *obj, int op,
                           void (*pass_on)(px__waiter *w))
{
    px__waiter *w = &c->cases[i];
    px__list_init(&w->link);
    w->obj = obj;
    w->op = op;
    w->pass_on = pass_on;
    return w;
}

int px__waitq_case_join(px__waitq *q, px__waiter *w)
{
    if (px__waitq_elsewhere(q))
        return PX_ETHREAD;
    waitq_append(q, w);
    return 0;
}

int px__waitq_case_fd(px__choice *c, size_t i, int fd, unsigned events)
{
    px__waiter *w = px__waitq_case(c, i, NULL, PX__POLL_OP, NULL);
    int r = px__poll_case_arm(c->f, w, fd, events);
    if (r != 0)
        w->op = 0;   /* not armed: nothing to withdraw */
    return r;
}

/* Takes case w off its queue or out of the epoll set, unless it won. */
static void case_withdraw(px__choice *c, px__waiter *w)
{
    if (w->op == PX__POLL_OP)
        px__poll_case_end(c->f, w);
    else if (w->q)
        px__waitq_remove(w->q, w);
}

/* The park of a choice was interrupted: every case withdraws, and a grant
** that raced the interrupt is handed on (c->winner still names it). */
static void choice_dereg(void *ctx)
{
    px__choice *c = ctx;
    for (size_t i = 0; i < c->n; i++) {
        px__waiter *w = &c->cases[i];
        case_withdraw(c, w);
        if (w->granted && w->op != PX__POLL_OP && w->pass_on)
            w->pass_on(w);
    }
}

/* The case that decided c: the queue's grant, else an fd case's; -1: none. */
static int decided(px__choice *c, int fds)
{
    if (c->winner >= 0)
        return c->winner;
    for (size_t i = 0; fds && i < c->n; i++)
        if (c->cases[i].op == PX__POLL_OP && px__poll_case_granted(c->f, &c->cases[i]))
            return (int)i;
    return -1;
}

static int has_fd_case(const px__choice *c)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->cases[i].op == PX__POLL_OP)
            return 1;
    return 0;
}

int px__waitq_choose(px__choice *c, const px_park_info *info)
{
    px_fiber *f = c->f;
    f->park = *info;
    f->park.object = c;
    f->park.dereg = choice_dereg;
    f->park.ctx = c;
    int fds = has_fd_case(c), r, won;
    do   /* a wake without a grant is not ours */
        r = px__fiber_park(f);
    while (r == 0 && (won = decided(c, fds)) < 0);
    return r == 0 ? won : r;
}

int px__waitq_choice_collect(px__choice *c)
{
    px_fiber *f = c->f;
    int fds = has_fd_case(c), r = f->park_result, won;
    while (r == 0 && (won = decided(c, fds)) < 0)   /* a stray wake: wait on */
        if ((r = px__fiber_park(f)) == PX_EYIELD)
            return r;
    return r == 0 ? won : r;
}

px__choice *px__waitq_choice_recall(px_fiber *f, const void *cases)
{
    if (PX__LIKELY(!f->hosted) || f->wait.op != PX__WAITQ_CHOICE_OP || f->wait.obj != cases)
        return NULL;
    return f->wait.value;
}

void px__waitq_choice_end(px__choice *c)
{
    for (size_t i = 0; i < c->n; i++)
        case_withdraw(c, &c->cases[i]);
    choice_free(c);
}

/* Frees c; its cases are off every queue and out of the epoll set. */
static void choice_free(px__choice *c)
{
    px__waiter *own = &c->f->wait;
    own->op = 0;
    own->obj = NULL;
    own->value = NULL;
    free(c);
}

/* The fiber of c ended choosing: discarded with its scheduler (whose epoll
** set goes with it: only the queues of objects that outlive it are left),
** or a hosted fiber whose body ended mid-park (its dereg ran). */
static void choice_ended(px__choice *c, int discarding)
{
    for (size_t i = 0; i < c->n; i++) {
        px__waiter *w = &c->cases[i];
        if (w->op != PX__POLL_OP || !discarding)
            case_withdraw(c, w);
    }
    choice_free(c);
}

/* A hosted fiber left a choice uncollected: as an interrupt would end it
** (a raced grant handed on), then freed. */
static void choice_abandon(px__choice *c)
{
    choice_dereg(c);
    px__waitq_choice_end(c);
}
