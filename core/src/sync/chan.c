/*
** chan.c -- a FIFO channel of pointers between fibers (see parataxis.h).
**
** A ring buffer of `cap` values and two queues.  Parked senders carry their
** value in their waiter (w->value); a receiver is handed its value in its
** waiter before it wakes.  Two invariants keep the hand-offs simple:
**
**   - receivers wait only while the buffer is empty, so a send with a
**     receiver waiting gives the value straight to it;
**   - senders wait only while the buffer is full (always, for capacity 0),
**     so a receive that frees a slot refills it from the first sender.
**
** Capacity 0 is a rendezvous: a value passes only from a parked sender to a
** receiver or from a sender to a parked receiver, never through the ring.
**
** Waiters whose park a scope interrupted are skipped (px__waitq_first):
** an interrupted send has sent nothing and an interrupted receive has taken
** nothing.  A hand-off can still race an interrupt when it was made while the
** scheduler was not running (the wake then waits in the scheduler's inbox,
** behind a cancel).  Then, as for any grant, the fiber passes it on:
**
**   - a receiver hands its value to the next receiver, or puts it back at
**     the FRONT of the buffer: it was sent before anything buffered, so the
**     order is kept.  The ring has one slot beyond `cap` for this, and grows
**     should several such values come back at once (the only allocation
**     after px_chan_new; out of memory there, the value would be lost).
**   - a sender whose value a receiver took cannot take it back: the value is
**     out, and reporting a timeout would make the caller send it twice or
**     free it under the receiver.  Its send counts as done and returns 0.
*/
#include <errno.h>
#include <stdlib.h>

#include "sync/sync.h"
#include "sync/select.h"

enum chan_op { CHAN_SEND, CHAN_RECV };
enum { TAKEN = 1 };              /* w->n of a sender whose value was taken */

struct px_chan {
    void **ring;             /* the buffered values, oldest at ring[head] */
    size_t size;             /* slots in ring: cap + 1, or more (see above) */
    size_t head, len;
    size_t cap;              /* buffered values a send may leave */
    int closed;
    px__waitq senders;        /* parked in px_chan_send, FIFO */
    px__waitq receivers;      /* parked in px_chan_recv, FIFO; the ring is empty */
};

/* -- the ring ---------------------------------------------------------------- */

static void push_back(px_chan *ch, void *v)
{
    ch->ring[(ch->head + ch->len++) % ch->size] = v;
}

static void *pop_front(px_chan *ch)
{
    void *v = ch->ring[ch->head];
    ch->head = (ch->head + 1) % ch->size;
    ch->len--;
    return v;
}

/* Doubles the ring, oldest value first; 0 when out of memory. */
static int grow(px_chan *ch)
{
    if (ch->size > SIZE_MAX / 2 / sizeof(void *))
        return 0;
    void **ring = malloc(2 * ch->size * sizeof *ring);
    if (ring == NULL)
        return 0;
    for (size_t i = 0; i < ch->len; i++)
        ring[i] = ch->ring[(ch->head + i) % ch->size];
    free(ch->ring);
    ch->ring = ring;
    ch->size *= 2;
    ch->head = 0;
    return 1;
}

static void push_front(px_chan *ch, void *v)
{
    if (ch->len == ch->size && !grow(ch))
        return;                                  /* lost: see the top */
    ch->head = (ch->head + ch->size - 1) % ch->size;
    ch->ring[ch->head] = v;
    ch->len++;
}

/* -- moving values without waiting ------------------------------------------ */

/* Puts v in the channel: into the hands of the first receiver, or into the
** buffer.  1 done, 0 full, PX_ETHREAD when the receivers are another
** scheduler's (see px__waitq_elsewhere). */
static int offer(px_chan *ch, void *v)
{
    if (px__waitq_elsewhere(&ch->receivers))
        return PX_ETHREAD;
    px__waiter *r = px__waitq_first(&ch->receivers);
    if (r) {
        r->value = v;                            /* hand over ... */
        px__waitq_grant(r, 0);                   /* ... then wake */
        return 1;
    }
    if (ch->len < ch->cap) {
        push_back(ch, v);
        return 1;
    }
    return 0;
}

/* Takes the next value: the oldest buffered one (and the slot it frees goes
** to the first sender), else a parked sender's.  1 done, 0 empty,
** PX_ETHREAD when the senders are another scheduler's. */
static int take(px_chan *ch, void **v)
{
    if (px__waitq_elsewhere(&ch->senders))
        return PX_ETHREAD;
    px__waiter *s;
    if (ch->len > 0) {
        *v = pop_front(ch);
        if (ch->len < ch->cap && (s = px__waitq_first(&ch->senders)) != NULL) {
            push_back(ch, s->value);
            px__waitq_grant(s, 0);
        }
        return 1;
    }
    if ((s = px__waitq_first(&ch->senders)) == NULL)
        return 0;
    *v = s->value;
    px__waitq_grant(s, 0);
    return 1;
}

/* -- grants that raced an interrupt ------------------------------------------ */

