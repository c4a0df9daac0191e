/*
** group.c -- the conformance specification of task groups (px_group_*).
**
** Members synchronize with the spec on observable state (how many got as
** far as their wait, what each wait returned), never on sleeps: the sleeps
** here are waits that only a cancel ends.
*/
#include <sched.h>
#include <unistd.h>

#include "sync_kit.h"

#define HOUR 3600000000000LL

static px_group *G;
static int entered, ended;
static int got[16];

static void run(px_fiber_fn main)
{
    CHECK_EQ(px_run(main, NULL, NULL), 0);
}

/* A member that waits until a cancel ends its sleep, and says what ended it. */
static int sleeper(void *arg)
{
    entered++;
    int r = px_sleep(HOUR);
    got[(uintptr_t)arg] = r;
    ended++;
    return r;
}

static int fails_with(void *arg)
{
    return (int)(uintptr_t)arg;
}

/* -- the wait ----------------------------------------------------------------- */

static int counting(void *arg)
{
    for (uintptr_t i = 0; i < (uintptr_t)arg; i++)
        CHECK_EQ(px_yield(), 0);
    ended++;
    return 0;
}

static void *every_member_main(void *arg)
{
    (void)arg;
    ended = 0;
    px_group *g = px_group_new();
    CHECK(g != NULL);
    for (uintptr_t i = 0; i < 10; i++)
        CHECK_EQ(px_group_spawn(g, counting, (void *)(10 - i)), 0);
    CHECK_EQ(px_group_live(g), 10);
    CHECK_EQ(px_group_wait(g), 0);
    CHECK_EQ(ended, 10);
    CHECK_EQ(px_group_live(g), 0);
    CHECK_EQ(px_group_failures(g, NULL, 0), 0);
    CHECK_EQ(px_group_free(g), 0);
    return NULL;
}

SPEC(waits_for_every_member)
{
    run(every_member_main);
}

/* -- the first failure ----------------------------------------------------------- */

enum { W_SLEEP, W_MUTEX, W_RECV, W_EVENT, W_SEM, W_FD, W_FUTURE, W_SELECT, W_KINDS };

static px_mutex *M;
static px_chan *CH;
static px_event *EV;
static px_sem *SEM;
static px_future *FU;
static int pipe_fd[2];

static int waiter(void *arg)
{
    uintptr_t kind = (uintptr_t)arg;
    int r = 0;
    void *v;
    entered++;
    switch (kind) {
    case W_SLEEP: r = px_sleep(HOUR); break;
    case W_MUTEX: r = px_mutex_lock(M); break;
    case W_RECV: r = px_chan_recv(CH, &v); break;
    case W_EVENT: r = px_event_wait(EV); break;
    case W_SEM: r = px_sem_acquire(SEM); break;
    case W_FD: r = px_wait_fd(pipe_fd[0], PX_READABLE); break;
    case W_FUTURE: r = px_future_wait(FU, NULL); break;
    case W_SELECT: {
        px_select_case k[] = { { .kind = PX_SELECT_RECV, .obj = CH },
                               { .kind = PX_SELECT_EVENT, .obj = EV } };
        r = px_select(k, 2);
        break;
    }
    }
    got[kind] = r;
    return r;
}

static int fail_once_all_wait(void *arg)
{
    (void)arg;
    YIELD_UNTIL(entered == W_KINDS);
    return 42;
}

static void *every_wait_main(void *arg)
{
    (void)arg;
    entered = 0;
    CHECK_EQ(pipe(pipe_fd), 0);
    CHECK((M = px_mutex_new()) != NULL);
    CHECK((CH = px_chan_new(0)) != NULL);
    CHECK((EV = px_event_new()) != NULL);
    CHECK((SEM = px_sem_new(0)) != NULL);
    CHECK((FU = px_future_new()) != NULL);
    CHECK_EQ(px_mutex_lock(M), 0);
    G = px_group_new();
    for (uintptr_t k = 0; k < W_KINDS; k++)
        CHECK_EQ(px_group_spawn(G, waiter, (void *)k), 0);
    CHECK_EQ(px_group_spawn(G, fail_once_all_wait, NULL), 0);
    CHECK_EQ(px_group_wait(G), 42);
    for (int k = 0; k < W_KINDS; k++)
        CHECK_EQ(got[k], PX_ECANCELED);
    int first[4];
    CHECK_EQ(px_group_failures(G, first, 4), 1);   /* the cancelled are no failures */
    CHECK_EQ(first[0], 42);
    /* every wait left its object: each frees */
    CHECK_EQ(px_mutex_unlock(M), 0);
    CHECK_EQ(px_mutex_free(M), 0);
    CHECK_EQ(px_chan_free(CH), 0);
    CHECK_EQ(px_event_free(EV), 0);
    CHECK_EQ(px_sem_free(SEM), 0);
    CHECK_EQ(px_future_free(FU), 0);
    CHECK_EQ(px_group_free(G), 0);
    close(pipe_fd[0]);
    close(pipe_fd[1]);
    return NULL;
}

