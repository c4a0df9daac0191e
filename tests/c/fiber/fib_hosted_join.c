/*
** fib_hosted_join.c -- px_join in a hosted fiber whose host cannot switch
** inside C (as Lua): the join returns PX_EYIELD, the host yields, and once
** resumed calls px_join again (the re-call), which must return the outcome of
** the wait it recorded -- what a C fiber's join returns for the same events.
** A hand-written state machine plays the host's coroutine.  One behaviour per
** ctest (spec.h), fiber.<spec>:
**
**   hosted_join_interrupted_as_its_target_ends_reports_the_interrupt
**     the join is interrupted (a token's cancel, a timeout) and its target
**     ends before the re-call: the re-call returns PX_ECANCELED /
**     PX_ETIMEDOUT once, as a C joiner's join does (the interrupt came
**     first), and a later join of the target returns 0 with its result.
**   hosted_join_woken_stray_waits_on_for_its_target
**     a px_wake aimed at the joiner is not the target's end: the re-call
**     parks again (PX_EYIELD), and the one after the end returns 0.
**   hosted_join_collected_by_park_result_leaves_no_join_behind
**     a host may read the outcome with px_park_result instead, and release
**     the target once it ended (as the Lua binding does): a join of the next
**     fiber, made in the target's recycled record, is a join of that fiber --
**     it parks -- not a re-call of the first; and after an interrupt read so,
**     a join of the same target is a new join, which parks.
*/
#include <string.h>

#include "../spec.h"

static px_sched *S;
static px_token *tok;
static int go;                     /* the target may end */
static int target_result;          /* its result is &target_result */
static px_fiber *target;

/* The target: parked until `go`, then ends. */
static void *target_body(void *arg)
{
    (void)arg;
    while (!go)
        CHECK_EQ(px_park("until go", NULL, NULL), 0);
    return &target_result;
}

/* Makes the parked target ready: it ends in its next turn. */
static void let_target_end(void)
{
    go = 1;
    CHECK_EQ(px_wake(px_fiber_id(target)), 1);
}

/* The hosted joiner's state, which the host keeps across its turns. */
typedef struct joiner {
    int interrupt;                 /* PX_ECANCELED, PX_ETIMEDOUT, or 0: none */
    int resumes;
    int parked;                    /* the first join returned PX_EYIELD */
    int recalls[4];                /* what each re-call returned, in order */
    int nrecalls;
    void *recalled;                /* what the re-calls stored */
    int later;                     /* a join of the ended target after that */
    void *later_result;
    int64_t deadline;              /* of its timeout scope */
} joiner;

static const int64_t TIMEOUT = PX_MSEC(100);

/* Scopes the first join by its interrupt, if it has one. */
static void open_scope(joiner *j)
{
    if (j->interrupt == PX_ECANCELED) {
        CHECK_EQ(px_scope_push_cancel(tok), 0);
    } else if (j->interrupt == PX_ETIMEDOUT) {
        j->deadline = px_now() + TIMEOUT;
        CHECK_EQ(px_scope_push_deadline(j->deadline), 0);
    }
}

/* One turn: the first joins and yields; each later one makes the re-call and
** yields again on PX_EYIELD, or ends. */
static int resume(void *ctx)
{
    joiner *j = ctx;
    if (j->resumes++ == 0) {
        open_scope(j);
        CHECK_EQ(px_join(target, &j->recalled), PX_EYIELD);
        j->parked = 1;
        return 0;
    }
    CHECK(j->nrecalls < 4);
    int r = px_join(target, &j->recalled);
    j->recalls[j->nrecalls++] = r;
    if (r == PX_EYIELD)
        return 0;
    if (j->interrupt)
        CHECK_EQ(px_scope_pop(), j->interrupt);
    j->later = px_join(target, &j->later_result);
    return PX_HOST_DONE;
}

static const px_host_ops ops = { resume, NULL, NULL };

