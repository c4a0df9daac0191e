/*
** fib_threads.c -- other threads and a scheduler: posts from another thread
** wake a waiting scheduler; a token cancelled on another thread interrupts a
** parked fiber; a wake by id from another thread; a timer queue delivering into
** a scheduler through px_sched_executor; wrong-thread calls are error codes;
** two threads each in a run of their own at once.
*/
#include <stdatomic.h>

#include "../spec.h"

static px_sched *S;
static atomic_int posted_ran;
static px_latch ev_parked;

static void *posted(void *arg)
{
    CHECK(px_self() != 0);
    atomic_fetch_add(&posted_ran, (int)(intptr_t)arg);
    return NULL;
}

static void *poster_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++)
        CHECK_EQ(px_sched_post(S, posted, (void *)(intptr_t)1), 0);
    CHECK_EQ(px_sched_unhold(S), 0);
    return NULL;
}

SPEC(post_from_another_thread)
{
    S = px_sched_new(NULL);
    CHECK_EQ(px_sched_hold(S), 0);      /* the poster will come */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, poster_thread, NULL) == 0);
    CHECK_EQ(px_sched_run(S), 0);        /* returns once the hold is gone */
    pthread_join(t, NULL);
    CHECK_EQ(atomic_load(&posted_ran), 1000);
    CHECK_EQ(px_sched_unhold(S), PX_EINVAL);
    px_sched_free(S);
}

/* -- cancel and wake from another thread -------------------------------- */

static px_token *tok;
static _Atomic uint64_t parked_id;
static px_fiber *F;

static int park_body(void *arg)
{
    (void)arg;
    px_park_info pi = { "outside", NULL, NULL, NULL, NULL, NULL, PX_PARK_OUTSIDE };
    atomic_store(&parked_id, px_self());
    ev_set(&ev_parked);
    return px_park_with(&pi);
}

static void *cancelled_fiber(void *arg)
{
    (void)arg;
    CHECK_EQ(px_with_cancel(tok, park_body, NULL), PX_ECANCELED);
    /* Then a plain outside park, woken by id from the other thread. */
    CHECK_EQ(park_body(NULL), 0);
    return NULL;
}

static void *joiner(void *arg)
{
    (void)arg;
    F = px_spawn(cancelled_fiber, NULL);
    CHECK_EQ(px_join(F, NULL), 0);
    px_fiber_release(F);
    return NULL;
}

static void *other_thread(void *arg)
{
    (void)arg;
    CHECK(ev_wait_n(&ev_parked, 1));
    /* Scheduler-thread calls from here are refused, not undefined. */
    CHECK_EQ(px_join(F, NULL), PX_ENOFIBER);
    CHECK_EQ(px_sched_run(S), PX_EBUSY);
    CHECK(px_spawn_hosted(S, &(px_host_ops){ .resume = NULL }, NULL) == NULL);
    CHECK_EQ(px_token_cancel(tok), 1);
    CHECK(ev_wait_n(&ev_parked, 2));
    CHECK_EQ(px_wake(atomic_load(&parked_id)), 1);   /* handed over */
    return NULL;
}

SPEC(cancel_and_wake)
{
    S = px_sched_new(NULL);
    tok = px_token_new();
    ev_init(&ev_parked);
    CHECK_EQ(px_sched_post(S, joiner, NULL), 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0);
    CHECK_EQ(px_sched_run(S), 0);
    pthread_join(t, NULL);
    px_sched_free(S);
    px_token_free(tok);
    /* A wake for a scheduler that is gone reaches nobody. */
    CHECK_EQ(px_wake(atomic_load(&parked_id)), 0);
}

/* -- a timer queue delivering into the scheduler ------------------------ */

static atomic_int fired;
static int order[3];

static void on_timer(void *arg, int status)
{
    CHECK_EQ(status, 0);
    CHECK(px_self() != 0);                 /* runs as a fiber ... */
    CHECK_EQ(px_sleep(PX_MSEC(1)), 0);     /* ... that may park */
    int n = atomic_fetch_add(&fired, 1);
    order[n] = (int)(intptr_t)arg;
    if (n == 2)
        px_sched_unhold(S);
}

SPEC(timerq_executor)
{
    S = px_sched_new(NULL);
    px_executor ex = px_sched_executor(S);
    px_timerq_opts o = { .executor = &ex };
    px_timerq *q = px_timerq_new(&o);
    CHECK(q != NULL);
    CHECK_EQ(px_sched_hold(S), 0);
    /* 150 ms apart: each handler sleeps 1 ms before it records its turn, and
    ** under qemu on a busy machine a fiber's 1 ms has taken more than 10. */
    CHECK(px_timerq_add(q, PX_MSEC(310), on_timer, (void *)3) != 0);
    CHECK(px_timerq_add(q, PX_MSEC(10), on_timer, (void *)1) != 0);
    CHECK(px_timerq_add(q, PX_MSEC(160), on_timer, (void *)2) != 0);
    CHECK_EQ(px_sched_run(S), 0);
    CHECK_EQ(atomic_load(&fired), 3);
    CHECK_EQ(order[0], 1);
    CHECK_EQ(order[1], 2);
    CHECK_EQ(order[2], 3);
    px_timerq_free(q);
    px_sched_free(S);
}

/* A scheduler stays on the thread of its first run: a refused run from
** another thread must not move it there, however often it is tried. */
static void *run_elsewhere(void *arg)
{
    px_sched *s = arg;
    CHECK_EQ(px_sched_run(s), PX_ETHREAD);
    CHECK_EQ(px_sched_run(s), PX_ETHREAD);
    return NULL;
}

SPEC(bound_to_its_thread)
{
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_run(s), 0);             /* binds s to this thread */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, run_elsewhere, s) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_EQ(px_sched_run(s), 0);             /* still ours */
    px_sched_free(s);
}

/* -- a run on each of two threads at once ---------------------------------- */

static pthread_barrier_t both_under_way;

static void *ident(void *arg)
{
    return arg;
}

static void *spawn_sleep_join(void *arg)
{
    (void)arg;
    int r = pthread_barrier_wait(&both_under_way);   /* both runs are under way */
    CHECK(r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD);
    intptr_t total = 0;
    for (intptr_t i = 0; i < 200; i++) {
        px_fiber *f = px_spawn(ident, (void *)i);
        CHECK(f != NULL);
        CHECK_EQ(px_sleep(PX_USEC(500)), 0);
        void *v = NULL;
        CHECK_EQ(px_join(f, &v), 0);
        total += (intptr_t)v;
        px_fiber_release(f);
    }
    return (void *)total;
}

static void *run_on_a_thread(void *arg)
{
    void **result = arg;
    CHECK_EQ(px_run(spawn_sleep_join, NULL, result), 0);
    return NULL;
}

SPEC(a_run_on_each_of_two_threads)
{
    void *results[2] = { NULL, NULL };
    pthread_t t[2];
    CHECK(pthread_barrier_init(&both_under_way, NULL, 2) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, run_on_a_thread, &results[i]) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    pthread_barrier_destroy(&both_under_way);
    CHECK_EQ((intptr_t)results[0], 19900);
    CHECK_EQ((intptr_t)results[1], 19900);
}

SPECS(bound_to_its_thread, post_from_another_thread, cancel_and_wake, timerq_executor,
      a_run_on_each_of_two_threads)
