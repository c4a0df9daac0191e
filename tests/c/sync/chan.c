/*
** chan.c -- the conformance specification of px_chan.
**
** Fibers synchronize on observable state (px_chan_len, the count of fibers
** that called an operation, a fiber's end), never on sleeps.  The timeouts
** are the ones under test; in the stress specs they only make the race
** wider -- what is checked holds whatever the timing.
*/
#include "sync_kit.h"

#define V(n) ((void *)(uintptr_t)(n))
#define N(p) ((uintptr_t)(p))

static px_chan *C;
static px_token *T;        /* each run's own (run_with_token); the raced specs make theirs */

static void run(size_t cap, px_fiber_fn main)
{
    C = px_chan_new(cap);
    CHECK(C != NULL);
    run_with_token(main, &T);
    CHECK_EQ(px_chan_free(C), 0);                /* nobody left queued */
}

/* A fiber runs until it parks: once `entered` counts it, it is parked (or
** done).  Results land in results[arg], received values in got[arg]. */
static int entered, results[8];
static void *got[8];

static void *sender(void *arg)
{
    entered++;
    results[N(arg) & 7] = px_chan_send(C, arg);
    return NULL;
}

static void *receiver(void *arg)
{
    entered++;
    results[N(arg)] = px_chan_recv(C, &got[N(arg)]);
    return NULL;
}

static int recv_body(void *arg) { return px_chan_recv(C, &got[N(arg)]); }
static int send_body(void *arg) { return px_chan_send(C, arg); }

/* -- order and capacity ---------------------------------------------------------- */

/* Five receivers queue on an unbuffered channel: each send goes to the one
** that came first.  Then five senders queue: each recv takes from the one
** that came first. */
static void *fifo_handoff_main(void *arg)
{
    (void)arg;
    px_fiber *f[5];
    entered = 0;
    for (uintptr_t i = 0; i < 5; i++) {
        f[i] = px_spawn(receiver, V(i));
        YIELD_UNTIL(entered == (int)i + 1);
    }
    for (uintptr_t i = 0; i < 5; i++)
        CHECK_EQ(px_chan_send(C, V(10 + i)), 0);  /* a receiver waits: no park */
    join_all(f, 5);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(results[i], 0);
        CHECK_EQ(N(got[i]), 10 + (uintptr_t)i);
    }
    entered = 0;
    for (uintptr_t i = 0; i < 5; i++) {
        f[i] = px_spawn(sender, V(20 + i));
        YIELD_UNTIL(entered == (int)i + 1);
    }
    for (uintptr_t i = 0; i < 5; i++) {
        void *v;
        CHECK_EQ(px_chan_tryrecv(C, &v), 0);
        CHECK_EQ(N(v), 20 + i);
    }
    join_all(f, 5);
    entered = 0;                                 /* as the other specs find it */
    return NULL;
}

SPEC(hands_off_in_fifo_order)
{
    run(0, fifo_handoff_main);
}

static void *fifo_main(void *arg)
{
    (void)arg;
    for (uintptr_t i = 1; i <= 4; i++)
        CHECK_EQ(px_chan_send(C, V(i)), 0);      /* buffered: no park */
    CHECK_EQ(px_chan_len(C), 4);
    for (uintptr_t i = 1; i <= 4; i++) {
        void *v;
        CHECK_EQ(px_chan_recv(C, &v), 0);
        CHECK_EQ(N(v), i);
    }
    CHECK_EQ(px_chan_len(C), 0);
    return NULL;
}

SPEC(values_come_out_in_the_order_they_went_in)
{
    run(4, fifo_main);
}

static void *full_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_chan_send(C, V(1)), 0);
    CHECK_EQ(px_chan_send(C, V(2)), 0);
    px_fiber *s = px_spawn(sender, V(3));        /* full: it parks */
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(px_chan_len(C), 2);
    void *v;
    CHECK_EQ(px_chan_recv(C, &v), 0);
    CHECK_EQ(N(v), 1);
    CHECK_EQ(px_chan_len(C), 2);                 /* the slot went to s's value */
    join(s);
    CHECK_EQ(results[3], 0);
    CHECK_EQ(px_chan_recv(C, &v), 0);
    CHECK_EQ(N(v), 2);
    CHECK_EQ(px_chan_recv(C, &v), 0);
    CHECK_EQ(N(v), 3);
    return NULL;
}

SPEC(buffered_send_parks_only_while_the_channel_is_full)
{
    run(2, full_main);
}