/* Spawns the target and the hosted joiner, and yields until it parked. */
static px_fiber *spawn_both_with(joiner *j, const px_host_ops *host)
{
    go = 0;
    CHECK((target = px_spawn(target_body, NULL)) != NULL);
    px_fiber *h = px_spawn_hosted(S, host, j);
    CHECK(h != NULL);
    for (int i = 0; !j->parked; i++) {
        CHECK(i < 1000);
        CHECK_EQ(px_yield(), 0);
    }
    return h;
}

static px_fiber *spawn_both(joiner *j)
{
    return spawn_both_with(j, &ops);
}

static void join_both(px_fiber *h)
{
    CHECK_EQ(px_join(h, NULL), 0);
    px_fiber_release(h);
    void *r = NULL;
    CHECK_EQ(px_join(target, &r), 0);
    CHECK(r == &target_result);
    px_fiber_release(target);
}

/* Runs main as the first fiber of a new scheduler. */
static void run(px_fiber_fn main, void *arg)
{
    CHECK((S = px_sched_new(NULL)) != NULL);
    CHECK((tok = px_token_new()) != NULL);
    CHECK_EQ(px_sched_post(S, main, arg), 0);
    CHECK_EQ(px_sched_run(S), 0);
    px_token_free(tok);
    px_sched_free(S);
}

/* -- interrupted as its target ends ---------------------------------------- */

/* The joiner is parked in its join.  Interrupts it, then lets the target end
** first: the target is ready before the joiner, which runs only after it. */
static void *interrupted_main(void *arg)
{
    joiner *j = arg;
    px_fiber *h = spawn_both(j);
    if (j->interrupt == PX_ECANCELED) {
        let_target_end();                        /* the target is ready first */
        CHECK_EQ(px_token_cancel(tok), 1);       /* the joiner: interrupted, ready */
    } else {
        /* Past the joiner's deadline without leaving the CPU: the run
        ** expires it after this turn, behind the target made ready now. */
        while (px_now() <= j->deadline)
            ;
        let_target_end();
    }
    CHECK_EQ(j->resumes, 1);                     /* nothing ran since it parked */
    CHECK_EQ(px_yield(), 0);   /* both run, in that order: a join of h would hand h the turn */
    join_both(h);
    return NULL;
}

static void interrupted_as_its_target_ends(int interrupt)
{
    joiner j = { .interrupt = interrupt, .recalled = &j };
    run(interrupted_main, &j);
    CHECK_EQ(j.resumes, 2);
    CHECK_EQ(j.nrecalls, 1);                     /* once: no park again */
    CHECK_EQ(j.recalls[0], interrupt);
    CHECK(j.recalled == &j);                     /* left alone */
    CHECK_EQ(j.later, 0);                        /* a joiner no more: the end */
    CHECK(j.later_result == &target_result);
}

SPEC(hosted_join_interrupted_as_its_target_ends_reports_the_interrupt)
{
    interrupted_as_its_target_ends(PX_ECANCELED);
    interrupted_as_its_target_ends(PX_ETIMEDOUT);
}

/* -- woken by a stray wake --------------------------------------------------- */

static void *stray_main(void *arg)
{
    joiner *j = arg;
    px_fiber *h = spawn_both(j);
    CHECK_EQ(px_wake(px_fiber_id(h)), 1);        /* stray: its target has not ended */
    for (int i = 0; j->nrecalls == 0; i++) {
        CHECK(i < 1000);
        CHECK_EQ(px_yield(), 0);
    }
    CHECK_EQ(px_wake(px_fiber_id(h)), 1);        /* parked again: wakeable */
    let_target_end();
    join_both(h);
    return NULL;
}

SPEC(hosted_join_woken_stray_waits_on_for_its_target)
{
    joiner j = { 0 };
    run(stray_main, &j);
    CHECK_EQ(j.nrecalls, 3);
    CHECK_EQ(j.recalls[0], PX_EYIELD);           /* stray: parked again */
    CHECK_EQ(j.recalls[1], PX_EYIELD);           /* stray again */
    CHECK_EQ(j.recalls[2], 0);                   /* the target's end */
    CHECK(j.recalled == &target_result);
    CHECK_EQ(j.later, 0);
    CHECK(j.later_result == &target_result);
}

