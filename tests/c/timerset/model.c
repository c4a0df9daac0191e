/*
** timerset_model -- the internal ordered set against a reference model on a
** virtual clock: deterministic randomized sequences of insert, remove, clock
** moves, bounded and unbounded expire and take_all, with past, near, far (hours)
** and huge (INT64_MAX/2, near INT64_MAX) deadlines.
*/
#include <stdint.h>

#include "tset_model.h"

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* A burst of due nodes taken a few at a time: the timer queue's batch pattern. */
static void test_bounded_batches(void)
{
    static px__tnode n[700];
    px__tset s;
    int64_t now = 5000000000LL;
    px__tset_init(&s, now);
    for (int i = 0; i < 700; i++) {
        n[i].deadline = now + (i % 50) * 3000 + (i % 3) * 70000;   /* spans a few ticks */
        px__tset_insert(&s, &n[i]);
    }
    now += 1000000;
    size_t total = 0;
    for (int round = 0; total < 700; round++) {
        MODEL_CHECK(round < 100);
        size_t k = 0;
        for (px__tnode *x = px__tset_expire(&s, now, 256); x; x = px__tset_after(x))
            k++;
        MODEL_CHECK(k <= 256);
        MODEL_CHECK(k == (700 - total < 256 ? 700 - total : 256));
        total += k;
    }
    MODEL_CHECK(s.count == 0);
    px__tset_destroy(&s);
}

int main(void)
{
    static uint8_t buf[8192];
    uint64_t seed = 1;
    test_bounded_batches();
    for (int r = 0; r < 400; r++) {
        size_t len = 64 + (size_t)(rng(&seed) % (sizeof buf - 64));
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)rng(&seed);
        model_run(buf, len);
    }
    puts("ok: 400 sequences");
    return 0;
}