static void *rendezvous_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_chan_cap(C), 0);
    px_fiber *s = px_spawn(sender, V(5));
    YIELD_UNTIL(entered == 1);
    CHECK(results[5] == 0 && px_fiber_id(s) != 0);
    results[5] = 99;
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(results[5], 99);                    /* no receiver: still parked */
    void *v;
    CHECK_EQ(px_chan_recv(C, &v), 0);
    CHECK_EQ(N(v), 5);
    join(s);
    CHECK_EQ(results[5], 0);                     /* done once the value was taken */
    CHECK_EQ(px_chan_len(C), 0);
    return NULL;
}

SPEC(unbuffered_send_completes_only_when_a_receiver_takes_the_value)
{
    run(0, rendezvous_main);
}

static void *handoff_main(void *arg)
{
    (void)arg;
    px_fiber *r = px_spawn(receiver, V(0));
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(px_chan_send(C, V(7)), 0);          /* straight into r's hands */
    CHECK_EQ(px_chan_len(C), 0);
    CHECK_EQ(px_chan_trysend(C, V(8)), 0);       /* r no longer waits: buffered */
    CHECK_EQ(px_chan_len(C), 1);
    join(r);
    CHECK_EQ(results[0], 0);
    CHECK_EQ(N(got[0]), 7);
    void *v;
    CHECK_EQ(px_chan_recv(C, &v), 0);
    CHECK_EQ(N(v), 8);
    return NULL;
}

SPEC(recv_parks_until_a_value_is_handed_to_it)
{
    run(1, handoff_main);
}

static void *try_main(void *arg)
{
    (void)arg;
    void *v = V(42);
    CHECK_EQ(px_chan_tryrecv(C, &v), PX_EBUSY);
    CHECK_EQ(N(v), 42);                          /* untouched */
    if (px_chan_cap(C) == 0) {
        CHECK_EQ(px_chan_trysend(C, V(1)), PX_EBUSY);   /* nobody to take it */
        px_fiber *r = px_spawn(receiver, V(0));
        YIELD_UNTIL(entered == 1);
        CHECK_EQ(px_chan_trysend(C, V(1)), 0);   /* a parked receiver takes it */
        join(r);
        CHECK_EQ(N(got[0]), 1);
        px_fiber *s = px_spawn(sender, V(2));
        YIELD_UNTIL(entered == 2);
        CHECK_EQ(px_chan_tryrecv(C, &v), 0);     /* from a parked sender */
        CHECK_EQ(N(v), 2);
        join(s);
    } else {
        CHECK_EQ(px_chan_trysend(C, V(1)), 0);
        CHECK_EQ(px_chan_trysend(C, V(2)), PX_EBUSY);
        CHECK_EQ(px_chan_tryrecv(C, &v), 0);
        CHECK_EQ(N(v), 1);
    }
    return NULL;
}

SPEC(trysend_and_tryrecv_never_park_buffered_or_not)
{
    run(1, try_main);
    entered = 0;
    run(0, try_main);
}

/* -- close ------------------------------------------------------------------------- */

static void *drain_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_chan_send(C, V(1)), 0);
    CHECK_EQ(px_chan_send(C, V(2)), 0);
    CHECK_EQ(px_chan_close(C), 0);
    void *v;
    CHECK_EQ(px_chan_recv(C, &v), 0);
    CHECK_EQ(N(v), 1);
    CHECK_EQ(px_chan_tryrecv(C, &v), 0);
    CHECK_EQ(N(v), 2);
    CHECK_EQ(px_chan_recv(C, &v), PX_ECLOSED);
    CHECK_EQ(px_chan_tryrecv(C, &v), PX_ECLOSED);
    return NULL;
}

SPEC(close_lets_receivers_drain_the_buffer_then_gives_eclosed)
{
    run(4, drain_main);
}

static void *later_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_chan_close(C), 0);
    CHECK_EQ(px_chan_send(C, V(1)), PX_ECLOSED);
    CHECK_EQ(px_chan_trysend(C, V(1)), PX_ECLOSED);
    CHECK_EQ(px_chan_len(C), 0);
    CHECK_EQ(px_chan_close(C), PX_ECLOSED);      /* closing twice */
    return NULL;
}

SPEC(after_close_senders_and_a_second_close_get_eclosed)
{
    run(2, later_main);
}

static void *parked_receivers_main(void *arg)
{
    (void)arg;
    px_fiber *r[3];
    for (uintptr_t i = 0; i < 3; i++)
        CHECK((r[i] = px_spawn(receiver, V(i))) != NULL);
    YIELD_UNTIL(entered == 3);
    CHECK_EQ(px_chan_close(C), 0);
    for (int i = 0; i < 3; i++) {
        join(r[i]);
        CHECK_EQ(results[i], PX_ECLOSED);
    }
    return NULL;
}

