/*
** hostile.c -- the interrupted-waiter policy of the family attacked where its
** pieces meet: a waiter interrupted and then stray-woken before it ran, a
** grant made off-fiber (its wake waits in the inbox) racing a cancel posted
** before it, several joiners of one fiber in every state when it ends, and
** the count of open cancel scopes that px_run keeps alive on.
*/
#include <signal.h>
#include <unistd.h>

#include "sync_kit.h"

static px_token *tok;
static px_sem *sem;
static int res[4];
static uint64_t ids[4];

/* -- interrupted, then stray-woken, before it ran --------------------------- */

static int acquire_body(void *arg)
{
    return px_sem_acquire(arg);
}

static void *cancellable_acquirer(void *arg)
{
    intptr_t i = (intptr_t)arg;
    ids[i] = px_self();
    res[i] = px_with_cancel(tok, acquire_body, sem);
    return NULL;
}

static void *plain_acquirer(void *arg)
{
    intptr_t i = (intptr_t)arg;
    ids[i] = px_self();
    res[i] = px_sem_acquire(sem);
    return NULL;
}

static void *interrupted_main(void *arg)
{
    (void)arg;
    px_fiber *a = px_spawn(cancellable_acquirer, (void *)0);
    px_fiber *b = px_spawn(plain_acquirer, (void *)1);
    CHECK(a && b);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_sem_waiters(sem), 2);
    CHECK_EQ(px_token_cancel(tok), 1);           /* a is interrupted, not run yet */
    CHECK_EQ(px_wake(ids[0]), 0);                /* ready already: nothing */
    CHECK_EQ(px_wake(ids[1]), 1);                /* b: stray, still waits */
    CHECK_EQ(px_sem_release(sem), 0);            /* past a, to b */
    CHECK_EQ(px_sem_value(sem), 0);
    CHECK_EQ(px_join(a, NULL), 0);
    CHECK_EQ(px_join(b, NULL), 0);
    CHECK_EQ(res[0], PX_ECANCELED);
    CHECK_EQ(res[1], 0);
    CHECK_EQ(px_sem_value(sem), 0);
    CHECK_EQ(px_sem_waiters(sem), 0);
    px_fiber_release(a);
    px_fiber_release(b);
    return NULL;
}

SPEC(an_interrupted_then_stray_woken_waiter_is_passed_by_a_release)
{
    CHECK((tok = px_token_new()) != NULL);
    CHECK((sem = px_sem_new(0)) != NULL);
    CHECK_EQ(px_run(interrupted_main, NULL, NULL), 0);
    CHECK_EQ(px_sem_free(sem), 0);
    px_token_free(tok);
}

/* -- an off-fiber grant whose wake queues behind a cancel ------------------- */

/* Two acquirers parked (the first in a cancel scope), the scheduler stopped
** with PX_EDEADLK; then, off-fiber: `stray` px_wake of the first, a cancel,
** a release; then the run goes on.  A unit is never lost nor doubled. */
static void off_fiber_release(int stray)
{
    px_sched_opts o = { 0 };
    o.on_deadlock = on_deadlock;
    CHECK((tok = px_token_new()) != NULL);
    CHECK((sem = px_sem_new(0)) != NULL);
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    res[0] = res[1] = 1;
    CHECK_EQ(px_sched_post(s, cancellable_acquirer, (void *)0), 0);
    CHECK_EQ(px_sched_post(s, plain_acquirer, (void *)1), 0);
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);
    CHECK_EQ(px_sem_waiters(sem), 2);
    if (stray)
        CHECK_EQ(px_wake(ids[0]), 1);            /* handed to the inbox */
    CHECK_EQ(px_token_cancel(tok), 1);
    CHECK_EQ(px_sem_release(sem), 0);            /* to the first: its wake queues */
    int r = px_sched_run(s);
    if (stray) {
        /* the stray wake came first: the first ran before the cancel landed
        ** and took its unit; the second still waits */
        CHECK_EQ(r, PX_EDEADLK);
        CHECK_EQ(res[0], 0);
        CHECK_EQ(res[1], 1);
        CHECK_EQ(px_sem_release(sem), 0);
        CHECK_EQ(px_sched_run(s), 0);
    } else {
        /* the cancel came first: the unit went on to the second */
        CHECK_EQ(r, 0);
        CHECK_EQ(res[0], PX_ECANCELED);
    }
    CHECK_EQ(res[1], 0);
    CHECK_EQ(px_sem_value(sem), 0);
    px_sched_free(s);
    CHECK_EQ(px_sem_free(sem), 0);
    px_token_free(tok);
}