SPEC(first_failure_cancels_members_in_every_kind_of_wait)
{
    run(every_wait_main);
}

static void *in_order_main(void *arg)
{
    (void)arg;
    px_group *g = px_group_new();
    /* Run in spawn order; none parks, so the cancel of the first does not
    ** stop the others from failing too. */
    for (uintptr_t v = 5; v <= 7; v++)
        CHECK_EQ(px_group_spawn(g, fails_with, (void *)v), 0);
    CHECK_EQ(px_group_wait(g), 5);
    int all[8] = { 0 };
    CHECK_EQ(px_group_failures(g, all, 2), 3);    /* how many, whatever max */
    CHECK_EQ(all[0], 5);
    CHECK_EQ(all[1], 6);
    CHECK_EQ(all[2], 0);                           /* max respected */
    CHECK_EQ(px_group_failures(g, all, 8), 3);
    CHECK_EQ(all[2], 7);
    CHECK_EQ(px_group_free(g), 0);
    return NULL;
}

SPEC(failures_are_collected_in_order)
{
    run(in_order_main);
}

static void *not_failed_main(void *arg)
{
    (void)arg;
    px_group *g = px_group_new();
    entered = ended = 0;
    CHECK_EQ(px_group_spawn(g, sleeper, (void *)0), 0);
    CHECK_EQ(px_group_spawn(g, sleeper, (void *)1), 0);
    CHECK_EQ(px_group_spawn(g, fails_with, (void *)9), 0);
    CHECK_EQ(px_group_wait(g), 9);
    CHECK_EQ(got[0], PX_ECANCELED);
    CHECK_EQ(got[1], PX_ECANCELED);
    CHECK_EQ(px_group_failures(g, NULL, 0), 1);
    CHECK_EQ(px_group_free(g), 0);
    /* the body in the group's scope is cancelled with the members */
    g = px_group_new();
    CHECK_EQ(px_group_scope_push(g), 0);
    CHECK_EQ(px_group_spawn(g, fails_with, (void *)9), 0);
    CHECK_EQ(px_sleep(HOUR), PX_ECANCELED);
    CHECK_EQ(px_scope_pop(), PX_ECANCELED);
    CHECK_EQ(px_group_wait(g), 9);
    CHECK_EQ(px_group_free(g), 0);
    /* cancelled from outside: every member returns PX_ECANCELED, none failed */
    g = px_group_new();
    CHECK_EQ(px_group_spawn(g, sleeper, (void *)0), 0);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_group_cancel(g), 1);
    CHECK_EQ(px_group_cancel(g), 0);
    CHECK_EQ(px_group_wait(g), 0);
    CHECK_EQ(got[0], PX_ECANCELED);
    CHECK_EQ(px_group_failures(g, NULL, 0), 0);
    CHECK_EQ(px_group_free(g), 0);
    return NULL;
}

SPEC(a_member_cancelled_by_the_group_has_not_failed)
{
    run(not_failed_main);
}

/* -- cancels from elsewhere ------------------------------------------------------- */

static atomic_int members_waiting;

static int sleeper_counted(void *arg)
{
    atomic_fetch_add(&members_waiting, 1);
    return sleeper(arg);
}

static void *cancel_thread(void *arg)
{
    while (atomic_load(&members_waiting) < 3)
        sched_yield();
    CHECK_EQ(px_group_cancel(arg), 1);
    return NULL;
}