SPEC(close_wakes_parked_receivers_with_eclosed)
{
    run(1, parked_receivers_main);
    entered = 0;
    run(0, parked_receivers_main);
}

static void *parked_senders_main(void *arg)
{
    (void)arg;
    size_t cap = px_chan_cap(C);
    for (size_t i = 0; i < cap; i++)
        CHECK_EQ(px_chan_send(C, V(100 + i)), 0);
    px_fiber *s[3];
    for (uintptr_t i = 0; i < 3; i++)
        CHECK((s[i] = px_spawn(sender, V(i))) != NULL);
    YIELD_UNTIL(entered == 3);
    CHECK_EQ(px_chan_close(C), 0);
    for (int i = 0; i < 3; i++) {
        join(s[i]);
        CHECK_EQ(results[i], PX_ECLOSED);
    }
    void *v;                                     /* only the buffered ones remain */
    for (size_t i = 0; i < cap; i++) {
        CHECK_EQ(px_chan_recv(C, &v), 0);
        CHECK_EQ(N(v), 100 + i);
    }
    CHECK_EQ(px_chan_recv(C, &v), PX_ECLOSED);
    return NULL;
}

SPEC(close_wakes_parked_senders_with_eclosed_and_their_values_unsent)
{
    run(1, parked_senders_main);
    entered = 0;
    run(0, parked_senders_main);
}

/* -- 4 producers x 4 consumers ------------------------------------------------------ */

enum { PRODUCERS = 4, CONSUMERS = 4, EACH = 2000 };

static unsigned char seen[PRODUCERS][EACH];
static int stress_timeouts;          /* bound each wait by a short timeout */
static long interrupted;
static uint64_t rng = 7;

static void maybe_yield(void)
{
    if (rng_next(&rng) % 3 == 0)
        CHECK_EQ(px_yield(), 0);
}

/* One operation, retried until it is done: with stress_timeouts each try is
** bounded by a few microseconds, so many of them are interrupted. */
static int bounded(px_scope_fn body, void *arg)
{
    for (;;) {
        int r = stress_timeouts ? px_with_timeout(PX_USEC(rng_next(&rng) % 20), body, arg)
                                : body(arg);
        if (r != PX_ETIMEDOUT)
            return r;
        interrupted++;
    }
}

static void *producer(void *arg)
{
    uintptr_t p = N(arg);
    for (uintptr_t i = 0; i < EACH; i++) {
        CHECK_EQ(bounded(send_body, V(p << 16 | i)), 0);
        maybe_yield();
    }
    return NULL;
}

static int recv_into(void *arg) { return px_chan_recv(C, arg); }

static void *consumer(void *arg)
{
    (void)arg;
    long last[PRODUCERS] = { -1, -1, -1, -1 };
    for (;;) {
        void *v;
        int r = bounded(recv_into, &v);
        if (r == PX_ECLOSED)
            return NULL;
        CHECK_EQ(r, 0);
        uintptr_t p = N(v) >> 16, i = N(v) & 0xffff;
        CHECK(p < PRODUCERS && i < EACH);
        CHECK_EQ(seen[p][i]++, 0);               /* never twice */
        CHECK((long)i > last[p]);                /* each producer's order kept */
        last[p] = (long)i;
        maybe_yield();
    }
}

static void *stress_main(void *arg)
{
    (void)arg;
    px_fiber *pf[PRODUCERS], *cf[CONSUMERS];
    spawn_all(cf, CONSUMERS, consumer, NULL);
    for (uintptr_t i = 0; i < PRODUCERS; i++)
        CHECK((pf[i] = px_spawn(producer, V(i))) != NULL);
    join_all(pf, PRODUCERS);
    CHECK_EQ(px_chan_close(C), 0);
    join_all(cf, CONSUMERS);
    for (int p = 0; p < PRODUCERS; p++)
        for (int i = 0; i < EACH; i++)
            CHECK_EQ(seen[p][i], 1);             /* never lost */
    return NULL;
}

SPEC(four_producers_four_consumers_lose_nothing_duplicate_nothing_keep_order)
{
    run(8, stress_main);
    memset(seen, 0, sizeof seen);
    run(1, stress_main);
    memset(seen, 0, sizeof seen);
    run(0, stress_main);
}

