/*
** reentrant_handlers -- a handler may call the queue that runs it: add timers,
** cancel others (1) and itself (0), cancel_all (counting only the others) and
** pending; and cancelling a timer whose handler runs returns 0.
*/
#include <stdatomic.h>

#include "../spec.h"

static px_timerq *q;

/* -- a chain of timers, each added by the previous handler ----------------- */

#define CHAIN 50
static int chain_depth;
static px_latch chain_done;

static void on_chain(void *arg, int status)
{
    (void)arg;
    CHECK_EQ(status, 0);
    if (++chain_depth == CHAIN) {
        ev_set(&chain_done);
        return;
    }
    CHECK(px_timerq_add(q, PX_USEC(chain_depth % 3 * 100), on_chain, NULL) != 0);
}

SPEC(a_handler_adds_a_chain_of_timers)
{
    ev_init(&chain_done);
    CHECK(px_timerq_add(q, 0, on_chain, NULL) != 0);
    EV_WAIT(&chain_done, 1);
    CHECK_EQ(chain_depth, CHAIN);
}

/* -- a handler cancels another timer, and one it just added ---------------- */

typedef struct call {
    px_latch ev;
    int status;
    int calls;
} call;

static void on_record(void *arg, int status)
{
    call *c = arg;
    c->status = status;
    c->calls++;
    ev_set(&c->ev);
}

static call victim, fresh, canceller;
static uint64_t victim_id;
static int cancel_rc, fresh_rc;

static void on_canceller(void *arg, int status)
{
    (void)arg;
    cancel_rc = px_timerq_cancel(q, victim_id);
    uint64_t id = px_timerq_add(q, PX_SEC(10), on_record, &fresh);
    CHECK(id != 0);
    fresh_rc = px_timerq_cancel(q, id);
    on_record(&canceller, status);
}

SPEC(a_handler_cancels_another_timer)
{
    ev_init(&victim.ev);
    ev_init(&fresh.ev);
    ev_init(&canceller.ev);
    victim_id = px_timerq_add(q, PX_SEC(10), on_record, &victim);
    CHECK(victim_id != 0);
    CHECK(px_timerq_add(q, 0, on_canceller, NULL) != 0);
    EV_WAIT(&canceller.ev, 1);
    EV_WAIT(&victim.ev, 1);
    EV_WAIT(&fresh.ev, 1);
    CHECK_EQ(cancel_rc, 1);
    CHECK_EQ(fresh_rc, 1);
    CHECK_EQ(canceller.status, 0);
    CHECK_EQ(victim.status, PX_ECANCELED);
    CHECK_EQ(fresh.status, PX_ECANCELED);
    CHECK_EQ(victim.calls + fresh.calls + canceller.calls, 3);
    CHECK_EQ(px_timerq_cancel(q, victim_id), 0);   /* already cancelled */
}

/* -- a one-shot handler cancels itself: 0, and it is not called again ------ */

typedef struct self {
    px_latch id_known, done;
    atomic_uint_fast64_t id;
    int rc, calls, status;
} self;

static void on_self(void *arg, int status)
{
    self *s = arg;
    EV_WAIT(&s->id_known, 1);
    s->rc = px_timerq_cancel(q, atomic_load(&s->id));
    s->status = status;
    s->calls++;
    ev_set(&s->done);
}

SPEC(a_handler_cancels_itself)
{
    static self s;
    ev_init(&s.id_known);
    ev_init(&s.done);
    uint64_t id = px_timerq_add(q, 0, on_self, &s);
    CHECK(id != 0);
    atomic_store(&s.id, id);
    ev_set(&s.id_known);
    EV_WAIT(&s.done, 1);
    CHECK_EQ(s.rc, 0);
    CHECK_EQ(s.status, 0);
    /* A second call would arrive on the worker before this marker handler. */
    call marker = { .calls = 0 };
    ev_init(&marker.ev);
    CHECK(px_timerq_add(q, 0, on_record, &marker) != 0);
    EV_WAIT(&marker.ev, 1);
    CHECK_EQ(s.calls, 1);
}

/* -- a handler calls pending and cancel_all -------------------------------- */

static call far[3], sweeper;
static size_t seen_pending, seen_cancelled;

static void on_sweeper(void *arg, int status)
{
    (void)arg;
    seen_pending = px_timerq_pending(q);
    seen_cancelled = px_timerq_cancel_all(q);
    on_record(&sweeper, status);
}

SPEC(cancel_all_inside_a_handler_counts_the_others)
{
    CHECK_EQ(px_timerq_pending(q), 0);
    for (int i = 0; i < 3; i++) {
        ev_init(&far[i].ev);
        CHECK(px_timerq_add(q, PX_SEC(10 + i), on_record, &far[i]) != 0);
    }
    CHECK_EQ(px_timerq_pending(q), 3);
    ev_init(&sweeper.ev);
    CHECK(px_timerq_add(q, 0, on_sweeper, NULL) != 0);
    EV_WAIT(&sweeper.ev, 1);
    for (int i = 0; i < 3; i++) {
        EV_WAIT(&far[i].ev, 1);
        CHECK_EQ(far[i].status, PX_ECANCELED);
        CHECK_EQ(far[i].calls, 1);
    }
    CHECK_EQ(seen_pending, 3);     /* the running sweeper is not pending */
    CHECK_EQ(seen_cancelled, 3);   /* ... nor cancelled: it has started */
    CHECK_EQ(sweeper.status, 0);
    CHECK_EQ(px_timerq_pending(q), 0);
}

/* -- cancelling a running one-shot timer from another thread returns 0 ---- */

static px_latch running, go;
static call blocker;

static void on_blocker(void *arg, int status)
{
    (void)arg;
    ev_set(&running);
    EV_WAIT(&go, 1);
    on_record(&blocker, status);
}

SPEC(cancelling_a_running_handler_returns_0)
{
    ev_init(&running);
    ev_init(&go);
    ev_init(&blocker.ev);
    uint64_t id = px_timerq_add(q, 0, on_blocker, NULL);
    CHECK(id != 0);
    EV_WAIT(&running, 1);
    CHECK_EQ(px_timerq_cancel(q, id), 0);
    CHECK_EQ(px_timerq_cancel_all(q), 0);
    ev_set(&go);
    EV_WAIT(&blocker.ev, 1);
    CHECK_EQ(blocker.status, 0);
    CHECK_EQ(blocker.calls, 1);
    px_timerq_free(q);                       /* and the blocker is not called again */
    q = NULL;
    CHECK_EQ(blocker.calls, 1);
}

static void make_queue(void)
{
    q = px_timerq_new(NULL);
    CHECK(q != NULL);
}

static void free_queue(void)
{
    px_timerq_free(q);
}

SPECS_AROUND(make_queue, free_queue, a_handler_adds_a_chain_of_timers,
             a_handler_cancels_another_timer, a_handler_cancels_itself,
             cancel_all_inside_a_handler_counts_the_others,
             cancelling_a_running_handler_returns_0)