static void *other_thread_main(void *arg)
{
    (void)arg;
    atomic_store(&members_waiting, 0);
    px_group *g = px_group_new();
    for (uintptr_t i = 0; i < 3; i++)
        CHECK_EQ(px_group_spawn(g, sleeper_counted, (void *)i), 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, cancel_thread, g), 0);
    CHECK_EQ(px_group_wait(g), 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(got[i], PX_ECANCELED);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(px_group_free(g), 0);
    /* a body in the group's scope, and no member: the cancel reaches it too */
    g = px_group_new();
    CHECK_EQ(px_group_scope_push(g), 0);
    atomic_store(&members_waiting, 3);
    CHECK_EQ(pthread_create(&t, NULL, cancel_thread, g), 0);
    CHECK_EQ(px_sleep(HOUR), PX_ECANCELED);
    CHECK_EQ(px_scope_pop(), PX_ECANCELED);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(px_group_wait(g), 0);
    CHECK_EQ(px_group_free(g), 0);
    return NULL;
}

SPEC(cancelled_from_another_thread)
{
    run(other_thread_main);
}

static atomic_int race_go;

static int short_sleeper(void *arg)
{
    int r = px_sleep((int64_t)(uintptr_t)arg * 1000);
    CHECK(r == 0 || r == PX_ECANCELED);
    return r;
}

static void *racing_cancel(void *arg)
{
    while (!atomic_load(&race_go))
        ;
    for (volatile int spin = rand() % 20000; spin > 0; spin--)
        ;
    px_group_cancel(arg);
    return NULL;
}

static void *race_main(void *arg)
{
    (void)arg;
    for (int round = 0; round < 400; round++) {
        px_group *g = px_group_new();
        atomic_store(&race_go, 0);
        pthread_t t;
        CHECK_EQ(pthread_create(&t, NULL, racing_cancel, g), 0);
        for (uintptr_t i = 0; i < 4; i++)
            CHECK_EQ(px_group_spawn(g, short_sleeper, (void *)(i * 10)), 0);
        atomic_store(&race_go, 1);
        CHECK_EQ(px_group_wait(g), 0);     /* ended or cancelled: no failure either way */
        CHECK_EQ(px_group_live(g), 0);
        CHECK_EQ(px_group_failures(g, NULL, 0), 0);
        CHECK_EQ(pthread_join(t, NULL), 0);
        CHECK_EQ(px_group_free(g), 0);
    }
    return NULL;
}

SPEC(cancellation_races_normal_completion)
{
    run(race_main);
}

/* A member that, cancelled, still takes turns before it ends: the wait
** that a scope ended goes on until it did. */
static int slow_to_leave(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sleep(HOUR), PX_ECANCELED);
    for (int i = 0; i < 100; i++)
        CHECK_EQ(px_yield(), 0);
    ended++;
    return PX_ECANCELED;
}

static int wait_group(void *arg)
{
    return px_group_wait(arg);
}

static void *scope_main(void *arg)
{
    (void)arg;
    ended = 0;
    px_group *g = px_group_new();
    CHECK_EQ(px_group_spawn(g, slow_to_leave, NULL), 0);
    CHECK_EQ(px_group_spawn(g, slow_to_leave, NULL), 0);
    CHECK_EQ(px_with_timeout(10000000, wait_group, g), PX_ETIMEDOUT);
    CHECK_EQ(ended, 2);
    CHECK_EQ(px_group_live(g), 0);
    CHECK_EQ(px_group_spawn(g, fails_with, (void *)1), PX_ECLOSED);
    CHECK_EQ(px_group_free(g), 0);
    return NULL;
}

SPEC(a_scope_of_the_waiter_cancels_the_group_and_waits_for_it)
{
    run(scope_main);
}

/* -- spawning ------------------------------------------------------------------ */

static void *cancelled_spawn_main(void *arg)
{
    (void)arg;
    ended = 0;
    px_group *g = px_group_new();
    CHECK_EQ(px_group_cancel(g), 1);
    CHECK_EQ(px_group_spawn(g, counting, (void *)1), PX_ECANCELED);
    CHECK_EQ(px_group_live(g), 0);
    CHECK_EQ(px_group_wait(g), 0);
    CHECK_EQ(ended, 0);                        /* never started */
    CHECK_EQ(px_group_free(g), 0);
    return NULL;
}

SPEC(spawn_into_a_cancelled_group_is_refused)
{
    run(cancelled_spawn_main);
}