SPEC(interrupted_sends_and_recvs_under_4x4_lose_and_duplicate_nothing)
{
    stress_timeouts = 1;
    run(2, stress_main);
    memset(seen, 0, sizeof seen);
    run(0, stress_main);
    CHECK(interrupted > 0);                      /* the race was exercised */
}

/* -- interrupted waits ------------------------------------------------------------------ */

static void *timeout_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_with_timeout(PX_MSEC(5), recv_body, V(0)), PX_ETIMEDOUT);
    if (px_chan_cap(C) == 1)
        CHECK_EQ(px_chan_send(C, V(1)), 0);      /* fill it */
    CHECK_EQ(px_with_timeout(PX_MSEC(5), send_body, V(2)), PX_ETIMEDOUT);
    void *v;
    if (px_chan_cap(C) == 1) {
        CHECK_EQ(px_chan_tryrecv(C, &v), 0);
        CHECK_EQ(N(v), 1);
    }
    CHECK_EQ(px_chan_tryrecv(C, &v), PX_EBUSY);  /* 2 was never sent */
    return NULL;
}

SPEC(timed_out_send_sends_nothing_and_timed_out_recv_takes_nothing)
{
    run(1, timeout_main);
    run(0, timeout_main);
}

static cancel_call cancelled;      /* the wait a spec's scope interrupts */

/* cancelled, made ready for a recv into got[N(v)] or a send of v in a scope
** of T, counted in `entered`. */
static cancel_call *cancelled_call(px_scope_fn body, void *v)
{
    cancelled = (cancel_call){ .token = T, .body = body, .arg = v, .started = &entered };
    return &cancelled;
}

static void *recv_race_main(void *arg)
{
    (void)arg;
    px_fiber *c = px_spawn(cancellable, cancelled_call(recv_body, V(1)));
    px_fiber *r = px_spawn(receiver, V(0));
    YIELD_UNTIL(entered == 2);
    /* c is interrupted but has not run yet: the value sent now must not be
    ** handed to it, and goes to r. */
    CHECK_EQ(px_token_cancel(T), 1);
    CHECK_EQ(px_chan_send(C, V(9)), 0);
    join(c);
    join(r);
    CHECK_EQ(cancelled.result, PX_ECANCELED);
    CHECK(got[1] == NULL);
    CHECK_EQ(N(got[0]), 9);
    return NULL;
}

SPEC(cancelled_recv_racing_a_send_takes_nothing_and_the_value_goes_on)
{
    run(0, recv_race_main);
}

static void *send_race_main(void *arg)
{
    (void)arg;
    px_fiber *c = px_spawn(cancellable, cancelled_call(send_body, V(1)));
    px_fiber *s = px_spawn(sender, V(2));
    YIELD_UNTIL(entered == 2);
    /* c is interrupted but has not run yet: a receive now skips its value. */
    CHECK_EQ(px_token_cancel(T), 1);
    void *v;
    CHECK_EQ(px_chan_recv(C, &v), 0);
    CHECK_EQ(N(v), 2);
    join(c);
    join(s);
    CHECK_EQ(cancelled.result, PX_ECANCELED);       /* and 1 was not sent */
    CHECK_EQ(px_chan_tryrecv(C, &v), PX_EBUSY);
    return NULL;
}

SPEC(cancelled_send_racing_a_recv_sends_nothing)
{
    run(0, send_race_main);
}

/*
** Hand-offs that really race the interrupt: made off-fiber while the
** scheduler is not running, so the wake waits in its inbox behind a cancel
** posted first, and the cancelled fiber passes the grant on.
*/
static void quiet(void *ctx, const char *text) { (void)ctx; (void)text; }

static px_sched *idle_sched(px_fiber_fn a, void *aa, px_fiber_fn b, void *ba)
{
    px_sched_opts o = { .on_deadlock = quiet };
    px_sched *s = px_sched_new(&o);
    CHECK_EQ(px_sched_post(s, a, aa), 0);
    if (b)
        CHECK_EQ(px_sched_post(s, b, ba), 0);
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);       /* all parked, nothing pending */
    CHECK_EQ(px_token_cancel(T), 1);             /* posted: the scheduler is idle */
    return s;
}