static void recv_pass_on(px__waiter *w)
{
    px_chan *ch = (px_chan *)w->obj;
    if (w->result != 0)
        return;                                  /* PX_ECLOSED: nothing handed */
    px__waiter *r = px__waitq_first(&ch->receivers);
    if (r) {
        r->value = w->value;
        px__waitq_grant(r, 0);
    } else {
        push_front(ch, w->value);
    }
}

static void send_pass_on(px__waiter *w)
{
    if (w->result == 0)
        w->n = TAKEN;                            /* the value is out: sent */
}

static int send_outcome(const px__waiter *w, int r)
{
    if ((r == PX_ETIMEDOUT || r == PX_ECANCELED) && w->n == TAKEN)
        return 0;
    return r;
}

/* -- the operations ------------------------------------------------------------ */

px_chan *px_chan_new(size_t capacity)
{
    if (capacity >= SIZE_MAX / sizeof(void *)) {
        errno = EINVAL;
        return NULL;
    }
    px_chan *ch = calloc(1, sizeof *ch);
    if (ch == NULL)
        return NULL;                             /* errno is ENOMEM */
    ch->cap = capacity;
    ch->size = capacity + 1;
    ch->ring = malloc(ch->size * sizeof *ch->ring);
    if (ch->ring == NULL) {
        free(ch);
        errno = ENOMEM;
        return NULL;
    }
    px__waitq_init(&ch->senders);
    px__waitq_init(&ch->receivers);
    return ch;
}

int px_chan_send(px_chan *ch, void *v)
{
    px_fiber *f;
    int r;
    if (px__sync_enter(ch, CHAN_SEND, &f, &r))   /* NULL, off-fiber, a hosted re-call */
        return f ? send_outcome(px__waitq_own(f), r) : r;
    if (ch->closed)
        return PX_ECLOSED;
    if ((r = offer(ch, v)) != 0)
        return r == 1 ? 0 : r;                   /* else full: wait (or PX_ETHREAD) */
    px__waiter *w = px__waitq_begin(f, ch, CHAN_SEND, send_pass_on);
    w->value = v;                                /* for the receiver to take */
    static const px_park_info pi = { .reason = "Channel send", .kind = "channel" };
    return send_outcome(w, px__waitq_wait(&ch->senders, w, &pi));
}

int px_chan_recv(px_chan *ch, void **v)
{
    if (ch == NULL || v == NULL)
        return PX_EINVAL;
    px_fiber *f;
    int r;
    if (px__waitq_enter(ch, CHAN_RECV, &f, &r)) {   /* off-fiber, a hosted re-call */
        if (r == 0)
            *v = px__waitq_own(f)->value;
        return r;
    }
    if ((r = take(ch, v)) != 0)
        return r == 1 ? 0 : r;
    if (ch->closed)
        return PX_ECLOSED;
    px__waiter *w = px__waitq_begin(f, ch, CHAN_RECV, recv_pass_on);
    static const px_park_info pi = { .reason = "Channel recv", .kind = "channel" };
    r = px__waitq_wait(&ch->receivers, w, &pi);
    if (r == 0)
        *v = w->value;
    return r;
}

int px_chan_trysend(px_chan *ch, void *v)
{
    if (ch == NULL)
        return PX_EINVAL;
    if (ch->closed)
        return PX_ECLOSED;
    int r = offer(ch, v);
    return r == 1 ? 0 : r == 0 ? PX_EBUSY : r;
}

int px_chan_tryrecv(px_chan *ch, void **v)
{
    if (ch == NULL || v == NULL)
        return PX_EINVAL;
    int r = take(ch, v);
    if (r != 0)
        return r == 1 ? 0 : r;
    return ch->closed ? PX_ECLOSED : PX_EBUSY;
}

int px_chan_close(px_chan *ch)
{
    if (ch == NULL)
        return PX_EINVAL;
    if (ch->closed)
        return PX_ECLOSED;
    if (px__waitq_elsewhere(&ch->senders) || px__waitq_elsewhere(&ch->receivers))
        return PX_ETHREAD;                       /* would hand PX_ECLOSED over */
    ch->closed = 1;
    px__sync_grant_all(&ch->receivers, PX_ECLOSED);   /* the ring is empty */
    px__sync_grant_all(&ch->senders, PX_ECLOSED);     /* their values stay theirs */
    return 0;
}

int px__chan_case(px_chan *ch, int send, void *v, px__choice *c, size_t i)
{
    px__waiter *w = send ? px__waitq_case(c, i, ch, CHAN_SEND, send_pass_on)
                         : px__waitq_case(c, i, ch, CHAN_RECV, recv_pass_on);
    w->value = v;                                /* a send's, for the receiver */
    return px__waitq_case_join(send ? &ch->senders : &ch->receivers, w);
}

size_t px_chan_len(const px_chan *ch)
{
    return ch ? ch->len : 0;
}

size_t px_chan_cap(const px_chan *ch)
{
    return ch ? ch->cap : 0;
}

size_t px_chan_waiters(const px_chan *ch)
{
    return ch ? ch->senders.len + ch->receivers.len : 0;
}

int px_chan_free(px_chan *ch)
{
    if (ch == NULL)
        return 0;
    if (ch->senders.len != 0 || ch->receivers.len != 0)
        return PX_EBUSY;
    free(ch->ring);
    px__names_forget(ch);
    free(ch);
    return 0;
}
