/*
** cancel_wake -- a cancel without the lock still gets its PX_ECANCELED call
** delivered while the queue lives, not only once px_timerq_free drains it:
**
**   - single cancels issued at scattered moments around the worker's decision
**     to sleep (after it delivered the previous abort and lingered): each call
**     comes, none waits for a free that never comes in the loop;
**   - bursts of cancels from three threads at once, more than the ring holds,
**     each id cancelled by two threads: one wins, pending is exact once every
**     cancel has returned, and every call comes while the queue lives;
**   - on an executor (a px_queue drained by another thread): periodic timers
**     cancelled from a thread while they tick, one-shot timers cancelled from
**     the handlers on the executor; one final call each, no tick after it, a
**     won cancel means a PX_ECANCELED call;
**   - on the worker: periodic timers of a few microseconds re-armed while two
**     threads cancel them, a third calls cancel_all and the ticks cancel one
**     another: each is won once (cancel or cancel_all), ends with one final
**     call and ticks no more after it.
**
** Every wait is on an event with a generous timeout: a lost wake-up shows as a
** timeout (the queue's only other timer is an hour away).
*/
#include <stdatomic.h>

#include "../spec.h"

enum { SINGLE_ROUNDS = 3000, BURST = 3000, BURST_ROUNDS = 20, CANCELLERS = 3 };
enum { PERIODIC = 200, ONESHOT = 4000 };

static const int64_t WAIT = PX_SEC(20);

/* -- single cancels around the worker's sleep ---------------------------- */

static atomic_int single_calls, single_aborted;
static px_latch single_done;

static void single_call(void *arg, int status)
{
    (void)arg;
    atomic_fetch_add(&single_calls, 1);
    if (status == PX_ECANCELED)
        atomic_fetch_add(&single_aborted, 1);
    ev_set(&single_done);
}

static void nop(void *arg, int status)
{
    (void)arg;
    (void)status;
}

SPEC(single_cancels_around_the_sleep)
{
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    ev_init(&single_done);
    CHECK(px_timerq_add(q, PX_SEC(3600), nop, NULL) != 0);   /* the worker has a far deadline */
    uint64_t rng = 42;
    for (int i = 0; i < SINGLE_ROUNDS; i++) {
        uint64_t id = px_timerq_add(q, PX_SEC(3600), single_call, NULL);
        CHECK(id != 0);
        /* Jitter (not synchronization): the cancel lands before, during or
        ** after the worker's 50 us linger and its going deaf. */
        uint64_t r = rng_next(&rng) % 4;
        if (r)
            sleep_ns((int64_t)(rng_next(&rng) % (uint64_t)PX_USEC(40 * r)));
        CHECK_EQ(px_timerq_cancel(q, id), 1);
        CHECK_EQ(px_timerq_pending(q), 1);
        if (!ev_wait_n_ns(&single_done, i + 1, WAIT)) {
            fprintf(stderr, "round %d: the PX_ECANCELED call did not come in 20 s\n", i);
            CHECK(0);
        }
    }
    CHECK_EQ(atomic_load(&single_calls), SINGLE_ROUNDS);
    CHECK_EQ(atomic_load(&single_aborted), SINGLE_ROUNDS);
    px_timerq_free(q);
    CHECK_EQ(atomic_load(&single_calls), SINGLE_ROUNDS);
    ev_destroy(&single_done);
}

/* -- bursts of cancels from three threads --------------------------------- */

static px_timerq *burst_q;
static uint64_t burst_id[BURST];
static atomic_int burst_calls[BURST], burst_aborted[BURST], burst_wins[BURST];
static px_latch burst_go, burst_done;

static void burst_call(void *arg, int status)
{
    size_t i = (size_t)(uintptr_t)arg;
    atomic_fetch_add(&burst_calls[i], 1);
    if (status == PX_ECANCELED)
        atomic_fetch_add(&burst_aborted[i], 1);
    ev_set(&burst_done);
}

