/*
** cancel_unlocked -- a cancel takes no lock: it moves the record's state and
** leaves the unlinking to later.  What must hold all the same:
**
**   - many more cancels than the worker takes in one go, while the worker is
**     held in a handler: every cancel wins, pending drops at once, and once the
**     worker is let go every handler is called exactly once, with PX_ECANCELED;
**   - a periodic timer cancelled while its ticks run: a cancel that returned 1
**     is followed by exactly one PX_ECANCELED call and no tick after it;
**   - cancel_all and single cancels from two threads on the same timers: each
**     timer is won by exactly one of them, and its one call says so.
*/
#include "../spec.h"

enum { MANY = 20000, PERIODIC_ROUNDS = 300, RACE = 4000 };

/* -- many cancels while the worker is held ------------------------------- */

static px_latch held, release;

static void hold_worker(void *arg, int status)
{
    (void)arg;
    (void)status;
    ev_set(&held);
    EV_WAIT(&release, 1);
}

static atomic_int calls[MANY], aborted[MANY];

static void count_call(void *arg, int status)
{
    size_t i = (size_t)(uintptr_t)arg;
    atomic_fetch_add(&calls[i], 1);
    if (status == PX_ECANCELED)
        atomic_fetch_add(&aborted[i], 1);
}

SPEC(many_cancels_while_the_worker_is_held)
{
    static uint64_t id[MANY];
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    ev_init(&held);
    ev_init(&release);
    CHECK(px_timerq_add(q, 0, hold_worker, NULL) != 0);
    EV_WAIT(&held, 1);
    for (size_t i = 0; i < MANY; i++)
        CHECK((id[i] = px_timerq_add(q, PX_SEC(60), count_call, (void *)(uintptr_t)i)) != 0);
    CHECK_EQ(px_timerq_pending(q), MANY);
    for (size_t i = 0; i < MANY; i++) {
        size_t j = (i * 7919) % MANY;           /* not in add order */
        CHECK_EQ(px_timerq_cancel(q, id[j]), 1);
        CHECK_EQ(px_timerq_cancel(q, id[j]), 0);   /* once only */
    }
    CHECK_EQ(px_timerq_pending(q), 0);
    for (size_t i = 0; i < MANY; i++)
        CHECK_EQ(atomic_load(&calls[i]), 0);    /* the worker is still held */
    ev_set(&release);
    px_timerq_free(q);
    for (size_t i = 0; i < MANY; i++) {
        CHECK_EQ(atomic_load(&calls[i]), 1);
        CHECK_EQ(atomic_load(&aborted[i]), 1);
    }
    ev_destroy(&held);
    ev_destroy(&release);
}

/* -- a periodic timer cancelled while it ticks --------------------------- */

typedef struct ticker {
    atomic_int ticks, finals, ticks_after_final;
    px_latch first_tick, final;
} ticker;

static void on_tick(void *arg, int status)
{
    ticker *t = arg;
    if (status == PX_ECANCELED) {
        atomic_fetch_add(&t->finals, 1);
        ev_set(&t->final);
        return;
    }
    if (atomic_load(&t->finals) != 0)
        atomic_fetch_add(&t->ticks_after_final, 1);
    if (atomic_fetch_add(&t->ticks, 1) == 0)
        ev_set(&t->first_tick);
}

SPEC(periodic_cancel_while_it_ticks)
{
    static ticker t[PERIODIC_ROUNDS];
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    for (int i = 0; i < PERIODIC_ROUNDS; i++) {
        ev_init(&t[i].first_tick);
        ev_init(&t[i].final);
        uint64_t id = px_timerq_add_periodic(q, 0, PX_USEC(1), on_tick, &t[i]);
        CHECK(id != 0);
        EV_WAIT(&t[i].first_tick, 1);
        CHECK_EQ(px_timerq_cancel(q, id), 1);
        EV_WAIT(&t[i].final, 1);
        CHECK_EQ(px_timerq_cancel(q, id), 0);
    }
    px_timerq_free(q);
    for (int i = 0; i < PERIODIC_ROUNDS; i++) {
        CHECK_EQ(atomic_load(&t[i].finals), 1);
        CHECK_EQ(atomic_load(&t[i].ticks_after_final), 0);   /* none after the final call */
        ev_destroy(&t[i].first_tick);
        ev_destroy(&t[i].final);
    }
}

/* -- cancel_all against single cancels ----------------------------------- */

static px_timerq *race_q;
static uint64_t race_id[RACE];
static atomic_int race_calls[RACE], race_aborted[RACE];
static atomic_size_t single_wins;
static px_latch go;

static void race_call(void *arg, int status)
{
    size_t i = (size_t)(uintptr_t)arg;
    atomic_fetch_add(&race_calls[i], 1);
    if (status == PX_ECANCELED)
        atomic_fetch_add(&race_aborted[i], 1);
}

static void *cancel_each(void *arg)
{
    (void)arg;
    EV_WAIT(&go, 1);
    for (size_t i = 0; i < RACE; i++)
        atomic_fetch_add(&single_wins, (size_t)px_timerq_cancel(race_q, race_id[(i * 31) % RACE]));
    return NULL;
}

SPEC(cancel_all_against_single_cancels)
{
    race_q = px_timerq_new(NULL);
    CHECK(race_q != NULL);
    ev_init(&go);
    for (size_t i = 0; i < RACE; i++)
        CHECK((race_id[i] = px_timerq_add(race_q, PX_SEC(60), race_call, (void *)(uintptr_t)i)) != 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, cancel_each, NULL) == 0);
    ev_set(&go);
    size_t all_wins = px_timerq_cancel_all(race_q);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK_EQ(all_wins + atomic_load(&single_wins), RACE);
    CHECK_EQ(px_timerq_pending(race_q), 0);
    px_timerq_free(race_q);
    for (size_t i = 0; i < RACE; i++) {
        CHECK_EQ(atomic_load(&race_calls[i]), 1);
        CHECK_EQ(atomic_load(&race_aborted[i]), 1);
    }
    ev_destroy(&go);
}

SPECS(many_cancels_while_the_worker_is_held, periodic_cancel_while_it_ticks,
      cancel_all_against_single_cancels)
