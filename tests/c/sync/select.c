/*
** select.c -- the conformance specification of px_select.
**
** Fibers synchronize on observable state (a count of fibers that got as far
** as their wait, a fiber's end), never on sleeps.  "Nothing queued" is read
** from the objects themselves: a px_*_free refuses an object with waiters
** (PX_EBUSY), px_sem_waiters counts them, px_chan_tryrecv finds a parked
** sender's value.
*/
#include <unistd.h>

#include "sync_kit.h"

#define V(n) ((void *)(uintptr_t)(n))
#define N(p) ((uintptr_t)(p))

static px_select_case recv_case(px_chan *ch)
{
    return (px_select_case){ .kind = PX_SELECT_RECV, .obj = ch };
}

static px_select_case send_case(px_chan *ch, void *v)
{
    return (px_select_case){ .kind = PX_SELECT_SEND, .obj = ch, .value = v };
}

static void run(px_fiber_fn main)
{
    CHECK_EQ(px_run(main, NULL, NULL), 0);
}

/* -- which case fires ------------------------------------------------------- */

static void *ready_case_main(void *arg)
{
    (void)arg;
    px_chan *a = px_chan_new(1), *b = px_chan_new(1);
    CHECK_EQ(px_chan_send(b, V(7)), 0);
    px_select_case k[] = { recv_case(a), recv_case(b) };
    CHECK_EQ(px_select(k, 2), 1);
    CHECK_EQ(k[1].result, 0);
    CHECK_EQ(N(k[1].value), 7);
    CHECK_EQ(px_chan_len(b), 0);
    CHECK_EQ(px_chan_free(a), 0);
    CHECK_EQ(px_chan_free(b), 0);
    return NULL;
}

SPEC(a_ready_case_fires_without_waiting)
{
    run(ready_case_main);
}

static px_chan *A, *B;
static int entered;

static void *send_on_b(void *arg)
{
    entered++;
    CHECK_EQ(px_chan_send(B, arg), 0);
    return NULL;
}

static void *first_ready_main(void *arg)
{
    (void)arg;
    A = px_chan_new(0);
    B = px_chan_new(0);
    entered = 0;
    px_fiber *f = px_spawn(send_on_b, V(42));
    px_select_case k[] = { recv_case(A), recv_case(B) };
    CHECK_EQ(px_select(k, 2), 1);                /* parks: the sender has not run */
    CHECK_EQ(N(k[1].value), 42);
    join(f);
    CHECK_EQ(px_chan_free(A), 0);                /* the losing case left A */
    CHECK_EQ(px_chan_free(B), 0);
    return NULL;
}

SPEC(waits_for_the_first_ready_case)
{
    run(first_ready_main);
}

/* Four buffered channels, each always holding a value: every select finds
** four ready cases, and over 10,000 rounds each fires a quarter of the time,
** within 10 %. */
#define ROUNDS 10000
static void *uniform_main(void *arg)
{
    (void)arg;
    px_chan *ch[4];
    px_select_case k[4];
    int count[4] = { 0 };
    for (int i = 0; i < 4; i++) {
        CHECK((ch[i] = px_chan_new(1)) != NULL);
        CHECK_EQ(px_chan_send(ch[i], V(i)), 0);
        k[i] = recv_case(ch[i]);
    }
    for (int r = 0; r < ROUNDS; r++) {
        int i = px_select(k, 4);
        CHECK(i >= 0 && i < 4);
        CHECK_EQ(N(k[i].value), (uintptr_t)i);
        count[i]++;
        CHECK_EQ(px_chan_send(ch[i], V(i)), 0);  /* ready again */
    }
    for (int i = 0; i < 4; i++) {
        CHECK(count[i] > ROUNDS / 4 * 9 / 10);
        CHECK(count[i] < ROUNDS / 4 * 11 / 10);
        void *v;
        CHECK_EQ(px_chan_tryrecv(ch[i], &v), 0);
        CHECK_EQ(px_chan_free(ch[i]), 0);
    }
    return NULL;
}

SPEC(ready_cases_fire_uniformly)
{
    run(uniform_main);
}

/* -- what the losing cases leave ---------------------------------------------- */

static px_sem *S;
static px_event *E;