static void *burst_canceller(void *arg)
{
    size_t t = (size_t)(uintptr_t)arg;
    CHECK(ev_wait_n_ns(&burst_go, 1, WAIT));
    /* Thread t takes ids i with i % 3 == t and i % 3 == t + 1: two threads per id. */
    for (size_t k = 0; k < BURST; k++) {
        size_t i = (k * 7919 + t * 1013) % BURST;
        if (i % CANCELLERS != t && i % CANCELLERS != (t + 1) % CANCELLERS)
            continue;
        int rc = px_timerq_cancel(burst_q, burst_id[i]);
        CHECK(rc == 0 || rc == 1);
        atomic_fetch_add(&burst_wins[i], rc);
    }
    return NULL;
}

SPEC(bursts_from_three_threads)
{
    burst_q = px_timerq_new(NULL);
    CHECK(burst_q != NULL);
    CHECK(px_timerq_add(burst_q, PX_SEC(3600), nop, NULL) != 0);
    ev_init(&burst_done);
    for (int round = 0; round < BURST_ROUNDS; round++) {
        ev_init(&burst_go);
        for (size_t i = 0; i < BURST; i++) {
            atomic_store(&burst_calls[i], 0);
            atomic_store(&burst_aborted[i], 0);
            atomic_store(&burst_wins[i], 0);
            CHECK((burst_id[i] = px_timerq_add(burst_q, PX_SEC(3600), burst_call, (void *)(uintptr_t)i)) != 0);
        }
        CHECK_EQ(px_timerq_pending(burst_q), BURST + 1);
        pthread_t th[CANCELLERS];
        for (uintptr_t t = 0; t < CANCELLERS; t++)
            CHECK(pthread_create(&th[t], NULL, burst_canceller, (void *)t) == 0);
        ev_set(&burst_go);
        for (int t = 0; t < CANCELLERS; t++)
            CHECK(pthread_join(th[t], NULL) == 0);
        CHECK_EQ(px_timerq_pending(burst_q), 1);   /* every cancel has returned */
        if (!ev_wait_n_ns(&burst_done, (round + 1) * BURST, WAIT)) {
            fprintf(stderr, "round %d: %d of %d calls came in 20 s\n", round,
                    ev_count(&burst_done) - round * BURST, BURST);
            CHECK(0);
        }
        for (size_t i = 0; i < BURST; i++) {
            CHECK_EQ(atomic_load(&burst_wins[i]), 1);
            CHECK_EQ(atomic_load(&burst_calls[i]), 1);
            CHECK_EQ(atomic_load(&burst_aborted[i]), 1);
        }
        ev_destroy(&burst_go);
    }
    px_timerq_free(burst_q);
    ev_destroy(&burst_done);
}

/* -- on an executor: periodic ticks and cancels from handlers -------------- */

typedef struct tick_rec {
    atomic_int ticks, finals, ticks_after_final, wins;
    atomic_uint_fast64_t id;
} tick_rec;

typedef struct shot_rec {
    atomic_int calls, aborted, wins;
    atomic_uint_fast64_t id;
} shot_rec;

static px_timerq *exec_q;
static px_queue *exec_pq;
static atomic_int drain_stop;
static tick_rec ticks[PERIODIC];
static shot_rec shots[ONESHOT];
static countdown finals_done, shots_done;

static void on_tick(void *arg, int status)
{
    tick_rec *t = arg;
    if (status == PX_ECANCELED) {
        atomic_fetch_add(&t->finals, 1);
        countdown_hit(&finals_done);
        return;
    }
    if (atomic_load(&t->finals) != 0)
        atomic_fetch_add(&t->ticks_after_final, 1);
    atomic_fetch_add(&t->ticks, 1);
}

static void on_shot(void *arg, int status)
{
    shot_rec *s = arg;
    size_t me = (size_t)(s - shots);
    atomic_fetch_add(&s->calls, 1);
    if (status == PX_ECANCELED) {
        atomic_fetch_add(&s->aborted, 1);
    } else {
        /* Cancel a few later shots from the handler, on the executor's thread. */
        for (size_t k = 1; k <= 3; k++) {
            shot_rec *o = &shots[(me + k * 37) % ONESHOT];
            uint64_t id = atomic_load(&o->id);
            if (id != 0 && px_timerq_cancel(exec_q, id) == 1)
                atomic_fetch_add(&o->wins, 1);
        }
    }
    countdown_hit(&shots_done);
}