static void *closed_spawn_main(void *arg)
{
    (void)arg;
    px_group *g = px_group_new();
    CHECK_EQ(px_group_spawn(g, counting, (void *)1), 0);
    CHECK_EQ(px_group_wait(g), 0);
    CHECK_EQ(px_group_spawn(g, counting, (void *)1), PX_ECLOSED);
    CHECK_EQ(px_group_wait(g), PX_EINVAL);     /* waited for already */
    CHECK_EQ(px_group_free(g), 0);
    return NULL;
}

SPEC(spawn_after_the_wait_is_refused)
{
    run(closed_spawn_main);
}

static int waits_own_group(void *arg)
{
    (void)arg;
    return px_group_wait(G) == PX_EDEADLK ? 0 : 1;
}

static int spawns_children(void *arg)
{
    uintptr_t depth = (uintptr_t)arg;
    ended++;
    if (depth > 0) {
        CHECK_EQ(px_group_spawn(G, spawns_children, (void *)(depth - 1)), 0);
        CHECK_EQ(px_yield(), 0);
        CHECK_EQ(px_group_spawn(G, spawns_children, (void *)(depth - 1)), 0);
    }
    return 0;
}

static void *own_group_main(void *arg)
{
    (void)arg;
    ended = 0;
    G = px_group_new();
    CHECK_EQ(px_group_spawn(G, spawns_children, (void *)3), 0);
    CHECK_EQ(px_group_wait(G), 0);
    CHECK_EQ(ended, 15);                       /* 1 + 2 + 4 + 8, each waited for */
    CHECK_EQ(px_group_failures(G, NULL, 0), 0);
    CHECK_EQ(px_group_free(G), 0);
    /* a member may not wait for its own group: it would wait for itself */
    G = px_group_new();
    CHECK_EQ(px_group_spawn(G, waits_own_group, NULL), 0);
    CHECK_EQ(px_group_wait(G), 0);
    CHECK_EQ(px_group_free(G), 0);
    return NULL;
}

SPEC(a_member_spawns_into_its_own_group)
{
    run(own_group_main);
}

static int inner_rc;

static int inner_owner(void *arg)
{
    (void)arg;
    px_group *inner = px_group_new();
    CHECK(inner != NULL);
    CHECK_EQ(px_group_spawn(inner, sleeper, (void *)0), 0);
    CHECK_EQ(px_group_spawn(inner, sleeper, (void *)1), 0);
    inner_rc = px_group_wait(inner);           /* the outer cancel ends it */
    CHECK_EQ(px_group_free(inner), 0);
    return inner_rc;
}

static int fail_after_entered(void *arg)
{
    YIELD_UNTIL(entered == 2);
    return (int)(uintptr_t)arg;
}

static void *nest_main(void *arg)
{
    (void)arg;
    entered = ended = 0;
    px_group *outer = px_group_new();
    CHECK_EQ(px_group_spawn(outer, inner_owner, NULL), 0);
    CHECK_EQ(px_group_spawn(outer, fail_after_entered, (void *)3), 0);
    CHECK_EQ(px_group_wait(outer), 3);
    CHECK_EQ(inner_rc, PX_ECANCELED);          /* its waiter's scope fired */
    CHECK_EQ(got[0], PX_ECANCELED);
    CHECK_EQ(got[1], PX_ECANCELED);
    CHECK_EQ(ended, 2);
    int f[2];
    CHECK_EQ(px_group_failures(outer, f, 2), 1);   /* PX_ECANCELED after the cancel: none */
    CHECK_EQ(f[0], 3);
    CHECK_EQ(px_group_free(outer), 0);
    return NULL;
}

SPEC(groups_nest)
{
    run(nest_main);
}

/* -- hostile use ------------------------------------------------------------------- */

static px_group *foreign;

static void *other_run_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_group_spawn(foreign, fails_with, (void *)1), PX_ETHREAD);
    CHECK_EQ(px_group_wait(foreign), PX_ETHREAD);
    CHECK_EQ(px_group_scope_push(foreign), PX_ETHREAD);
    return NULL;
}

static void *other_run(void *arg)
{
    (void)arg;
    run(other_run_main);
    return NULL;
}