static void *release_sem(void *arg)
{
    (void)arg;
    entered++;
    CHECK_EQ(px_chan_waiters(A), 1);             /* the select waits on all four */
    CHECK_EQ(px_chan_waiters(B), 1);
    CHECK_EQ(px_event_waiters(E), 1);
    CHECK_EQ(px_sem_waiters(S), 1);
    CHECK_EQ(px_sem_release(S), 0);
    return NULL;
}

/* A select waits on a send, a receive, an event and a semaphore; the
** semaphore wins.  Then nothing of the select is left anywhere: the send's
** value was never delivered, no unit was taken twice, no waiter is queued. */
static void *losers_main(void *arg)
{
    (void)arg;
    A = px_chan_new(0);
    B = px_chan_new(0);
    S = px_sem_new(0);
    E = px_event_new();
    entered = 0;
    px_fiber *f = px_spawn(release_sem, NULL);
    CHECK(f != NULL);
    px_select_case k[] = {
        send_case(A, V(1)), recv_case(B),
        { .kind = PX_SELECT_EVENT, .obj = E }, { .kind = PX_SELECT_SEM, .obj = S },
    };
    CHECK_EQ(px_select(k, 4), 3);
    CHECK_EQ(k[3].result, 0);
    join(f);
    CHECK_EQ(px_sem_value(S), 0);                /* the unit is the select's */
    CHECK_EQ(px_sem_waiters(S), 0);
    CHECK_EQ(px_chan_waiters(A), 0);
    CHECK_EQ(px_chan_waiters(B), 0);
    CHECK_EQ(px_event_waiters(E), 0);
    void *v;
    CHECK_EQ(px_chan_tryrecv(A, &v), PX_EBUSY);  /* the send's value never went out */
    CHECK_EQ(px_event_set(E), 0);                /* nobody waits on it */
    CHECK_EQ(px_chan_free(A), 0);
    CHECK_EQ(px_chan_free(B), 0);
    CHECK_EQ(px_sem_free(S), 0);
    CHECK_EQ(px_event_free(E), 0);
    return NULL;
}

SPEC(losing_cases_leave_nothing_queued)
{
    run(losers_main);
}

static void *recv_twice(void *arg)
{
    (void)arg;
    void *v;
    entered++;
    CHECK_EQ(px_chan_recv(A, &v), 0);
    CHECK_EQ(N(v), 1);
    CHECK_EQ(px_chan_recv(B, &v), 0);            /* a plain sender's, not the select's */
    CHECK_EQ(N(v), 30);
    return NULL;
}

/* A select offers 1 on A and 3 on B; a receiver takes one value from A,
** then one from B, where a plain sender offers 30: the receiver gets 30,
** so the select's offer on B was withdrawn when its offer on A was taken. */
static int sent_by[2];

static void *offer_both(void *arg)
{
    px_select_case k[] = { send_case(A, V(N(arg))), send_case(B, V(N(arg) + 2)) };
    entered++;
    sent_by[N(arg) - 1] = px_select(k, 2);
    return NULL;
}

static void *losing_send_main(void *arg)
{
    (void)arg;
    A = px_chan_new(0);
    B = px_chan_new(0);
    entered = 0;
    px_fiber *s1 = px_spawn(offer_both, V(1));
    YIELD_UNTIL(entered == 1);
    px_fiber *r = px_spawn(recv_twice, NULL);
    px_fiber *plain = px_spawn(send_on_b, V(30));
    join(r);
    join(plain);
    join(s1);
    CHECK_EQ(sent_by[0], 0);                     /* it sent on A only */
    void *v;
    CHECK_EQ(px_chan_tryrecv(B, &v), PX_EBUSY);  /* nothing of it left on B */
    CHECK_EQ(px_chan_free(A), 0);
    CHECK_EQ(px_chan_free(B), 0);
    return NULL;
}

SPEC(a_losing_send_is_never_delivered)
{
    run(losing_send_main);
}

/* -- the default case ------------------------------------------------------- */

static void *default_main(void *arg)
{
    (void)arg;
    px_chan *a = px_chan_new(0);
    px_sem *s = px_sem_new(0);
    px_select_case k[] = {
        recv_case(a), { .kind = PX_SELECT_DEFAULT }, { .kind = PX_SELECT_SEM, .obj = s },
    };
    CHECK_EQ(px_select(k, 3), 1);                /* nothing ready: no park */
    CHECK_EQ(px_sem_release(s), 0);
    CHECK_EQ(px_select(k, 3), 2);                /* a ready case beats the default */
    CHECK_EQ(px_sem_value(s), 0);
    CHECK_EQ(px_chan_free(a), 0);
    CHECK_EQ(px_sem_free(s), 0);
    return NULL;
}

