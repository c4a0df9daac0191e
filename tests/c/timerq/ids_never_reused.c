/*
** ids_never_reused -- across many add/fire and add/cancel cycles that recycle the
** same records, no id repeats and a stale id never cancels the timer that now
** holds its record.
*/
#include <stdatomic.h>

#include "../check.h"

#define ROUNDS 40
#define PER    500

static atomic_int calls;
static px_latch round_done;

static void on_timer(void *arg, int status)
{
    (void)arg; (void)status;
    if (atomic_fetch_add(&calls, 1) % PER == PER - 1)
        ev_set(&round_done);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    static uint64_t ids[ROUNDS * PER];
    ev_init(&round_done);
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t *cur = &ids[r * PER];
        int fire = r % 2 == 0;
        for (int i = 0; i < PER; i++) {
            cur[i] = px_timerq_add(q, fire ? 0 : PX_SEC(30), on_timer, NULL);
            CHECK(cur[i] != 0);
        }
        if (!fire) {
            /* The old ids point at records these timers reuse: they must miss. */
            for (int i = 0; i < r * PER; i++)
                CHECK_EQ(px_timerq_cancel(q, ids[i]), 0);
            CHECK_EQ(px_timerq_pending(q), PER);
            CHECK_EQ(px_timerq_cancel_all(q), PER);
        }
        EV_WAIT(&round_done, r + 1);
    }
    px_timerq_free(q);
    CHECK_EQ(atomic_load(&calls), ROUNDS * PER);
    qsort(ids, ROUNDS * PER, sizeof ids[0], cmp_u64);
    for (int i = 1; i < ROUNDS * PER; i++)
        CHECK(ids[i] != ids[i - 1]);
    puts("ok");
    return 0;
}
