/*
** periodic_ticks -- a periodic timer's ticks never overlap, missed ticks coalesce
** into one and keep the original phase, and a cancel (even during a tick, where it
** returns 1) leads to exactly one final PX_ECANCELED call after the tick.
*/
#include <stdatomic.h>

#include "../spec.h"

#define P        PX_MSEC(250)   /* period of the phase test */
#define LATE_MAX PX_MSEC(100)   /* how late a tick may start on a noisy VM */
#define TICKS    7
#define LONG_TICK 2             /* this tick sleeps 1.6 periods */

typedef struct ticker {
    atomic_int in_handler;      /* set while a call runs: overlap detector */
    int overlaps;
    int ticks, finals, after_final;
    int64_t at[64];             /* start time of each tick */
    px_latch tick, final;
} ticker;

static void enter(ticker *t)
{
    if (atomic_exchange(&t->in_handler, 1) != 0)
        t->overlaps++;
}

static void on_phase(void *arg, int status)
{
    ticker *t = arg;
    enter(t);
    if (t->finals)
        t->after_final++;
    if (status == PX_ECANCELED) {
        t->finals++;
    } else {
        if (t->ticks < 64)
            t->at[t->ticks] = px_now();
        if (t->ticks++ == LONG_TICK)
            sleep_ns(P + P * 6 / 10);   /* outlast the period: tick 3 is missed */
    }
    atomic_store(&t->in_handler, 0);
    ev_set(status == PX_ECANCELED ? &t->final : &t->tick);
}

static void test_phase(px_timerq *q)
{
    static ticker t;
    ev_init(&t.tick);
    ev_init(&t.final);
    int64_t base = px_now() + P;   /* <= the true first deadline */
    uint64_t id = px_timerq_add_periodic(q, P, P, on_phase, &t);
    CHECK(id != 0);
    EV_WAIT(&t.tick, TICKS);
    CHECK_EQ(px_timerq_cancel(q, id), 1);
    EV_WAIT(&t.final, 1);
    int ticks = t.ticks;
    sleep_ns(3 * P);   /* negative check: no tick may follow the final call */
    CHECK_EQ(t.ticks, ticks);
    CHECK_EQ(t.finals, 1);
    CHECK_EQ(t.after_final, 0);
    CHECK_EQ(t.overlaps, 0);
    CHECK_EQ(px_timerq_cancel(q, id), 0);

    int64_t prev_k = -1;
    for (int i = 0; i < ticks && i < 64; i++) {
        int64_t k = (t.at[i] - base) / P, off = (t.at[i] - base) % P;
        CHECK_GE(t.at[i] - base, 0);          /* never early */
        CHECK(k > prev_k);
        if (off >= LATE_MAX)                 /* off phase: restarted, or a catch-up burst */
            fprintf(stderr, "tick %d starts %" PRId64 " ns after its phase\n", i, off);
        CHECK(off < LATE_MAX);
        if (i == LONG_TICK + 1)
            CHECK_GE(k, LONG_TICK + 2);      /* the missed tick was skipped */
        prev_k = k;
    }
}

/* -- cancel during a tick -------------------------------------------------- */

typedef struct blocker {
    atomic_int in_tick;
    int ticks, finals, final_overlapped;
    px_latch started, go, final;
} blocker;

static void on_block(void *arg, int status)
{
    blocker *b = arg;
    if (status == PX_ECANCELED) {
        if (atomic_load(&b->in_tick))
            b->final_overlapped++;
        b->finals++;
        ev_set(&b->final);
        return;
    }
    atomic_store(&b->in_tick, 1);
    if (++b->ticks == 3) {
        ev_set(&b->started);
        EV_WAIT(&b->go, 1);
    }
    atomic_store(&b->in_tick, 0);
}

static void test_cancel_in_tick(px_timerq *q)
{
    static blocker b;
    ev_init(&b.started);
    ev_init(&b.go);
    ev_init(&b.final);
    uint64_t id = px_timerq_add_periodic(q, 0, PX_MSEC(5), on_block, &b);
    CHECK(id != 0);
    EV_WAIT(&b.started, 1);
    CHECK_EQ(px_timerq_cancel(q, id), 1);   /* wins while the tick runs */
    CHECK_EQ(px_timerq_cancel(q, id), 0);   /* already cancelled */
    CHECK_EQ(ev_count(&b.final), 0);        /* the final call waits for the tick */
    ev_set(&b.go);
    EV_WAIT(&b.final, 1);
    sleep_ns(PX_MSEC(50));                  /* negative check: nothing follows */
    CHECK_EQ(b.finals, 1);
    CHECK_EQ(b.final_overlapped, 0);
    CHECK_EQ(b.ticks, 3);
}

/* -- ticks, a cancel, one final call ------------------------------------- */

static void on_plain(void *arg, int status)
{
    ticker *t = arg;
    enter(t);
    if (t->finals)
        t->after_final++;
    if (status == PX_ECANCELED)
        t->finals++;
    else
        t->ticks++;
    atomic_store(&t->in_handler, 0);
    ev_set(status == PX_ECANCELED ? &t->final : &t->tick);
}

SPEC(periodic_ticks_then_one_final_call)
{
    static ticker t;
    ev_init(&t.tick);
    ev_init(&t.final);
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    uint64_t id = px_timerq_add_periodic(q, PX_MSEC(1), PX_MSEC(5), on_plain, &t);
    CHECK(id != 0);
    EV_WAIT(&t.tick, 3);
    CHECK_EQ(px_timerq_cancel(q, id), 1);
    EV_WAIT(&t.final, 1);
    int ticks = t.ticks;
    sleep_ns(PX_MSEC(30));                  /* negative check: would show an extra tick */
    CHECK_EQ(t.ticks, ticks);
    CHECK_GE(ticks, 3);
    CHECK_EQ(t.finals, 1);
    CHECK_EQ(t.after_final, 0);
    CHECK_EQ(t.overlaps, 0);
    CHECK_EQ(px_timerq_cancel(q, id), 0);
    px_timerq_free(q);
    CHECK_EQ(t.finals, 1);
}

/* -- a fast periodic timer under px_timerq_free ----------------------------- */

SPEC(free_ends_periodic)
{
    static ticker t;
    ev_init(&t.tick);
    ev_init(&t.final);
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    CHECK(px_timerq_add_periodic(q, 0, PX_USEC(200), on_phase, &t) != 0);
    EV_WAIT(&t.tick, 5);
    px_timerq_free(q);
    CHECK_EQ(t.finals, 1);
    CHECK_EQ(t.after_final, 0);
    CHECK_EQ(t.overlaps, 0);
}

SPEC(ticks_keep_their_phase)
{
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    test_phase(q);
    px_timerq_free(q);
}

SPEC(a_tick_may_cancel_its_timer)
{
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    test_cancel_in_tick(q);
    px_timerq_free(q);
}

SPECS(ticks_keep_their_phase, a_tick_may_cancel_its_timer, free_ends_periodic,
      periodic_ticks_then_one_final_call)