SPEC(default_case_fires_when_nothing_is_ready)
{
    run(default_main);
}

SPEC(default_case_works_off_fiber)
{
    px_chan *a = px_chan_new(1);
    px_select_case k[] = { recv_case(a), { .kind = PX_SELECT_DEFAULT } };
    CHECK_EQ(px_select(k, 2), 1);
    CHECK_EQ(px_chan_trysend(a, V(5)), 0);
    CHECK_EQ(px_select(k, 2), 0);
    CHECK_EQ(N(k[0].value), 5);
    CHECK_EQ(px_select(k, 1), PX_ENOFIBER);      /* it would have to wait */
    CHECK_EQ(px_chan_free(a), 0);
}

/* -- closed channels ------------------------------------------------------------ */

static void *close_a(void *arg)
{
    (void)arg;
    entered++;
    CHECK_EQ(px_chan_close(A), 0);
    return NULL;
}

static void *closed_main(void *arg)
{
    (void)arg;
    A = px_chan_new(1);
    B = px_chan_new(0);
    CHECK_EQ(px_chan_send(A, V(9)), 0);
    CHECK_EQ(px_chan_close(A), 0);
    px_select_case k[] = { recv_case(A), recv_case(B) };
    CHECK_EQ(px_select(k, 2), 0);                /* what is buffered comes first */
    CHECK_EQ(k[0].result, 0);
    CHECK_EQ(N(k[0].value), 9);
    CHECK_EQ(px_select(k, 2), 0);                /* then the close */
    CHECK_EQ(k[0].result, PX_ECLOSED);
    px_select_case s[] = { send_case(A, V(1)), recv_case(B) };
    CHECK_EQ(px_select(s, 2), 0);
    CHECK_EQ(s[0].result, PX_ECLOSED);
    CHECK_EQ(px_chan_free(A), 0);

    A = px_chan_new(0);                          /* closed while the select waits */
    k[0] = recv_case(A);
    entered = 0;
    px_fiber *f = px_spawn(close_a, NULL);
    CHECK_EQ(px_select(k, 2), 0);
    CHECK_EQ(k[0].result, PX_ECLOSED);
    join(f);
    CHECK_EQ(px_chan_free(A), 0);
    CHECK_EQ(px_chan_free(B), 0);
    return NULL;
}

SPEC(a_closed_channel_fires_with_closed)
{
    run(closed_main);
}

/* -- events, semaphores, fds, deadlines ----------------------------------------- */

static void *set_e(void *arg)
{
    (void)arg;
    CHECK_EQ(px_event_set(E), 1);                /* the select's case: one waiter */
    return NULL;
}

static void *event_sem_main(void *arg)
{
    (void)arg;
    E = px_event_new();
    S = px_sem_new(0);
    px_select_case k[] = { { .kind = PX_SELECT_SEM, .obj = S }, { .kind = PX_SELECT_EVENT, .obj = E } };
    px_fiber *f = px_spawn(set_e, NULL);
    CHECK_EQ(px_select(k, 2), 1);
    join(f);
    CHECK_EQ(px_sem_waiters(S), 0);
    CHECK_EQ(px_select(k, 2), 1);                /* set: ready at once */
    CHECK_EQ(px_event_free(E), 0);
    CHECK_EQ(px_sem_free(S), 0);
    return NULL;
}

SPEC(event_and_semaphore_cases)
{
    run(event_sem_main);
}

static int P[2];

static void *write_pipe(void *arg)
{
    (void)arg;
    CHECK_EQ(write(P[1], "x", 1), 1);
    return NULL;
}

static void *notify_pipe(void *arg)
{
    (void)arg;
    CHECK_EQ(px_fd_notify_closing(P[0]), 0);
    return NULL;
}

