/*
** never_early -- no handler runs before its deadline: px_now() in the handler is
** >= px_now() before px_timerq_add + delay, or >= the px_timerq_add_at deadline;
** each is called once, with status 0.  One spec per way of giving the deadline.
*/
#include <stdatomic.h>

#include "../spec.h"

#define N 1000

typedef struct item {
    int64_t deadline;   /* a lower bound of the true deadline */
    int64_t ran_at;
    atomic_int calls;
    int status;
} item;

static item items[N];
static countdown all_done;     /* set by the N-th call */

static void on_timer(void *arg, int status)
{
    item *it = arg;
    it->ran_at = px_now();
    it->status = status;
    atomic_fetch_add(&it->calls, 1);
    countdown_hit(&all_done);
}

enum how { RELATIVE, ABSOLUTE, SUB_TICK, PAST };

/* N timers of random delays under 30 ms, given as `how` says; each runs once,
** with 0, not before its deadline. */
static void check_never_early(enum how how, uint64_t seed)
{
    uint64_t rng = seed;
    countdown_init(&all_done, N);
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    for (int i = 0; i < N; i++) {
        item *it = &items[i];
        atomic_store(&it->calls, 0);
        int64_t delay = (int64_t)(rng_next(&rng) % (uint64_t)PX_MSEC(30));
        switch (how) {
        case RELATIVE:
            it->deadline = px_now() + delay;
            CHECK(px_timerq_add(q, delay, on_timer, it) != 0);
            break;
        case ABSOLUTE:
            it->deadline = px_now() + delay;
            CHECK(px_timerq_add_at(q, it->deadline, on_timer, it) != 0);
            break;
        case SUB_TICK:   /* where a coarse wheel would round down */
            delay %= PX_USEC(200);
            it->deadline = px_now() + delay;
            CHECK(px_timerq_add(q, delay, on_timer, it) != 0);
            break;
        case PAST:       /* fires at once */
            it->deadline = px_now() - delay;
            CHECK(px_timerq_add_at(q, it->deadline < 0 ? 0 : it->deadline, on_timer, it) != 0);
            break;
        }
        if (i % 125 == 0)
            sleep_ns(PX_MSEC(2));   /* spread the adds over the wheel's ticks */
    }
    EV_WAIT(&all_done.latch, 1);
    px_timerq_free(q);
    int64_t worst = INT64_MAX;
    for (int i = 0; i < N; i++) {
        CHECK_EQ(atomic_load(&items[i].calls), 1);
        CHECK_EQ(items[i].status, 0);
        CHECK_GE(items[i].ran_at, items[i].deadline);
        if (items[i].ran_at - items[i].deadline < worst)
            worst = items[i].ran_at - items[i].deadline;
    }
    printf("%d timers, smallest margin %" PRId64 " ns\n", N, worst);
}

SPEC(one_shot_fires_once_not_early)
{
    check_never_early(RELATIVE, 42);
}

SPEC(add_at_never_fires_early)
{
    check_never_early(ABSOLUTE, 43);
}

SPEC(sub_tick_delays_never_fire_early)
{
    check_never_early(SUB_TICK, 44);
}

SPEC(a_deadline_in_the_past_fires_at_once)
{
    check_never_early(PAST, 45);
}

SPECS(one_shot_fires_once_not_early, add_at_never_fires_early, sub_tick_delays_never_fire_early,
      a_deadline_in_the_past_fires_at_once)
