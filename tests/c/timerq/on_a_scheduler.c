/*
** on_a_scheduler -- a timer queue whose executor is a scheduler
** (px_sched_executor): each handler call is a new fiber of that run, which a
** hold per owed call keeps alive until the call has started.  Periodic ticks
** and the final PX_ECANCELED call are fibers (a tick may yield); a timer of
** "never" never fires there either, and its cancel's call comes as a fiber.
*/
#include "../spec.h"

static px_sched *s;
static px_timerq *q;

static void new_run(void)
{
    s = px_sched_new(NULL);
    CHECK(s != NULL);
    px_executor ex = px_sched_executor(s);
    px_timerq_opts o = { .executor = &ex };
    q = px_timerq_new(&o);
    CHECK(q != NULL);
}

static void end_run(void)
{
    px_timerq_free(q);                        /* s must outlive the queue */
    px_sched_free(s);
}

/* -- periodic ticks and the final call --------------------------------------- */

static int ticks;
static uint64_t final_fiber;
static px_event *three;

static void on_tick(void *arg, int status)
{
    (void)arg;
    CHECK(px_self() != 0);
    if (status == PX_ECANCELED) {
        final_fiber = px_self();
        CHECK_EQ(px_sched_unhold(s), 0);     /* the hold of the timer's last call */
        return;
    }
    ticks++;
    CHECK_EQ(px_yield(), 0);                 /* a handler may wait */
    if (ticks == 3)
        CHECK(px_event_set(three) >= 0);
}

static void *periodic_main(void *arg)
{
    (void)arg;
    three = px_event_new();
    CHECK(three != NULL);
    CHECK_EQ(px_sched_hold(s), 0);
    uint64_t id = px_timerq_add_periodic(q, PX_MSEC(5), PX_MSEC(5), on_tick, NULL);
    CHECK(id != 0);
    CHECK_EQ(px_event_wait(three), 0);
    CHECK_EQ(px_timerq_cancel(q, id), 1);
    return NULL;                             /* the run is held until the final call ran */
}

SPEC(periodic_ticks_and_the_final_aborted_call_are_fibers)
{
    new_run();
    CHECK_EQ(px_sched_post(s, periodic_main, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK(ticks >= 3);
    CHECK(final_fiber != 0);
    CHECK_EQ(px_event_free(three), 0);
    end_run();
}

/* -- a timer of "never" ------------------------------------------------------ */

static int seen, seen_aborted;

static void on_never(void *arg, int status)
{
    (void)arg;
    CHECK(px_self() != 0);
    seen++;
    seen_aborted += status == PX_ECANCELED;
    CHECK_EQ(px_sched_unhold(s), 0);
}

static void *never_main(void *arg)
{
    (void)arg;
    uint64_t id[2];
    for (int i = 0; i < 2; i++)
        CHECK_EQ(px_sched_hold(s), 0);       /* one per owed call */
    id[0] = px_timerq_add(q, INT64_MAX, on_never, NULL);
    id[1] = px_timerq_add(q, INT64_MAX - px_now() + 1, on_never, NULL);   /* past the clock's end */
    CHECK(id[0] != 0 && id[1] != 0);
    CHECK_EQ(px_sleep(PX_MSEC(50)), 0);
    CHECK_EQ(seen, 0);
    CHECK_EQ(px_timerq_pending(q), 2);
    for (int i = 0; i < 2; i++)
        CHECK_EQ(px_timerq_cancel(q, id[i]), 1);
    return NULL;
}

SPEC(a_timer_of_2_63_ns_or_more_never_fires_and_is_cancellable)
{
    new_run();
    CHECK_EQ(px_sched_post(s, never_main, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(seen, 2);
    CHECK_EQ(seen_aborted, 2);
    end_run();
}

SPECS(periodic_ticks_and_the_final_aborted_call_are_fibers,
      a_timer_of_2_63_ns_or_more_never_fires_and_is_cancellable)
