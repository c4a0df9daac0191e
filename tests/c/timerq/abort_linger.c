/*
** abort_linger -- px_timerq_opts.abort_linger_ns lets the worker gather the
** aborted calls of a burst of cancels, and loses none: with the default (0 and a
** negative value) and with a longer linger, every cancel that won is followed by
** exactly one PX_ECANCELED call on the worker, also a cancel made after the
** worker went back to sleep, and nothing is called after px_timerq_free.
** One behaviour (the bindings check it with the linger their queues use:
** Lua the default, Python 1 ms).
*/
#include "../spec.h"

enum { N = 200 };

static void burst(px_timerq *q, call_rec *c, int n, int base)
{
    uint64_t id[N];
    for (int i = 0; i < n; i++)
        CHECK((id[i] = px_timerq_add(q, PX_SEC(10), record_call, &c[i])) != 0);
    for (int i = 0; i < n; i++)
        CHECK_EQ(px_timerq_cancel(q, id[i]), 1);
    EV_WAIT(&calls_made, base + n);
}

static void run(int64_t linger_ns)
{
    static call_rec c[N + 1];
    for (int i = 0; i <= N; i++)
        c[i] = (call_rec){ 0, 1, pthread_self() };
    px_timerq_opts o = { .abort_linger_ns = linger_ns };
    px_timerq *q = px_timerq_new(&o);
    CHECK(q != NULL);
    int base = ev_count(&calls_made);
    burst(q, c, N, base);
    burst(q, c + N, 1, base + N);          /* one more, after the burst was delivered */
    px_timerq_free(q);
    CHECK_EQ(ev_count(&calls_made), base + N + 1);
    for (int i = 0; i <= N; i++) {
        CHECK_EQ(c[i].calls, 1);
        CHECK_EQ(c[i].status, PX_ECANCELED);
        CHECK(!pthread_equal(c[i].thread, pthread_self()));
    }
}

SPEC(a_burst_of_cancels_is_delivered_aborted_once_each)
{
    run(0);                  /* the default, 50 us */
    run(-1);                 /* also the default */
    run(PX_MSEC(2));
}

static void setup(void)
{
    ev_init(&calls_made);
}

SPECS_AROUND(setup, NULL, a_burst_of_cancels_is_delivered_aborted_once_each)
