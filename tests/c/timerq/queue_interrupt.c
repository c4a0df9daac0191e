/*
** queue_interrupt.c -- px_queue_wait_intr and px_queue_interrupt: a signal
** ends the wait with PX_EINTR; px_queue_interrupt from another thread ends
** every wait under way (and no later one); an interrupt racing a post loses
** no readiness and leaves nothing over for the next wait; a timeout is never
** early; px_queue_wait keeps waiting through both.  One ctest each,
** timerq.queue_intr_<spec> (spec.h); a third argument sets the rounds of the
** race (default 2000).
*/
#include <signal.h>
#include <unistd.h>

#include "../spec.h"

static px_queue *q;
static atomic_int waiting, result;

static void nothing(void *arg, int status) { (void)arg; (void)status; }
static void on_signal(int sig) { (void)sig; }

static void *waiter(void *arg)
{
    int64_t timeout = *(int64_t *)arg;
    atomic_store(&waiting, 1);
    atomic_store(&result, px_queue_wait_intr(q, timeout));
    atomic_store(&waiting, 0);
    return NULL;
}

static void *plain_waiter(void *arg)
{
    (void)arg;
    atomic_store(&waiting, 1);
    atomic_store(&result, px_queue_wait(q, -1));
    atomic_store(&waiting, 0);
    return NULL;
}

static void pause_ms(long ms)
{
    struct timespec ts = { 0, ms * 1000000L };
    nanosleep(&ts, NULL);
}

/* A signal delivered to the waiting thread ends its wait with PX_EINTR. */
SPEC(queue_intr_a_signal_ends_the_wait)
{
    int64_t forever = -1;
    pthread_t t;
    atomic_store(&result, 99);
    CHECK_EQ(pthread_create(&t, NULL, waiter, &forever), 0);
    while (!atomic_load(&waiting))
        pause_ms(1);
    for (int i = 0; atomic_load(&result) == 99 && i < 30000; i++) {
        pthread_kill(t, SIGUSR1);
        pause_ms(1);
    }
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(atomic_load(&result), PX_EINTR);
}

/* Another thread's px_queue_interrupt ends the wait under way; one with no
** wait under way ends none, and leaves nothing for a later wait. */
SPEC(queue_intr_another_thread_interrupts)
{
    CHECK_EQ(px_queue_interrupt(q), 0);
    CHECK_EQ(px_queue_wait_intr(q, PX_MSEC(5)), 0);   /* not a stale interrupt */
    int64_t forever = -1;
    pthread_t t;
    atomic_store(&result, 99);
    CHECK_EQ(pthread_create(&t, NULL, waiter, &forever), 0);
    int n = 0;
    for (int i = 0; n == 0 && i < 30000; i++) {
        n = px_queue_interrupt(q);
        if (n == 0)
            pause_ms(1);
    }
    CHECK_EQ(n, 1);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(atomic_load(&result), PX_EINTR);
    CHECK_EQ(px_queue_wait_intr(q, PX_MSEC(5)), 0);   /* its descriptor was read back */
}

static void *post_then_interrupt(void *arg)
{
    (void)arg;
    CHECK_EQ(px_queue_post(q, nothing, NULL, 0), 0);
    (void)px_queue_interrupt(q);
    return NULL;
}

/* A post and an interrupt that race a wait: the wait ends (1 or PX_EINTR),
** the post is still queued and readable, and the next wait on an empty
** queue is not interrupted by what is left. */
SPEC(queue_intr_racing_a_post_loses_nothing)
{
    int rounds = spec_arg ? atoi(spec_arg) : 2000;
    int64_t forever = -1;
    for (int i = 0; i < rounds; i++) {
        pthread_t w, p;
        atomic_store(&result, 99);
        CHECK_EQ(pthread_create(&w, NULL, waiter, &forever), 0);
        if (i % 2)
            pause_ms(0);
        CHECK_EQ(pthread_create(&p, NULL, post_then_interrupt, NULL), 0);
        CHECK_EQ(pthread_join(p, NULL), 0);
        CHECK_EQ(pthread_join(w, NULL), 0);   /* never a hang: the post is readable */
        int r = atomic_load(&result);
        CHECK(r == 1 || r == PX_EINTR);
        CHECK_EQ(px_queue_wait_intr(q, 0), 1);  /* still readable */
        CHECK_EQ(px_queue_drain(q, 0), 1);
        CHECK_EQ(px_queue_wait_intr(q, 0), 0);  /* nothing left over */
    }
}

/* A timeout ends the wait no earlier than asked. */
SPEC(queue_intr_timeout_is_never_early)
{
    for (int i = 0; i < 20; i++) {
        int64_t ms = 1 + i % 7, t0 = px_now();
        CHECK_EQ(px_queue_wait_intr(q, PX_MSEC(ms)), 0);
        CHECK_GE(px_now() - t0, PX_MSEC(ms));
    }
}

/* px_queue_wait is not interruptible: it waits on for the post. */
SPEC(queue_plain_wait_is_not_interrupted)
{
    pthread_t t;
    atomic_store(&result, 99);
    CHECK_EQ(pthread_create(&t, NULL, plain_waiter, NULL), 0);
    while (!atomic_load(&waiting))
        pause_ms(1);
    pause_ms(5);
    CHECK_EQ(px_queue_interrupt(q), 0);
    pthread_kill(t, SIGUSR1);
    pause_ms(5);
    CHECK_EQ(atomic_load(&result), 99);
    CHECK_EQ(px_queue_post(q, nothing, NULL, 0), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(atomic_load(&result), 1);
    CHECK_EQ(px_queue_drain(q, 0), 1);
}

/* Every spec waits on one queue; NULL is refused first.  SIGUSR1 is caught,
** so a signal only interrupts (the plain wait's spec sends one too). */
static void setup(void)
{
    struct sigaction sa = { 0 };
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;                 /* ppoll is never restarted */
    CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
    CHECK_EQ(px_queue_wait_intr(NULL, 0), PX_EINVAL);
    CHECK_EQ(px_queue_interrupt(NULL), PX_EINVAL);
    q = px_queue_new();
    CHECK(q != NULL);
}

static void teardown(void) { px_queue_free(q); }

SPECS_AROUND(setup, teardown, queue_intr_a_signal_ends_the_wait,
             queue_intr_another_thread_interrupts, queue_intr_racing_a_post_loses_nothing,
             queue_intr_timeout_is_never_early, queue_plain_wait_is_not_interrupted)
