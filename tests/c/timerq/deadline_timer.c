/*
** deadline_timer -- px_timer, one spec per behaviour: a fresh timer's waits
** complete at once; expires_after aborts the pending waits and returns their
** count, px_timer_cancel aborts them and keeps the expiry; all waits of an
** expiry complete together with status 0; px_timer_free delivers PX_ECANCELED
** to the pending waits; bad input is refused.
*/
#include <stdatomic.h>

#include "../spec.h"

typedef struct waiter {
    int status, calls, seq;
    int64_t at;
} waiter;

static atomic_int seq;        /* order of every wait's call */
static px_latch completed;    /* set once per call */
static px_timerq *q;
static px_timer *t;
static waiter w[8];
static int total;             /* calls the waits made so far */

static void on_wait(void *arg, int status)
{
    waiter *wt = arg;
    wt->status = status;
    wt->calls++;
    wt->seq = atomic_fetch_add(&seq, 1);
    wt->at = px_now();
    ev_set(&completed);
}

static void wait_all(int n)
{
    for (int i = 0; i < n; i++) {
        w[i] = (waiter){ .calls = 0 };
        CHECK_EQ(px_timer_async_wait(t, on_wait, &w[i]), 0);
    }
}

static void check_all(int n, int status)
{
    for (int i = 0; i < n; i++) {
        CHECK_EQ(w[i].calls, 1);
        CHECK_EQ(w[i].status, status);
    }
}

static void setup(void)
{
    ev_init(&completed);
    q = px_timerq_new(NULL);
    CHECK(q != NULL);
}

static void teardown(void)
{
    px_timerq_free(q);
    CHECK_EQ(ev_count(&completed), total);   /* no call after its spec */
}

static void new_timer(void)
{
    t = px_timer_new(q);
    CHECK(t != NULL);
}

static void free_timer(void)
{
    px_timer_free(t);
    t = NULL;
}

SPEC(a_fresh_timer_has_expired_already)
{
    new_timer();
    CHECK(px_timer_expiry(t) <= px_now());
    wait_all(2);
    EV_WAIT(&completed, total += 2);
    check_all(2, 0);
    free_timer();
}

SPEC(timer_reset_and_cancel_abort_waits)
{
    new_timer();
    /* A new expiry aborts the pending waits and counts them. */
    CHECK_EQ(px_timer_expires_after(t, PX_SEC(10)), 0);
    wait_all(3);
    CHECK_EQ(px_timer_expires_after(t, PX_SEC(10)), 3);
    EV_WAIT(&completed, total += 3);
    check_all(3, PX_ECANCELED);

    /* Cancel aborts the waits and keeps the expiry. */
    CHECK_EQ(px_timer_expires_at(t, px_now() + PX_SEC(10)), 0);
    int64_t expiry = px_timer_expiry(t);
    wait_all(4);
    CHECK_EQ(px_timer_cancel(t), 4);
    EV_WAIT(&completed, total += 4);
    check_all(4, PX_ECANCELED);
    CHECK_EQ(px_timer_expiry(t), expiry);
    CHECK_EQ(px_timer_cancel(t), 0);
    free_timer();
}

SPEC(timer_waiters_fire_together)
{
    /* Every wait of one expiry completes in one go, none early. */
    new_timer();
    CHECK_EQ(px_timer_expires_after(t, PX_MSEC(20)), 0);
    int64_t expiry = px_timer_expiry(t);
    CHECK(expiry > 0);
    wait_all(8);
    EV_WAIT(&completed, total += 8);
    check_all(8, 0);
    for (int i = 0; i < 8; i++) {
        CHECK_GE(w[i].at, expiry);
        CHECK_EQ(w[i].seq, w[0].seq + i);   /* consecutive, in wait order */
    }
    free_timer();
}

SPEC(timer_free_aborts_its_waits)
{
    /* Waits after a cancel still wait for the kept expiry; free aborts them. */
    new_timer();
    CHECK_EQ(px_timer_expires_after(t, PX_SEC(10)), 0);
    CHECK_EQ(px_timer_cancel(t), 0);
    wait_all(5);
    CHECK_EQ(ev_count(&completed), total);
    free_timer();
    EV_WAIT(&completed, total += 5);
    check_all(5, PX_ECANCELED);
}

SPEC(timer_bad_input_is_refused)
{
    CHECK(px_timer_new(NULL) == NULL);
    CHECK_EQ(px_timer_expires_after(NULL, 0), PX_EINVAL);
    CHECK_EQ(px_timer_expires_at(NULL, 0), PX_EINVAL);
    CHECK_EQ(px_timer_expiry(NULL), PX_EINVAL);
    CHECK_EQ(px_timer_cancel(NULL), PX_EINVAL);
    CHECK_EQ(px_timer_async_wait(NULL, on_wait, NULL), PX_EINVAL);
    new_timer();
    CHECK_EQ(px_timer_expires_after(t, -1), PX_EINVAL);
    CHECK_EQ(px_timer_expires_at(t, -1), PX_EINVAL);
    CHECK_EQ(px_timer_async_wait(t, NULL, NULL), PX_EINVAL);
    free_timer();
    px_timer_free(NULL);
    CHECK_EQ(ev_count(&completed), total);
}

SPECS_AROUND(setup, teardown, a_fresh_timer_has_expired_already, timer_reset_and_cancel_abort_waits,
             timer_waiters_fire_together, timer_free_aborts_its_waits, timer_bad_input_is_refused)
