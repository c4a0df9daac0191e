/*
** basics -- the plain life of one-shot timers on the default worker: a cancel
** before the deadline wins once and brings one PX_ECANCELED call; cancel_all
** aborts every pending timer; due timers run in deadline order.
*/
#include <stdatomic.h>

#include "../spec.h"

static px_timerq *q;
static status_latch called;

static void on_timer(void *arg, int status)
{
    (void)arg;
    status_latch_set(&called, status);
}

SPEC(cancel_before_expiry)
{
    uint64_t id = px_timerq_add(q, PX_SEC(60), on_timer, NULL);
    CHECK(id != 0);
    CHECK_EQ(px_timerq_pending(q), 1);
    CHECK_EQ(px_timerq_cancel(q, id), 1);
    EV_WAIT(&called.latch, 1);
    CHECK_EQ(called.status, PX_ECANCELED);
    CHECK_EQ(px_timerq_cancel(q, id), 0);      /* the second cancel finds nothing */
    CHECK_EQ(px_timerq_pending(q), 0);
    CHECK_EQ(ev_count(&called.latch), 1);
}

enum { ALL = 100 };
static atomic_int aborted, expired;
static countdown all_called;

static void on_counted(void *arg, int status)
{
    (void)arg;
    atomic_fetch_add(status == PX_ECANCELED ? &aborted : &expired, 1);
    countdown_hit(&all_called);
}

SPEC(cancel_all_aborts_every_pending_timer)
{
    countdown_init(&all_called, ALL);
    for (int i = 0; i < ALL; i++)
        CHECK(px_timerq_add(q, PX_SEC(60), on_counted, NULL) != 0);
    CHECK_EQ(px_timerq_pending(q), ALL);
    CHECK_EQ(px_timerq_cancel_all(q), ALL);
    CHECK_EQ(px_timerq_pending(q), 0);
    EV_WAIT(&all_called.latch, 1);
    CHECK_EQ(atomic_load(&aborted), ALL);
    CHECK_EQ(atomic_load(&expired), 0);
    CHECK_EQ(px_timerq_cancel_all(q), 0);
}

static int order[3], n_order;
static px_latch ordered;

static void on_ordered(void *arg, int status)
{
    CHECK_EQ(status, 0);
    order[n_order++] = (int)(intptr_t)arg;   /* one worker: no race */
    ev_set(&ordered);
}

SPEC(fires_in_deadline_order)
{
    static const int ms[3] = { 30, 10, 20 };
    ev_init(&ordered);
    for (int i = 0; i < 3; i++)
        CHECK(px_timerq_add(q, PX_MSEC(ms[i]), on_ordered, (void *)(intptr_t)ms[i]) != 0);
    EV_WAIT(&ordered, 3);
    CHECK_EQ(order[0], 10);
    CHECK_EQ(order[1], 20);
    CHECK_EQ(order[2], 30);
}

static void make_queue(void)
{
    status_latch_init(&called);
    q = px_timerq_new(NULL);
    CHECK(q != NULL);
}

static void free_queue(void)
{
    px_timerq_free(q);
}

SPECS_AROUND(make_queue, free_queue, cancel_before_expiry, cancel_all_aborts_every_pending_timer,
             fires_in_deadline_order)