/* -- collected by px_park_result ------------------------------------------- */

static px_fiber *next_target;

/* The first join parks; once the target ended, the second turn reads the
** outcome, releases the target, spawns the next fiber and joins it. */
static int release_then_join_next(void *ctx)
{
    joiner *j = ctx;
    switch (j->resumes++) {
    case 0:
        CHECK_EQ(px_join(target, NULL), PX_EYIELD);
        j->parked = 1;
        return 0;
    case 1: {
        CHECK_EQ(px_park_result(), 0);           /* the target's end */
        px_fiber *old = target;
        px_fiber_release(target);
        go = 0;
        CHECK((next_target = px_spawn(target_body, NULL)) != NULL);
        CHECK(next_target == old);               /* the same record, a new fiber */
        target = next_target;
        j->recalls[j->nrecalls++] = px_join(next_target, &j->recalled);
        return 0;
    }
    default:
        j->recalls[j->nrecalls++] = px_join(next_target, &j->recalled);
        return PX_HOST_DONE;
    }
}

static const px_host_ops release_ops = { release_then_join_next, NULL, NULL };

static void *collected_main(void *arg)
{
    joiner *j = arg;
    px_fiber *h = spawn_both_with(j, &release_ops);
    let_target_end();
    for (int i = 0; j->nrecalls == 0; i++) {     /* the first target ended */
        CHECK(i < 1000);
        CHECK_EQ(px_yield(), 0);
    }
    CHECK_EQ(px_yield(), 0);                     /* the next one runs, parks */
    let_target_end();
    join_both(h);
    return NULL;
}

/* The first join parks under a cancel scope; once cancelled, the second turn
** reads the interrupt, closes the scope and joins the same target again. */
static int cancelled_then_join_again(void *ctx)
{
    joiner *j = ctx;
    switch (j->resumes++) {
    case 0:
        CHECK_EQ(px_scope_push_cancel(tok), 0);
        CHECK_EQ(px_join(target, NULL), PX_EYIELD);
        j->parked = 1;
        return 0;
    case 1:
        CHECK_EQ(px_park_result(), PX_ECANCELED);
        CHECK_EQ(px_scope_pop(), PX_ECANCELED);
        j->recalls[j->nrecalls++] = px_join(target, &j->recalled);
        return 0;
    default:
        j->recalls[j->nrecalls++] = px_join(target, &j->recalled);
        return PX_HOST_DONE;
    }
}

static const px_host_ops cancelled_ops = { cancelled_then_join_again, NULL, NULL };

static void *cancelled_main(void *arg)
{
    joiner *j = arg;
    px_fiber *h = spawn_both_with(j, &cancelled_ops);
    CHECK_EQ(px_token_cancel(tok), 1);           /* the target lives on */
    for (int i = 0; j->nrecalls == 0; i++) {
        CHECK(i < 1000);
        CHECK_EQ(px_yield(), 0);
    }
    let_target_end();
    join_both(h);
    return NULL;
}

SPEC(hosted_join_collected_by_park_result_leaves_no_join_behind)
{
    joiner j = { 0 };
    run(collected_main, &j);
    CHECK_EQ(j.nrecalls, 2);
    CHECK_EQ(j.recalls[0], PX_EYIELD);           /* the next fiber runs on: parks */
    CHECK_EQ(j.recalls[1], 0);                   /* its end */
    CHECK(j.recalled == &target_result);

    joiner k = { 0 };
    run(cancelled_main, &k);
    CHECK_EQ(k.nrecalls, 2);
    CHECK_EQ(k.recalls[0], PX_EYIELD);           /* a new join: parks */
    CHECK_EQ(k.recalls[1], 0);                   /* the target's end */
    CHECK(k.recalled == &target_result);
}

SPECS(hosted_join_interrupted_as_its_target_ends_reports_the_interrupt,
      hosted_join_woken_stray_waits_on_for_its_target,
      hosted_join_collected_by_park_result_leaves_no_join_behind)
