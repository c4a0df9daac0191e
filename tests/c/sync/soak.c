/*
** soak.c -- many fibers doing random operations on the locks, each wait bounded
** by a random timeout or interrupted by a random cancel, checking the
** invariants of mutual exclusion all along and, at the end, that no waiter is
** left queued and nothing is left held.  CI runs it under ASan+UBSan too.
**
** The run is deterministic for a seed (argument 2, default 1): a failure can be
** replayed with `sync_soak random_operations_keep_every_invariant <seed>`.
*/
#include "spec.h"

enum { FIBERS = 64, OPS = 400, MUTEXES = 3 };

static uint64_t rng_state = 1;

static uint64_t rnd(uint64_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state % n;
}

static px_mutex *mtx[MUTEXES];
static int inside[MUTEXES];          /* fibers inside each mutex: 0 or 1 */
static px_rwlock *rw;
static int readers_in, writers_in;   /* fibers inside the rwlock, by kind */
static px_token *tokens[FIBERS];
static long granted, interrupted;

/* Holds for a random while: yields, or a short sleep (which other fibers'
** timeouts and cancels then race). */
static void dwell(void)
{
    uint64_t k = rnd(4);
    if (k == 3) {
        /* The scope around the operation may fire during the hold. */
        int r = px_sleep(PX_USEC(rnd(200)));
        CHECK(r == 0 || r == PX_ETIMEDOUT || r == PX_ECANCELED);
    } else
        for (uint64_t i = 0; i < k; i++)
            CHECK_EQ(px_yield(), 0);
}

static int on_mutex(void *arg)
{
    int i = (int)(intptr_t)arg;
    int r = px_mutex_lock(mtx[i]);
    if (r != 0 && r != PX_EOWNERDEAD)
        return r;
    CHECK_EQ(px_mutex_owner(mtx[i]), px_self());
    CHECK_EQ(inside[i]++, 0);
    dwell();
    CHECK_EQ(--inside[i], 0);
    CHECK_EQ(px_mutex_unlock(mtx[i]), 0);
    return 0;
}

static int on_read(void *arg)
{
    (void)arg;
    int r = px_rwlock_rdlock(rw);
    if (r != 0 && r != PX_EOWNERDEAD)
        return r;
    CHECK_EQ(writers_in, 0);
    readers_in++;
    dwell();
    readers_in--;
    CHECK_EQ(px_rwlock_rdunlock(rw), 0);
    return 0;
}

static int on_write(void *arg)
{
    (void)arg;
    int r = px_rwlock_wrlock(rw);
    if (r != 0 && r != PX_EOWNERDEAD)
        return r;
    CHECK_EQ(readers_in, 0);
    CHECK_EQ(writers_in++, 0);
    CHECK_EQ(px_rwlock_writer(rw), px_self());
    dwell();
    writers_in--;
    CHECK_EQ(px_rwlock_wrunlock(rw), 0);
    return 0;
}

/* One operation, bounded by a timeout or by this fiber's token (which other
** fibers cancel at random), or not bounded at all. */
static void one_op(int me)
{
    px_scope_fn body;
    void *arg = NULL;
    switch (rnd(3)) {
    case 0:  body = on_mutex; arg = (void *)(intptr_t)rnd(MUTEXES); break;
    case 1:  body = on_read; break;
    default: body = on_write; break;
    }
    int r;
    switch (rnd(3)) {
    case 0:
        r = px_with_timeout(PX_USEC(rnd(300)), body, arg);
        break;
    case 1:
        if (px_token_cancelled(tokens[me])) {
            px_token_free(tokens[me]);
            CHECK((tokens[me] = px_token_new()) != NULL);
        }
        r = px_with_cancel(tokens[me], body, arg);
        break;
    default:
        r = body(arg);
        break;
    }
    CHECK(r == 0 || r == PX_ETIMEDOUT || r == PX_ECANCELED);
    if (r == 0)
        granted++;
    else
        interrupted++;
    if (rnd(8) == 0)
        px_token_cancel(tokens[rnd(FIBERS)]);
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    for (int i = 0; i < OPS; i++)
        one_op(me);
    return NULL;
}

static void *soak_main(void *arg)
{
    (void)arg;
    px_fiber *f[FIBERS];
    for (int i = 0; i < FIBERS; i++)
        CHECK((f[i] = px_spawn(worker, (void *)(intptr_t)i)) != NULL);
    for (int i = 0; i < FIBERS; i++) {
        CHECK_EQ(px_join(f[i], NULL), 0);
        px_fiber_release(f[i]);
    }
    return NULL;
}

static uint64_t seed = 1;

SPEC(random_operations_keep_every_invariant)
{
    rng_state = seed * 0x9E3779B97F4A7C15ull | 1;
    for (int i = 0; i < MUTEXES; i++)
        CHECK((mtx[i] = px_mutex_new()) != NULL);
    CHECK((rw = px_rwlock_new()) != NULL);
    for (int i = 0; i < FIBERS; i++)
        CHECK((tokens[i] = px_token_new()) != NULL);
    CHECK_EQ(px_run(soak_main, NULL, NULL), 0);
    for (int i = 0; i < MUTEXES; i++) {
        CHECK_EQ(px_mutex_owner(mtx[i]), 0);
        CHECK_EQ(px_mutex_waiters(mtx[i]), 0);
        CHECK_EQ(px_mutex_free(mtx[i]), 0);
    }
    CHECK_EQ(px_rwlock_readers(rw), 0);
    CHECK_EQ(px_rwlock_writer(rw), 0);
    CHECK_EQ(px_rwlock_waiters(rw), 0);
    CHECK_EQ(px_rwlock_free(rw), 0);
    for (int i = 0; i < FIBERS; i++)
        px_token_free(tokens[i]);
    CHECK_EQ(granted + interrupted, (long)FIBERS * OPS);
    CHECK(granted > 0 && interrupted > 0);   /* both paths were exercised */
    printf("soak seed %llu: %ld granted, %ld interrupted\n",
           (unsigned long long)seed, granted, interrupted);
}

/* The table's main runs the spec; ours reads the seed first. */
int spec_table_main(int argc, char **argv);
#define main spec_table_main
SPECS(random_operations_keep_every_invariant)
#undef main

int main(int argc, char **argv)
{
    if (argc > 2)
        seed = strtoull(argv[2], NULL, 10);
    return spec_table_main(argc < 2 ? 1 : 2, argv);
}
