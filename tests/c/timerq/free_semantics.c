/*
** free_semantics -- px_timerq_free delivers PX_ECANCELED to every pending timer
** before it returns; called from a handler on the worker it returns at once and
** the remaining handlers are still delivered exactly once; free(NULL) is a no-op.
*/
#include <stdatomic.h>

#include "../spec.h"

#define N 200

typedef struct rec {
    atomic_int calls;
    atomic_int status;
} rec;

static rec recs[N];
static countdown last;         /* set by the N-th delivery */

static void on_timer(void *arg, int status)
{
    rec *r = arg;
    atomic_store(&r->status, status);
    atomic_fetch_add(&r->calls, 1);
    countdown_hit(&last);
}

static void reset(void)
{
    for (int i = 0; i < N; i++) {
        atomic_store(&recs[i].calls, 0);
        atomic_store(&recs[i].status, 1);
    }
    atomic_store(&last.count, 0);
}

static void check_all_once(int first_status)
{
    for (int i = 0; i < N; i++) {
        CHECK_EQ(atomic_load(&recs[i].calls), 1);
        CHECK_EQ(atomic_load(&recs[i].status), i == 0 ? first_status : PX_ECANCELED);
    }
}

SPEC(free_aborts_every_pending_timer_before_it_returns)
{
    reset();
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    for (int i = 0; i < N; i++)
        CHECK(px_timerq_add(q, PX_SEC(10) + i, on_timer, &recs[i]) != 0);
    CHECK_EQ(px_timerq_pending(q), N);
    px_timerq_free(q);
    check_all_once(PX_ECANCELED);   /* every call made before free returned */
}

/* recs[0] frees its own queue from the worker; the others are far timers. */
static px_timerq *self_q;
static atomic_int free_returned;

static void on_freer(void *arg, int status)
{
    px_timerq_free(self_q);
    atomic_store(&free_returned, 1);
    on_timer(arg, status);
}

SPEC(free_from_its_own_handler_returns_and_delivers_the_rest_once)
{
    reset();
    countdown_init(&last, N);
    self_q = px_timerq_new(NULL);
    CHECK(self_q != NULL);
    for (int i = 1; i < N; i++)
        CHECK(px_timerq_add(self_q, PX_SEC(10), on_timer, &recs[i]) != 0);
    CHECK(px_timerq_add(self_q, 0, on_freer, &recs[0]) != 0);
    EV_WAIT(&last.latch, 1);
    CHECK_EQ(atomic_load(&free_returned), 1);
    check_all_once(0);
}

SPEC(free_of_null_is_a_no_op)
{
    px_timerq_free(NULL);
}

SPECS(free_aborts_every_pending_timer_before_it_returns,
      free_from_its_own_handler_returns_and_delivers_the_rest_once, free_of_null_is_a_no_op)