SPEC(raced_recv_puts_its_value_back_at_the_front_of_the_buffer)
{
    T = px_token_new();
    C = px_chan_new(1);
    px_sched *s = idle_sched(cancellable, cancelled_call(recv_body, V(1)), NULL, NULL);
    CHECK_EQ(px_chan_trysend(C, V(1)), 0);       /* into the cancelled one's hands */
    CHECK_EQ(px_chan_trysend(C, V(2)), 0);       /* buffered behind it */
    CHECK_EQ(px_chan_len(C), 1);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(cancelled.result, PX_ECANCELED);
    void *v;
    CHECK_EQ(px_chan_tryrecv(C, &v), 0);
    CHECK_EQ(N(v), 1);                           /* first, as it was sent */
    CHECK_EQ(px_chan_tryrecv(C, &v), 0);
    CHECK_EQ(N(v), 2);
    CHECK_EQ(px_chan_tryrecv(C, &v), PX_EBUSY);
    px_sched_free(s);
    CHECK_EQ(px_chan_free(C), 0);
    px_token_free(T);
}

SPEC(raced_recv_hands_its_value_to_the_next_receiver)
{
    T = px_token_new();
    C = px_chan_new(0);
    entered = 0;
    px_sched *s = idle_sched(cancellable, cancelled_call(recv_body, V(1)), receiver, V(0));
    CHECK_EQ(px_chan_trysend(C, V(5)), 0);       /* to the cancelled one */
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(cancelled.result, PX_ECANCELED);
    CHECK_EQ(results[0], 0);
    CHECK_EQ(N(got[0]), 5);                      /* passed on */
    px_sched_free(s);
    CHECK_EQ(px_chan_free(C), 0);
    px_token_free(T);
}

SPEC(raced_send_whose_value_was_taken_counts_as_sent)
{
    T = px_token_new();
    C = px_chan_new(0);
    px_sched *s = idle_sched(cancellable, cancelled_call(send_body, V(3)), NULL, NULL);
    void *v;
    CHECK_EQ(px_chan_tryrecv(C, &v), 0);         /* taken from the cancelled sender */
    CHECK_EQ(N(v), 3);
    cancelled.result = 99;
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(cancelled.result, 0);                  /* it was sent: not a timeout */
    CHECK_EQ(px_chan_tryrecv(C, &v), PX_EBUSY);  /* and only once */
    px_sched_free(s);
    CHECK_EQ(px_chan_free(C), 0);
    px_token_free(T);
}

/* -- misuse ------------------------------------------------------------------------ */

SPEC(channel_arguments_are_checked)
{
    errno = 0;
    CHECK(px_chan_new(SIZE_MAX) == NULL);        /* a capacity no ring can hold */
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(px_chan_new(SIZE_MAX / 2 + 1) == NULL);
    CHECK_EQ(errno, EINVAL);
}

SPEC(try_forms_and_close_need_no_fiber_and_a_null_out_is_einval)
{
    px_chan *ch = px_chan_new(3);
    CHECK(ch != NULL);
    void *v;
    CHECK_EQ(px_chan_cap(ch), 3);
    CHECK_EQ(px_chan_trysend(ch, V(1)), 0);      /* try_* need no fiber */
    CHECK_EQ(px_chan_tryrecv(ch, &v), 0);
    CHECK_EQ(px_chan_recv(ch, NULL), PX_EINVAL);
    CHECK_EQ(px_chan_tryrecv(ch, NULL), PX_EINVAL);
    CHECK_EQ(px_chan_close(ch), 0);              /* needs no fiber */
    CHECK_EQ(px_chan_free(ch), 0);
}

SPECS(values_come_out_in_the_order_they_went_in,
      hands_off_in_fifo_order,
      buffered_send_parks_only_while_the_channel_is_full,
      unbuffered_send_completes_only_when_a_receiver_takes_the_value,
      recv_parks_until_a_value_is_handed_to_it,
      trysend_and_tryrecv_never_park_buffered_or_not,
      close_lets_receivers_drain_the_buffer_then_gives_eclosed,
      after_close_senders_and_a_second_close_get_eclosed,
      close_wakes_parked_receivers_with_eclosed,
      close_wakes_parked_senders_with_eclosed_and_their_values_unsent,
      four_producers_four_consumers_lose_nothing_duplicate_nothing_keep_order,
      interrupted_sends_and_recvs_under_4x4_lose_and_duplicate_nothing,
      timed_out_send_sends_nothing_and_timed_out_recv_takes_nothing,
      cancelled_recv_racing_a_send_takes_nothing_and_the_value_goes_on,
      cancelled_send_racing_a_recv_sends_nothing,
      raced_recv_puts_its_value_back_at_the_front_of_the_buffer,
      raced_recv_hands_its_value_to_the_next_receiver,
      raced_send_whose_value_was_taken_counts_as_sent,
      channel_arguments_are_checked,
      try_forms_and_close_need_no_fiber_and_a_null_out_is_einval)
