/*
** soak.c -- many fibers doing random operations on mutexes, an rwlock, a
** semaphore and a channel, each wait bounded by a random timeout or
** interrupted by a random cancel, checking the invariants all along (mutual
** exclusion, reader/writer exclusion, the semaphore's bound) and at the end
** that nothing is held or queued and that every value sent was received
** exactly once.  CI runs it under ASan+UBSan and TSan too.
**
** The seed (argument 2, default 1) fixes the choices; which waits time out
** depends on the clock as well, so a rerun explores nearby interleavings:
** `sync_soak random_operations_keep_every_invariant <seed>`.
*/
#include "sync_kit.h"

enum { FIBERS = 64, OPS = 400, MUTEXES = 3, SEM_UNITS = 2, CHAN_CAP = 4 };

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
static px_sem *sem;
static int sem_in;                   /* fibers holding a unit: at most SEM_UNITS */
static px_chan *ch;
static unsigned char sent[FIBERS * OPS + 1], received[FIBERS * OPS + 1];
static uintptr_t next_value = 1;
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

static int on_sem(void *arg)
{
    (void)arg;
    int r = px_sem_acquire(sem);
    if (r != 0)
        return r;
    CHECK(++sem_in <= SEM_UNITS);
    dwell();
    sem_in--;
    CHECK_EQ(px_sem_release(sem), 0);
    return 0;
}

/* Every value is sent at most once and must be received exactly once if its
** send returned 0 (checked at the end, after the channel is drained). */
static int on_send(void *arg)
{
    (void)arg;
    uintptr_t v = next_value++;
    int r = px_chan_send(ch, (void *)v);
    if (r == 0)
        sent[v] = 1;
    return r;
}

static int on_recv(void *arg)
{
    (void)arg;
    void *v;
    int r = px_chan_recv(ch, &v);
    if (r == 0) {
        uintptr_t i = (uintptr_t)v;
        CHECK(i > 0 && i < next_value);
        CHECK_EQ(received[i]++, 0);
    }
    return r;
}

/* One operation, bounded by a timeout or by this fiber's token (which other
** fibers cancel at random), or not bounded at all. */
static void one_op(int me)
{
    px_scope_fn body;
    void *arg = NULL;
    int bounded = 0;   /* a channel wait may have no partner left: always bound it */
    switch (rnd(6)) {
    case 0:  body = on_mutex; arg = (void *)(intptr_t)rnd(MUTEXES); break;
    case 1:  body = on_read; break;
    case 2:  body = on_write; break;
    case 3:  body = on_sem; break;
    case 4:  body = on_send; bounded = 1; break;
    default: body = on_recv; bounded = 1; break;
    }
    int r;
    switch (bounded ? 0 : rnd(3)) {
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
    spawn_numbered(f, FIBERS, worker);
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
    CHECK((sem = px_sem_new(SEM_UNITS)) != NULL);
    CHECK((ch = px_chan_new(CHAN_CAP)) != NULL);
    for (int i = 0; i < FIBERS; i++)
        CHECK((tokens[i] = px_token_new()) != NULL);
    CHECK_EQ(px_run(soak_main, NULL, NULL), 0);
    for (int i = 0; i < MUTEXES; i++) {
        CHECK_EQ(px_mutex_owner(mtx[i]), 0);
        CHECK_EQ(px_mutex_waiters(mtx[i]), 0);
        CHECK_EQ(px_mutex_free(mtx[i]), 0);
    }
    check_rwlock_unheld(rw);
    CHECK_EQ(px_rwlock_waiters(rw), 0);
    CHECK_EQ(px_rwlock_free(rw), 0);
    CHECK_EQ(px_sem_value(sem), SEM_UNITS);
    CHECK_EQ(px_sem_waiters(sem), 0);
    CHECK_EQ(px_sem_free(sem), 0);
    void *v;
    while (px_chan_tryrecv(ch, &v) == 0)
        CHECK_EQ(received[(uintptr_t)v]++, 0);
    for (uintptr_t i = 1; i < next_value; i++)
        CHECK_EQ(received[i], sent[i]);     /* nothing lost, nothing made up */
    CHECK_EQ(px_chan_free(ch), 0);
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