static void *hostile_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_group_spawn(NULL, fails_with, NULL), PX_EINVAL);
    CHECK_EQ(px_group_wait(NULL), PX_EINVAL);
    CHECK_EQ(px_group_cancel(NULL), PX_EINVAL);
    CHECK_EQ(px_group_fail(NULL, 1), PX_EINVAL);
    CHECK_EQ(px_group_failures(NULL, NULL, 0), 0);
    CHECK_EQ(px_group_live(NULL), 0);
    CHECK_EQ(px_group_free(NULL), 0);
    px_fiber *f = (px_fiber *)&f;
    CHECK_EQ(px_group_spawn_hosted(NULL, NULL, NULL, &f), PX_EINVAL);
    CHECK(f == NULL);
    foreign = px_group_new();
    CHECK_EQ(px_group_spawn(foreign, NULL, NULL), PX_EINVAL);
    CHECK_EQ(px_group_fail(foreign, 0), PX_EINVAL);
    CHECK_EQ(px_group_spawn_hosted(foreign, NULL, NULL, &f), PX_EINVAL);
    CHECK_EQ(px_group_scope_push(NULL), PX_EINVAL);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, other_run, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(px_group_live(foreign), 0);
    CHECK_EQ(px_group_fail(foreign, 8), 1);    /* recorded as a member's */
    CHECK_EQ(px_group_spawn(foreign, fails_with, NULL), PX_ECANCELED);
    CHECK_EQ(px_group_wait(foreign), 8);
    CHECK_EQ(px_group_free(foreign), 0);
    return NULL;
}

static px_group *kept;

static void *kept_main(void *arg)
{
    (void)arg;
    kept = px_group_new();
    CHECK_EQ(px_group_spawn(kept, fails_with, (void *)0), 0);
    YIELD_UNTIL(px_group_live(kept) == 0);
    return NULL;
}

SPEC(hostile_arguments)
{
    CHECK(px_group_new() == NULL);             /* off-fiber */
    run(hostile_main);
    /* a group that outlives its run: a cancel posts to no scheduler */
    run(kept_main);
    CHECK_EQ(px_group_scope_push(kept), PX_ENOFIBER);
    CHECK_EQ(px_group_cancel(kept), 1);
    CHECK_EQ(px_group_free(kept), 0);
}

static int waits_event(void *arg)
{
    return px_event_wait(arg);
}

static void *free_main(void *arg)
{
    (void)arg;
    px_event *e = px_event_new();
    px_group *g = px_group_new();
    CHECK_EQ(px_group_spawn(g, waits_event, e), 0);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_group_free(g), PX_EBUSY);
    CHECK_EQ(px_event_set(e), 1);
    CHECK_EQ(px_group_wait(g), 0);
    CHECK_EQ(px_group_free(g), 0);
    /* no wait needed once the members ended */
    g = px_group_new();
    CHECK_EQ(px_group_spawn(g, waits_event, e), 0);
    YIELD_UNTIL(px_group_live(g) == 0);
    CHECK_EQ(px_group_free(g), 0);
    CHECK_EQ(px_event_free(e), 0);
    return NULL;
}

SPEC(free_refuses_a_group_with_live_members)
{
    run(free_main);
}

static int waits_for_good(void *arg)
{
    return px_event_wait(arg);
}

static void *deadlock_main(void *arg)
{
    G = px_group_new();
    CHECK_EQ(px_group_scope_push(G), 0);      /* the body's scope is no token scope either */
    CHECK_EQ(px_group_spawn(G, waits_for_good, arg), 0);
    CHECK_EQ(px_group_spawn(G, waits_for_good, arg), 0);
    px_event_wait(arg);                        /* never returns: the run is discarded */
    return NULL;
}

SPEC(a_deadlocked_member_is_reported)
{
    px_event *e = px_event_new();
    CHECK_EQ(px_run(deadlock_main, e, NULL), PX_EDEADLK);
    CHECK_EQ(px_group_live(G), 0);             /* its members left with their fibers */
    CHECK_EQ(px_group_free(G), 0);
    CHECK_EQ(px_event_free(e), 0);
}

/* A hosted fiber's body that ends in the very turn its px_group_wait got
** PX_EYIELD (a Lua coroutine that errors, a greenlet killed): the group is
** not left with a waiter that is gone -- another fiber may wait for it, and
** the last member's end wakes nobody's record. */
static int ender_released;
static px_sched *ender_sched;