SPEC(an_off_fiber_release_racing_a_cancel_is_passed_on)
{
    off_fiber_release(0);
}

SPEC(an_off_fiber_release_after_a_stray_wake_and_a_cancel_is_kept)
{
    off_fiber_release(1);
}

/* The same with a channel: the value the interrupted receiver was handed
** goes to the next receiver. */
static px_chan *ch;
static void *vals[2];

static int recv_body(void *arg)
{
    return px_chan_recv(ch, arg);
}

static void *cancellable_receiver(void *arg)
{
    intptr_t i = (intptr_t)arg;
    res[i] = px_with_cancel(tok, recv_body, &vals[i]);
    return NULL;
}

static void *plain_receiver(void *arg)
{
    intptr_t i = (intptr_t)arg;
    res[i] = px_chan_recv(ch, &vals[i]);
    return NULL;
}

SPEC(an_off_fiber_send_racing_a_cancel_goes_to_the_next_receiver)
{
    px_sched_opts o = { 0 };
    o.on_deadlock = on_deadlock;
    for (size_t cap = 0; cap < 3; cap++) {
        CHECK((tok = px_token_new()) != NULL);
        CHECK((ch = px_chan_new(cap)) != NULL);
        px_sched *s = px_sched_new(&o);
        CHECK(s != NULL);
        res[0] = res[1] = 1;
        vals[0] = vals[1] = NULL;
        CHECK_EQ(px_sched_post(s, cancellable_receiver, (void *)0), 0);
        CHECK_EQ(px_sched_post(s, plain_receiver, (void *)1), 0);
        CHECK_EQ(px_sched_run(s), PX_EDEADLK);
        CHECK_EQ(px_token_cancel(tok), 1);
        CHECK_EQ(px_chan_trysend(ch, (void *)&o), 0);   /* handed to the first */
        CHECK_EQ(px_sched_run(s), 0);
        CHECK_EQ(res[0], PX_ECANCELED);
        CHECK_EQ(res[1], 0);
        CHECK(vals[1] == (void *)&o);
        CHECK_EQ(px_chan_len(ch), 0);
        px_sched_free(s);
        CHECK_EQ(px_chan_free(ch), 0);
        px_token_free(tok);
    }
}

/* -- one fiber, joiners in every state when it ends ------------------------- */

static px_event *go;
static px_fiber *target;
static int joins[4];

static void *target_body(void *arg)
{
    (void)arg;
    CHECK_EQ(px_event_wait(go), 0);
    return (void *)go;
}

static int join_body(void *arg)
{
    (void)arg;
    void *r = NULL;
    int code = px_join(target, &r);
    if (code == 0)
        CHECK(r == (void *)go);
    return code;
}

static void *joiner(void *arg)
{
    intptr_t i = (intptr_t)arg;
    ids[i] = px_self();
    res[i] = i == 2 ? px_with_cancel(tok, join_body, NULL) : join_body(NULL);
    joins[i]++;
    return NULL;
}

static void *joins_main(void *arg)
{
    (void)arg;
    px_fiber *j[4];
    CHECK((target = px_spawn(target_body, NULL)) != NULL);
    spawn_numbered(j, 4, joiner);
    CHECK_EQ(px_yield(), 0);                     /* all park */
    CHECK_EQ(px_event_set(go), 1);               /* the target is ready first */
    CHECK_EQ(px_wake(ids[1]), 1);                /* 1: stray, ready */
    CHECK_EQ(px_token_cancel(tok), 1);           /* 2: interrupted, ready */
    CHECK_EQ(px_wake(ids[3]), 1);                /* 3: stray ... */
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(px_join(j[i], NULL), 0);
        px_fiber_release(j[i]);
    }
    CHECK_EQ(px_join(target, NULL), 0);
    px_fiber_release(target);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(joins[i], 1);
    CHECK_EQ(res[0], 0);
    CHECK_EQ(res[1], 0);
    CHECK_EQ(res[2], PX_ECANCELED);
    CHECK_EQ(res[3], 0);
    return NULL;
}

SPEC(joiners_stray_woken_interrupted_and_parked_each_return_once)
{
    CHECK((tok = px_token_new()) != NULL);
    CHECK((go = px_event_new()) != NULL);
    CHECK_EQ(px_run(joins_main, NULL, NULL), 0);
    CHECK_EQ(px_event_free(go), 0);
    px_token_free(tok);
}