static void *drainer(void *arg)
{
    (void)arg;
    while (!atomic_load(&drain_stop)) {
        px_queue_wait(exec_pq, PX_MSEC(5));
        px_queue_drain(exec_pq, 0);
    }
    return NULL;
}

static void *tick_canceller(void *arg)
{
    (void)arg;
    uint64_t rng = 7;
    for (int i = 0; i < PERIODIC; i++) {
        tick_rec *t = &ticks[i];
        /* Let some tick first (spin on the count), or not. */
        if (rng_next(&rng) % 2) {
            int64_t until = px_now() + PX_SEC(20);
            while (atomic_load(&t->ticks) == 0 && px_now() < until)
                ;
        }
        int rc = px_timerq_cancel(exec_q, atomic_load(&t->id));
        CHECK(rc == 0 || rc == 1);
        atomic_fetch_add(&t->wins, rc);
    }
    return NULL;
}

SPEC(executor_ticks_and_handler_cancels)
{
    exec_pq = px_queue_new();
    CHECK(exec_pq != NULL);
    px_executor ex = px_queue_executor(exec_pq);
    px_timerq_opts o = { .executor = &ex };
    exec_q = px_timerq_new(&o);
    CHECK(exec_q != NULL);
    countdown_init(&finals_done, PERIODIC);
    countdown_init(&shots_done, ONESHOT);
    pthread_t drain_th, cancel_th;
    CHECK(pthread_create(&drain_th, NULL, drainer, NULL) == 0);
    for (int i = 0; i < PERIODIC; i++) {
        uint64_t id = px_timerq_add_periodic(exec_q, PX_USEC(10 * (i % 7)), PX_USEC(20 + i % 13), on_tick, &ticks[i]);
        CHECK(id != 0);
        atomic_store(&ticks[i].id, id);
    }
    for (int i = 0; i < ONESHOT; i++) {
        uint64_t id = px_timerq_add(exec_q, PX_USEC(i % 3000), on_shot, &shots[i]);
        CHECK(id != 0);
        atomic_store(&shots[i].id, id);
    }
    CHECK(pthread_create(&cancel_th, NULL, tick_canceller, NULL) == 0);
    CHECK(pthread_join(cancel_th, NULL) == 0);
    if (!ev_wait_n_ns(&finals_done.latch, 1, WAIT)) {
        fprintf(stderr, "%d of %d periodic final calls came in 20 s\n", atomic_load(&finals_done.count),
                PERIODIC);
        CHECK(0);
    }
    if (!ev_wait_n_ns(&shots_done.latch, 1, WAIT)) {
        fprintf(stderr, "%d of %d one-shot calls came in 20 s\n", atomic_load(&shots_done.count), ONESHOT);
        CHECK(0);
    }
    CHECK_EQ(px_timerq_pending(exec_q), 0);
    px_timerq_free(exec_q);
    atomic_store(&drain_stop, 1);
    CHECK(pthread_join(drain_th, NULL) == 0);
    while (px_queue_drain(exec_pq, 0) > 0)
        ;
    px_queue_free(exec_pq);
    for (int i = 0; i < PERIODIC; i++) {
        CHECK_EQ(atomic_load(&ticks[i].wins), 1);
        CHECK_EQ(atomic_load(&ticks[i].finals), 1);
        CHECK_EQ(atomic_load(&ticks[i].ticks_after_final), 0);
    }
    for (int i = 0; i < ONESHOT; i++) {
        CHECK_EQ(atomic_load(&shots[i].calls), 1);
        CHECK(atomic_load(&shots[i].wins) <= 1);
        CHECK_EQ(atomic_load(&shots[i].aborted), atomic_load(&shots[i].wins));
    }
}

/* -- on the worker: periodic re-arms against cancels and cancel_all -------- */

enum { STORM_PERIODIC = 500 };

static px_timerq *storm_q;
static tick_rec storm[STORM_PERIODIC];
static atomic_size_t storm_all_wins;
static countdown storm_finals;
static px_latch storm_go;