static int ends_waiting(void *ctx)
{
    CHECK_EQ(px_group_wait(ctx), PX_EYIELD);
    return PX_HOST_DONE;
}

static void ender_release(void *ctx)
{
    (void)ctx;
    ender_released++;
}

static const px_host_ops ender_ops = { ends_waiting, NULL, ender_release };

static void *reused_record(void *arg)
{
    (void)arg;
    CHECK_EQ(px_scope_push_timeout(PX_MSEC(50)), 0);
    CHECK_EQ(px_sleep(HOUR), PX_ETIMEDOUT);    /* no stray wake from the group */
    CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
    return NULL;
}

static void *waiter_ends_main(void *arg)
{
    px_group *g = px_group_new();
    CHECK_EQ(px_group_spawn(g, waits_event, arg), 0);
    ender_released = 0;
    px_fiber *h = px_spawn_hosted(ender_sched, &ender_ops, g);
    CHECK(h != NULL);
    px_fiber_release(h);
    YIELD_UNTIL(ender_released == 1);
    px_fiber *r = px_spawn(reused_record, NULL);   /* the ended waiter's record */
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_event_set(arg), 1);
    CHECK_EQ(px_group_wait(g), 0);
    CHECK_EQ(px_join(r, NULL), 0);
    px_fiber_release(r);
    CHECK_EQ(px_group_free(g), 0);
    return NULL;
}

SPEC(a_waiter_that_ends_mid_wait_leaves_the_group)
{
    px_event *e = px_event_new();
    ender_sched = px_sched_new(NULL);
    CHECK_EQ(px_sched_post(ender_sched, waiter_ends_main, e), 0);
    CHECK_EQ(px_sched_run(ender_sched), 0);
    px_sched_free(ender_sched);
    CHECK_EQ(px_event_free(e), 0);
}

/* A hosted waiter that never comes back for its wait (its host gives the
** wait up, and ends later): the group may be freed once its members ended,
** and the waiter's end does not touch it. */
static int gave_up_steps;

static int gives_up(void *ctx)
{
    if (gave_up_steps++ == 0) {
        CHECK_EQ(px_group_wait(ctx), PX_EYIELD);
        return 0;
    }
    return PX_HOST_DONE;                       /* woken: ends without a re-call */
}

static const px_host_ops gives_up_ops = { gives_up, NULL, NULL };

static void *gave_up_main(void *arg)
{
    px_group *g = px_group_new();
    CHECK_EQ(px_group_spawn(g, waits_event, arg), 0);
    gave_up_steps = 0;
    px_fiber *h = px_spawn_hosted(ender_sched, &gives_up_ops, g);
    CHECK(h != NULL);
    YIELD_UNTIL(gave_up_steps == 1);
    CHECK_EQ(px_event_set(arg), 1);
    YIELD_UNTIL(px_group_live(g) == 0);
    CHECK_EQ(gave_up_steps, 1);                /* woken, not resumed yet */
    CHECK_EQ(px_group_free(g), 0);
    CHECK_EQ(px_join(h, NULL), 0);
    px_fiber_release(h);
    return NULL;
}

SPEC(a_group_is_freed_under_a_waiter_that_gave_up)
{
    px_event *e = px_event_new();
    ender_sched = px_sched_new(NULL);
    CHECK_EQ(px_sched_post(ender_sched, gave_up_main, e), 0);
    CHECK_EQ(px_sched_run(ender_sched), 0);
    px_sched_free(ender_sched);
    CHECK_EQ(px_event_free(e), 0);
}

SPECS(a_deadlocked_member_is_reported, waits_for_every_member, first_failure_cancels_members_in_every_kind_of_wait,
      failures_are_collected_in_order, a_member_cancelled_by_the_group_has_not_failed,
      cancelled_from_another_thread, cancellation_races_normal_completion,
      a_scope_of_the_waiter_cancels_the_group_and_waits_for_it,
      spawn_into_a_cancelled_group_is_refused, spawn_after_the_wait_is_refused,
      a_member_spawns_into_its_own_group, groups_nest, hostile_arguments,
      free_refuses_a_group_with_live_members, a_waiter_that_ends_mid_wait_leaves_the_group,
      a_group_is_freed_under_a_waiter_that_gave_up)
