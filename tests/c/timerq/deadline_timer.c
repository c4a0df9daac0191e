/*
** deadline_timer -- px_timer: a fresh timer's waits complete at once; all waits of
** an expiry complete together with status 0; expires_after aborts the pending
** waits and returns their count; px_timer_cancel aborts them and keeps the
** expiry; px_timer_free delivers PX_ECANCELED to the pending waits.
*/
#include <stdatomic.h>

#include "../check.h"

typedef struct waiter {
    int status, calls, seq;
    int64_t at;
} waiter;

static atomic_int seq;        /* order of every wait's call */
static px_latch completed;    /* set once per call */

static void on_wait(void *arg, int status)
{
    waiter *w = arg;
    w->status = status;
    w->calls++;
    w->seq = atomic_fetch_add(&seq, 1);
    w->at = px_now();
    ev_set(&completed);
}

static void wait_all(px_timer *t, waiter *w, int n)
{
    for (int i = 0; i < n; i++) {
        w[i] = (waiter){ .calls = 0 };
        CHECK_EQ(px_timer_async_wait(t, on_wait, &w[i]), 0);
    }
}

static void check_all(const waiter *w, int n, int status)
{
    for (int i = 0; i < n; i++) {
        CHECK_EQ(w[i].calls, 1);
        CHECK_EQ(w[i].status, status);
    }
}

int main(void)
{
    waiter w[8];
    int total = 0;
    ev_init(&completed);
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    px_timer *t = px_timer_new(q);
    CHECK(t != NULL);

    /* A fresh timer has expired already. */
    CHECK(px_timer_expiry(t) <= px_now());
    wait_all(t, w, 2);
    EV_WAIT(&completed, total += 2);
    check_all(w, 2, 0);

    /* A new expiry aborts the pending waits and counts them. */
    CHECK_EQ(px_timer_expires_after(t, PX_SEC(10)), 0);
    wait_all(t, w, 3);
    CHECK_EQ(px_timer_expires_after(t, PX_MSEC(20)), 3);
    EV_WAIT(&completed, total += 3);
    check_all(w, 3, PX_ECANCELED);

    /* Every wait of one expiry completes in one go, none early. */
    int64_t expiry = px_timer_expiry(t);
    CHECK(expiry > 0);
    wait_all(t, w, 8);
    EV_WAIT(&completed, total += 8);
    check_all(w, 8, 0);
    for (int i = 0; i < 8; i++) {
        CHECK_GE(w[i].at, expiry);
        CHECK_EQ(w[i].seq, w[0].seq + i);   /* consecutive, in wait order */
    }

    /* Cancel aborts the waits and keeps the expiry. */
    CHECK_EQ(px_timer_expires_at(t, px_now() + PX_SEC(10)), 0);
    expiry = px_timer_expiry(t);
    wait_all(t, w, 4);
    CHECK_EQ(px_timer_cancel(t), 4);
    EV_WAIT(&completed, total += 4);
    check_all(w, 4, PX_ECANCELED);
    CHECK_EQ(px_timer_expiry(t), expiry);
    CHECK_EQ(px_timer_cancel(t), 0);

    /* Waits after a cancel still wait for the kept expiry; free aborts them. */
    wait_all(t, w, 5);
    CHECK_EQ(ev_count(&completed), total);
    px_timer_free(t);
    EV_WAIT(&completed, total += 5);
    check_all(w, 5, PX_ECANCELED);

    /* Bad input. */
    CHECK(px_timer_new(NULL) == NULL);
    CHECK_EQ(px_timer_expires_after(NULL, 0), PX_EINVAL);
    CHECK_EQ(px_timer_expires_at(NULL, 0), PX_EINVAL);
    CHECK_EQ(px_timer_expiry(NULL), PX_EINVAL);
    CHECK_EQ(px_timer_cancel(NULL), PX_EINVAL);
    CHECK_EQ(px_timer_async_wait(NULL, on_wait, NULL), PX_EINVAL);
    t = px_timer_new(q);
    CHECK(t != NULL);
    CHECK_EQ(px_timer_expires_after(t, -1), PX_EINVAL);
    CHECK_EQ(px_timer_expires_at(t, -1), PX_EINVAL);
    CHECK_EQ(px_timer_async_wait(t, NULL, NULL), PX_EINVAL);
    px_timer_free(t);
    px_timer_free(NULL);

    px_timerq_free(q);
    CHECK_EQ(ev_count(&completed), total);
    puts("ok");
    return 0;
}
