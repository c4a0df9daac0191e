/*
** never_early -- no handler runs before its deadline: px_now() in the handler is
** >= px_now() before px_timerq_add + delay, or >= the px_timerq_add_at deadline.
*/
#include <stdatomic.h>

#include "../check.h"

#define N 4000

typedef struct item {
    int64_t deadline;   /* a lower bound of the true deadline */
    int64_t ran_at;
    int status;
} item;

static item items[N];
static countdown all_done;     /* set by the N-th call */

static void on_timer(void *arg, int status)
{
    item *it = arg;
    it->ran_at = px_now();
    it->status = status;
    countdown_hit(&all_done);
}

int main(void)
{
    uint64_t rng = 42;
    countdown_init(&all_done, N);
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    for (int i = 0; i < N; i++) {
        item *it = &items[i];
        int64_t delay = (int64_t)(rng_next(&rng) % (uint64_t)PX_MSEC(30));
        switch (i % 4) {
        case 0:   /* relative */
            it->deadline = px_now() + delay;
            CHECK(px_timerq_add(q, delay, on_timer, it) != 0);
            break;
        case 1:   /* absolute */
            it->deadline = px_now() + delay;
            CHECK(px_timerq_add_at(q, it->deadline, on_timer, it) != 0);
            break;
        case 2:   /* sub-tick delays: where a coarse wheel would round down */
            delay %= PX_USEC(200);
            it->deadline = px_now() + delay;
            CHECK(px_timerq_add(q, delay, on_timer, it) != 0);
            break;
        default:  /* in the past: fires at once */
            it->deadline = px_now() - delay;
            CHECK(px_timerq_add_at(q, it->deadline < 0 ? 0 : it->deadline, on_timer, it) != 0);
            break;
        }
        if (i % 500 == 0)
            sleep_ns(PX_MSEC(2));   /* spread the adds over the wheel's ticks */
    }
    EV_WAIT(&all_done.latch, 1);
    px_timerq_free(q);
    int64_t worst = INT64_MAX;
    for (int i = 0; i < N; i++) {
        CHECK_EQ(items[i].status, 0);
        CHECK_GE(items[i].ran_at, items[i].deadline);
        if (items[i].ran_at - items[i].deadline < worst)
            worst = items[i].ran_at - items[i].deadline;
    }
    printf("ok: %d timers, smallest margin %" PRId64 " ns\n", N, worst);
    return 0;
}