static void on_storm_tick(void *arg, int status)
{
    tick_rec *t = arg;
    if (status == PX_ECANCELED) {
        atomic_fetch_add(&t->finals, 1);
        countdown_hit(&storm_finals);
        return;
    }
    if (atomic_load(&t->finals) != 0)
        atomic_fetch_add(&t->ticks_after_final, 1);
    int n = atomic_fetch_add(&t->ticks, 1);
    if (n == 20) {   /* a tick cancels another timer, from the worker */
        tick_rec *o = &storm[((size_t)(t - storm) * 101 + 7) % STORM_PERIODIC];
        if (px_timerq_cancel(storm_q, atomic_load(&o->id)) == 1)
            atomic_fetch_add(&o->wins, 1);
    }
}

static void *storm_canceller(void *arg)
{
    size_t t = (size_t)(uintptr_t)arg;
    CHECK(ev_wait_n_ns(&storm_go, 1, WAIT));
    for (size_t k = 0; k < STORM_PERIODIC; k++) {
        tick_rec *r = &storm[(k * 331 + t * 97) % STORM_PERIODIC];
        if (k % 8 == 0)
            sleep_ns(PX_USEC(30));   /* pace: let ticks run between cancels */
        int rc = px_timerq_cancel(storm_q, atomic_load(&r->id));
        CHECK(rc == 0 || rc == 1);
        atomic_fetch_add(&r->wins, rc);
    }
    return NULL;
}

static void *storm_cancel_all(void *arg)
{
    (void)arg;
    CHECK(ev_wait_n_ns(&storm_go, 1, WAIT));
    for (int i = 0; i < 20; i++) {
        sleep_ns(PX_USEC(200));
        atomic_fetch_add(&storm_all_wins, px_timerq_cancel_all(storm_q));
    }
    return NULL;
}

SPEC(periodic_rearm_against_cancels)
{
    storm_q = px_timerq_new(NULL);
    CHECK(storm_q != NULL);
    CHECK(px_timerq_add(storm_q, PX_SEC(3600), nop, NULL) != 0);
    countdown_init(&storm_finals, STORM_PERIODIC);
    ev_init(&storm_go);
    for (int i = 0; i < STORM_PERIODIC; i++) {
        uint64_t id = px_timerq_add_periodic(storm_q, PX_USEC(i % 50), PX_USEC(2 + i % 5), on_storm_tick, &storm[i]);
        CHECK(id != 0);
        atomic_store(&storm[i].id, id);
    }
    pthread_t th[3];
    CHECK(pthread_create(&th[0], NULL, storm_canceller, (void *)(uintptr_t)0) == 0);
    CHECK(pthread_create(&th[1], NULL, storm_canceller, (void *)(uintptr_t)1) == 0);
    CHECK(pthread_create(&th[2], NULL, storm_cancel_all, NULL) == 0);
    ev_set(&storm_go);
    for (int i = 0; i < 3; i++)
        CHECK(pthread_join(th[i], NULL) == 0);
    atomic_fetch_add(&storm_all_wins, px_timerq_cancel_all(storm_q));   /* whatever is left */
    if (!ev_wait_n_ns(&storm_finals.latch, 1, WAIT)) {
        fprintf(stderr, "%d of %d periodic final calls came in 20 s\n", atomic_load(&storm_finals.count),
                STORM_PERIODIC);
        CHECK(0);
    }
    CHECK_EQ(px_timerq_pending(storm_q), 0);   /* the nop was cancelled too */
    size_t single = 0;
    for (int i = 0; i < STORM_PERIODIC; i++) {
        CHECK(atomic_load(&storm[i].wins) <= 1);
        CHECK_EQ(atomic_load(&storm[i].finals), 1);
        CHECK_EQ(atomic_load(&storm[i].ticks_after_final), 0);
        single += (size_t)atomic_load(&storm[i].wins);
    }
    /* The nop, an hour away, was won by a cancel_all too. */
    CHECK_EQ(single + atomic_load(&storm_all_wins), STORM_PERIODIC + 1);
    px_timerq_free(storm_q);
    for (int i = 0; i < STORM_PERIODIC; i++)
        CHECK_EQ(atomic_load(&storm[i].finals), 1);
    ev_destroy(&storm_go);
}

SPECS(single_cancels_around_the_sleep, bursts_from_three_threads,
      executor_ticks_and_handler_cancels, periodic_rearm_against_cancels)