static void *fd_main(void *arg)
{
    (void)arg;
    A = px_chan_new(0);
    CHECK_EQ(pipe(P), 0);
    CHECK_EQ(px_fd_set_nonblocking(P[0]), 0);
    px_select_case k[] = {
        recv_case(A), { .kind = PX_SELECT_FD, .fd = P[0], .events = PX_READABLE },
    };
    px_fiber *f = px_spawn(write_pipe, NULL);
    CHECK_EQ(px_select(k, 2), 1);
    CHECK_EQ(k[1].result, 0);
    join(f);
    CHECK_EQ(px_select(k, 2), 1);                /* still readable: at once */
    char c;
    CHECK_EQ(read(P[0], &c, 1), 1);
    f = px_spawn(notify_pipe, NULL);             /* closed while it waits */
    CHECK_EQ(px_select(k, 2), 1);
    CHECK_EQ(k[1].result, PX_ECLOSED);
    join(f);
    /* the fd's direction is free again: a plain wait may take it */
    f = px_spawn(write_pipe, NULL);
    CHECK_EQ(px_wait_fd(P[0], PX_READABLE), 0);
    join(f);
    close(P[0]);
    close(P[1]);
    CHECK_EQ(px_chan_free(A), 0);
    return NULL;
}

SPEC(fd_cases)
{
    run(fd_main);
}

static void *deadline_main(void *arg)
{
    (void)arg;
    A = px_chan_new(0);
    int64_t t0 = px_now();
    px_select_case k[] = {
        recv_case(A),
        { .kind = PX_SELECT_DEADLINE, .deadline = t0 + 20000000 },
        { .kind = PX_SELECT_DEADLINE, .deadline = t0 + 10000000 },
    };
    CHECK_EQ(px_select(k, 3), 2);                /* the earliest one */
    CHECK(px_now() >= t0 + 10000000);
    CHECK_EQ(px_select(k, 3) >= 1, 1);           /* passed: ready at once */
    CHECK_EQ(px_chan_free(A), 0);
    /* the deadline's scope is gone: a later park is not bounded by it */
    CHECK_EQ(px_sleep(1000000), 0);
    return NULL;
}

SPEC(deadline_case_fires_when_nothing_else_does)
{
    run(deadline_main);
}

/* -- scopes ------------------------------------------------------------------------ */

static int scoped_select(void *arg)
{
    return px_select(arg, 2);
}

static void *scope_main(void *arg)
{
    (void)arg;
    A = px_chan_new(0);
    S = px_sem_new(0);
    px_select_case k[] = { send_case(A, V(1)), { .kind = PX_SELECT_SEM, .obj = S } };
    CHECK_EQ(px_with_timeout(1000000, scoped_select, k), PX_ETIMEDOUT);
    CHECK_EQ(px_sem_waiters(S), 0);
    void *v;
    CHECK_EQ(px_chan_tryrecv(A, &v), PX_EBUSY);  /* nothing sent */
    CHECK_EQ(px_chan_free(A), 0);
    CHECK_EQ(px_sem_free(S), 0);
    return NULL;
}

SPEC(a_scope_ends_the_wait_and_nothing_is_taken)
{
    run(scope_main);
}

static void *switched_off_main(void *arg)
{
    (void)arg;
    px_select_case k[] = {
        { .kind = PX_SELECT_RECV }, { .kind = PX_SELECT_SEM },
        { .kind = PX_SELECT_DEADLINE, .deadline = px_now() + 1000000 },
    };
    CHECK_EQ(px_select(k, 3), 2);
    CHECK_EQ(px_with_timeout(1000000, scoped_select, k), PX_ETIMEDOUT);
    return NULL;
}

SPEC(cases_without_an_object_never_fire)
{
    run(switched_off_main);
}

/* A select sending and a select receiving meet on an unbuffered channel:
** the value the one sent is the value the other received, on one channel. */
static int received_on;

static void *select_recv(void *arg)
{
    (void)arg;
    px_select_case k[] = { recv_case(A), recv_case(B) };
    entered++;
    received_on = px_select(k, 2);
    CHECK(received_on == 0 || received_on == 1);
    CHECK_EQ(N(k[received_on].value), 11 + (uintptr_t)received_on);
    return NULL;
}

static void *rendezvous_main(void *arg)
{
    (void)arg;
    A = px_chan_new(0);
    B = px_chan_new(0);
    for (int first = 0; first < 2; first++) {
        entered = 0;
        px_fiber *f = NULL;
        if (first) {
            f = px_spawn(select_recv, NULL);
            YIELD_UNTIL(entered == 1);
        } else {
            f = px_spawn(select_recv, NULL);     /* runs after this select parks */
        }
        px_select_case k[] = { send_case(A, V(11)), send_case(B, V(12)) };
        int sent_on = px_select(k, 2);
        join(f);
        CHECK_EQ(sent_on, received_on);
    }
    CHECK_EQ(px_chan_free(A), 0);
    CHECK_EQ(px_chan_free(B), 0);
    return NULL;
}