/* -- the open cancel scopes px_run counts stay balanced ------------------- */

static int returns_at_once(void *arg)
{
    (void)arg;
    return 0;
}

static int pushes_and_returns(void *arg)
{
    (void)arg;
    CHECK_EQ(px_scope_push_cancel(tok), 0);      /* left open: closed for it */
    CHECK_EQ(px_scope_push_timeout(PX_SEC(100)), 0);
    return 7;
}

static int pop_refused(void *arg)
{
    (void)arg;
    CHECK_EQ(px_scope_pop(), PX_EINVAL);         /* not the body's to pop */
    return 0;
}

static void *ends_with_scopes_open(void *arg)
{
    (void)arg;
    CHECK_EQ(px_scope_push_cancel(tok), 0);
    CHECK_EQ(px_scope_push_cancel(tok), 0);
    return NULL;
}

static void *stuck(void *arg)
{
    (void)arg;
    px_park("parked for good", NULL, NULL);
    return NULL;
}

static void *scopes_then_stuck(void *arg)
{
    (void)arg;
    CHECK_EQ(px_with_cancel(tok, returns_at_once, NULL), 0);
    CHECK_EQ(px_with_cancel(tok, pushes_and_returns, NULL), 7);
    CHECK_EQ(px_scope_push_cancel(tok), 0);
    CHECK_EQ(px_with_cancel(tok, pop_refused, NULL), 0);
    CHECK_EQ(px_scope_pop(), 0);
    px_fiber *f = px_spawn(ends_with_scopes_open, NULL);
    CHECK(f != NULL);
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
    return stuck(NULL);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "hostile: px_run kept alive by no open scope\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

SPEC(scopes_closed_every_way_leave_no_hold_on_px_run)
{
    CHECK((tok = px_token_new()) != NULL);
    signal(SIGALRM, on_alarm);
    alarm(60);                                   /* a hang fails, not times out */
    CHECK_EQ(px_run(scopes_then_stuck, NULL, NULL), PX_EDEADLK);
    alarm(0);
    px_token_free(tok);
}


/* -- a hosted waiter in its PX_EYIELD window, the same race ----------------- */

static int host_calls, host_result;

static int host_resume(void *ctx)
{
    (void)ctx;
    if (host_calls++ == 0)
        CHECK_EQ(px_scope_push_cancel(tok), 0);
    int r = px_sem_acquire(sem);                 /* the first call, and each re-call */
    if (r == PX_EYIELD)
        return 0;
    host_result = r;
    px_scope_pop();
    return PX_HOST_DONE;
}

static void hosted_off_fiber_release(int stray)
{
    px_sched_opts o = { 0 };
    o.on_deadlock = on_deadlock;
    px_host_ops ops = { host_resume, NULL, NULL };
    CHECK((tok = px_token_new()) != NULL);
    CHECK((sem = px_sem_new(0)) != NULL);
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    host_calls = 0;
    host_result = 1;
    px_fiber *h = px_spawn_hosted(s, &ops, NULL);
    CHECK(h != NULL);
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);       /* parked: PX_EYIELD, the host yielded */
    CHECK_EQ(host_calls, 1);
    if (stray)
        CHECK_EQ(px_wake(px_fiber_id(h)), 1);
    CHECK_EQ(px_token_cancel(tok), 1);
    CHECK_EQ(px_sem_release(sem), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(host_result, stray ? 0 : PX_ECANCELED);
    CHECK_EQ(px_sem_value(sem), stray ? 0 : 1);  /* passed on, back to the count */
    CHECK_EQ(px_sem_waiters(sem), 0);
    px_fiber_release(h);
    px_sched_free(s);
    CHECK_EQ(px_sem_free(sem), 0);
    px_token_free(tok);
}

SPEC(a_hosted_waiter_granted_off_fiber_after_a_cancel_passes_the_unit_on)
{
    hosted_off_fiber_release(0);
    hosted_off_fiber_release(1);
}

SPECS(an_interrupted_then_stray_woken_waiter_is_passed_by_a_release,
      an_off_fiber_release_racing_a_cancel_is_passed_on,
      an_off_fiber_release_after_a_stray_wake_and_a_cancel_is_kept,
      an_off_fiber_send_racing_a_cancel_goes_to_the_next_receiver,
      joiners_stray_woken_interrupted_and_parked_each_return_once,
      scopes_closed_every_way_leave_no_hold_on_px_run,
      a_hosted_waiter_granted_off_fiber_after_a_cancel_passes_the_unit_on)