SPEC(two_selects_meet_on_a_channel)
{
    run(rendezvous_main);
}

/* -- hostile input ---------------------------------------------------------------- */

static int no_cases(void *arg)
{
    return px_select(arg, 0);                    /* waits until the scope ends it */
}

static void *hostile_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_select(NULL, 1), PX_EINVAL);
    px_select_case bad[] = { { .kind = 99 } };
    CHECK_EQ(px_select(bad, 1), PX_EINVAL);
    px_select_case two[] = { { .kind = PX_SELECT_DEFAULT }, { .kind = PX_SELECT_DEFAULT } };
    CHECK_EQ(px_select(two, 2), PX_EINVAL);
    px_select_case fd[] = { { .kind = PX_SELECT_FD, .fd = -1, .events = PX_READABLE } };
    CHECK_EQ(px_select(fd, 1), PX_EINVAL);
    fd[0] = (px_select_case){ .kind = PX_SELECT_FD, .fd = 0, .events = 4 };
    CHECK_EQ(px_select(fd, 1), PX_EINVAL);
    px_select_case none[] = { { .kind = PX_SELECT_DEFAULT } };
    CHECK_EQ(px_select(none, 1), 0);
    CHECK_EQ(px_with_timeout(1000000, no_cases, none), PX_ETIMEDOUT);
    return NULL;
}

SPEC(hostile_arguments)
{
    run(hostile_main);
}

/* -- hosted fibers: a host that cannot switch inside C (as Lua) ------------------ */

/* A state machine plays the host's coroutine: each px_select that must wait
** returns PX_EYIELD, the host "yields" by returning, and once resumed calls
** px_select again with the same cases for the outcome.  The last select is
** left uncollected: the body ends mid-wait, and its cases must withdraw. */
static px_select_case HK[2];
static int hstep, hdone;

static int hosted_resume(void *ctx)
{
    (void)ctx;
    switch (hstep++) {
    case 0:
        HK[0] = recv_case(A);
        HK[1] = (px_select_case){ .kind = PX_SELECT_DEADLINE, .deadline = px_now() + PX_SEC(60) };
        CHECK_EQ(px_select(HK, 2), PX_EYIELD);
        entered++;
        return 0;
    case 1:                                      /* the sender ran: the value is ours */
        CHECK_EQ(px_select(HK, 2), 0);
        CHECK_EQ(N(HK[0].value), 77);
        HK[1].deadline = px_now() + PX_MSEC(5);
        CHECK_EQ(px_select(HK, 2), PX_EYIELD);
        return 0;
    case 2:                                      /* nobody sent: the deadline fired */
        CHECK_EQ(px_select(HK, 2), 1);
        CHECK_EQ(px_select(HK, 1), PX_EYIELD);   /* waits on A alone ... */
        hdone = 1;
        return PX_HOST_DONE;                     /* ... and ends without collecting */
    }
    CHECK(0);
    return PX_HOST_DONE;
}

static void *send_77(void *arg)
{
    (void)arg;
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(px_chan_send(A, V(77)), 0);
    return NULL;
}

SPEC(a_hosted_fiber_calls_again_for_the_outcome)
{
    A = px_chan_new(0);
    entered = hstep = hdone = 0;
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    static const px_host_ops ops = { .resume = hosted_resume };
    px_fiber *h = px_spawn_hosted(s, &ops, NULL);
    CHECK(h != NULL);
    CHECK_EQ(px_sched_post(s, send_77, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(hdone, 1);
    px_fiber_release(h);
    px_sched_free(s);
    CHECK_EQ(px_chan_free(A), 0);                /* the abandoned case withdrew */
}

SPECS(a_ready_case_fires_without_waiting, waits_for_the_first_ready_case,
      ready_cases_fire_uniformly, losing_cases_leave_nothing_queued,
      a_losing_send_is_never_delivered, default_case_fires_when_nothing_is_ready,
      default_case_works_off_fiber, a_closed_channel_fires_with_closed,
      event_and_semaphore_cases, fd_cases, deadline_case_fires_when_nothing_else_does,
      a_scope_ends_the_wait_and_nothing_is_taken, cases_without_an_object_never_fire,
      two_selects_meet_on_a_channel, hostile_arguments,
      a_hosted_fiber_calls_again_for_the_outcome)
