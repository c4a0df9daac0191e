/*
** family.c -- the rules every primitive of the family keeps, tested once over
** a table of them.
**
** Each SPEC here runs for every row of `kinds` (or, given a second argument,
** for the rows of that area): CMake registers it as <area>.<behaviour> for
** every area in PX_SYNC_FAMILY, so `ctest -R '^mutex\.'` still lists all that
** is asserted of the mutex.  A row says how to make the primitive, how to make
** its wait park (arm), the wait itself, how to let one waiter through
** (release), and its calls and queries for the misuse rules.  What is a
** primitive's own behaviour stays in its own file.
*/
#include "sync_kit.h"

#define V(n) ((void *)(uintptr_t)(n))
#define N(p) ((uintptr_t)(p))

typedef int (*call_fn)(void *h);
typedef long long (*query_fn)(void *h);

/* For the lock-like rows: what follows when the arming fiber ends holding it. */
typedef struct death {
    int waiters;             /* how many wait for it as it ends (0: not lock-like) */
    int first, next;         /* the first wait's result after the death, and every later one's */
    call_fn try_wait;        /* the try form of the wait, which says the same (or NULL) */
    query_fn state;          /* after a death with nobody waiting, it reads `value` */
    long long value;
} death;

/* One call that needs no fiber, made off-fiber: what it returns, and what the
** first query reads after it. */
typedef struct step {
    call_fn call;
    int result;
    long long value;
} step;

/* One call that lets every waiter through: what it returns, and what the
** first query reads after it; make, where a fresh one for eight waiters is
** another than the row's. */
typedef struct wake {
    call_fn call;
    int result;
    long long value;
    void *(*make)(void);
} wake;

typedef struct kind {
    const char *area;        /* the ctest prefix */
    const char *tag;         /* the primitive as the deadlock report names it */
    const char *wait;        /* the wait as the report names it */
    void *(*make)(void);     /* a fresh one: every query reads 0 */
    void (*arm)(void *h);    /* on a fiber: from now on the wait parks (or NULL) */
    call_fn block;           /* the wait */
    void (*leave)(void *h);  /* what a waiter does after its wait returned 0 (or NULL) */
    void (*release)(void *h);    /* on the arming fiber: lets the one waiter through */
    int (*free)(void *h);
    call_fn fiber_calls[7];  /* off-fiber: PX_ENOFIBER; on NULL: PX_EINVAL */
    call_fn null_calls[4];   /* need no fiber; on NULL: PX_EINVAL */
    query_fn queries[4];     /* on a fresh one, and on NULL: 0 */
    query_fn queued;         /* the count of waiters, where the API has one */
    query_fn holder;         /* the fiber that holds it, where the API has one */
    void (*hosted_check)(void *h);   /* after a hosted wait (or NULL) */
    int holder_line;         /* the deadlock report names who holds what it waits on */
    death death;
    step off[5];             /* calls that need no fiber, in order (the waits stay refused) */
    wake wake_all;           /* one call that lets every waiter through (or none) */
    call_fn tries[3], untries[3];    /* the try forms of a lock, and what undoes each */
    /* While a fiber of another scheduler waits (the row armed, one waiter
    ** parked): the calls that would park or hand over, PX_ETHREAD from a
    ** fiber of another run; and those of them that need no fiber, PX_ETHREAD
    ** off-fiber from another thread. */
    call_fn foreign[5], foreign_off[3];
    /* Where it names no holder: what queries[0] reads right after a release
    ** that went past an interrupted waiter to the next one. */
    long long raced;
} kind;

/* -- the rows ------------------------------------------------------------------- */

#define CALL(kind, fn) static int kind##_##fn##_(void *h) { return px_##kind##_##fn(h); }
#define QUERY(kind, fn) \
    static long long kind##_##fn##_(void *h) { return (long long)px_##kind##_##fn(h); }
#define FREE(kind) static int kind##_free_(void *h) { return px_##kind##_free(h); }

static void *ignored;        /* a channel value nobody looks at */

CALL(mutex, lock) CALL(mutex, trylock) CALL(mutex, unlock)
QUERY(mutex, owner) QUERY(mutex, waiters) FREE(mutex)
static void *mutex_make(void) { return px_mutex_new(); }
static void mutex_arm(void *h) { CHECK_EQ(px_mutex_lock(h), 0); }
static void mutex_release(void *h) { CHECK_EQ(px_mutex_unlock(h), 0); }
static void mutex_leave(void *h)
{
    CHECK_EQ(px_mutex_owner(h), px_self());
    CHECK_EQ(px_mutex_unlock(h), 0);
}

CALL(rwlock, rdlock) CALL(rwlock, wrlock) CALL(rwlock, tryrdlock) CALL(rwlock, trywrlock)
CALL(rwlock, rdunlock) CALL(rwlock, wrunlock)
QUERY(rwlock, readers) QUERY(rwlock, writer) QUERY(rwlock, waiters) FREE(rwlock)
static void *rwlock_make(void) { return px_rwlock_new(); }
static void rwlock_arm(void *h) { CHECK_EQ(px_rwlock_wrlock(h), 0); }
static void rwlock_release(void *h) { CHECK_EQ(px_rwlock_wrunlock(h), 0); }
static void rwlock_leave(void *h)
{
    CHECK_EQ(px_rwlock_readers(h), 1);
    CHECK_EQ(px_rwlock_rdunlock(h), 0);
}

CALL(waitgroup, wait) CALL(waitgroup, done) QUERY(waitgroup, count) FREE(waitgroup)
static int waitgroup_add_(void *h) { return px_waitgroup_add(h, 1); }
static int waitgroup_add0_(void *h) { return px_waitgroup_add(h, 0); }
static int waitgroup_add2_(void *h) { return px_waitgroup_add(h, 2); }
static void *waitgroup_make(void) { return px_waitgroup_new(); }
static void waitgroup_arm(void *h) { CHECK_EQ(px_waitgroup_add(h, 1), 0); }
static void waitgroup_release(void *h) { CHECK_EQ(px_waitgroup_done(h), 0); }

/* Two parties: the waiter and the fiber that releases it by arriving. */
CALL(barrier, arrive_and_wait) QUERY(barrier, phase) QUERY(barrier, waiting) FREE(barrier)
static void *barrier_make(void) { return px_barrier_new(2); }
static void *barrier9_make(void) { return px_barrier_new(9); }   /* eight wait for the 9th */
static void barrier_release(void *h) { CHECK_EQ(px_barrier_arrive_and_wait(h), 1); }
static void barrier_hosted_check(void *h)
{
    CHECK_EQ(px_barrier_phase(h), 1);            /* the re-call did not arrive again */
}

/* The wait is px_once_begin behind a runner: it returns 0 once the runner ends. */
static int no_action(void *arg) { (void)arg; return 0; }
static int once_do_(void *h) { return px_once_do(h, no_action, NULL); }
CALL(once, begin) CALL(once, end) QUERY(once, done) FREE(once)
static void *once_make(void) { return px_once_new(); }
static void once_arm(void *h) { CHECK_EQ(px_once_begin(h), 1); }
static void once_release(void *h) { CHECK_EQ(px_once_end(h), 0); }

/* The waiter keeps the unit it was handed: the value stays 0. */
CALL(sem, acquire) CALL(sem, tryacquire) CALL(sem, release)
QUERY(sem, value) QUERY(sem, waiters) FREE(sem)
static void *sem_make(void) { return px_sem_new(0); }
static void sem_release(void *h) { CHECK_EQ(px_sem_release(h), 0); }
static void sem_hosted_check(void *h)
{
    CHECK_EQ(px_sem_value(h), 0);                /* one unit, taken once */
}

/* Set wakes the waiter; clear before it runs: its re-call must not wait again. */
CALL(event, wait) CALL(event, set) CALL(event, clear) QUERY(event, is_set) FREE(event)
static void *event_make(void) { return px_event_new(); }
static void event_release(void *h)
{
    CHECK_EQ(px_event_set(h), 1);
    CHECK_EQ(px_event_clear(h), 0);
}

/* A channel of one slot: the receiver is handed 77, and 78 stays buffered (a
** re-call that received again would take it).  The sender's 5 is taken. */
static void *got;
static int chan_recv_(void *h) { return px_chan_recv(h, &got); }
static int chan_send_(void *h) { return px_chan_send(h, V(5)); }
static int chan_trysend_(void *h) { return px_chan_trysend(h, V(1)); }
static int chan_tryrecv_(void *h) { return px_chan_tryrecv(h, &ignored); }
CALL(chan, close) QUERY(chan, len) QUERY(chan, cap) FREE(chan)
static void *chan_make(void) { return px_chan_new(0); }
static void *chan1_make(void) { return px_chan_new(1); }
static void chan_send_release(void *h)
{
    got = NULL;
    CHECK_EQ(px_chan_send(h, V(77)), 0);         /* handed to the parked receiver */
    CHECK_EQ(px_chan_send(h, V(78)), 0);         /* buffered */
}
static void chan_recv_release(void *h)
{
    void *v = NULL;
    CHECK_EQ(px_chan_recv(h, &v), 0);
    CHECK_EQ(N(v), 5);
}
static void chan_recv_leave(void *h)
{
    CHECK_EQ(N(got), 77);
    void *v = NULL;
    CHECK_EQ(px_chan_tryrecv(h, &v), 0);         /* empty the slot for free */
    CHECK_EQ(N(v), 78);
}
static void chan_hosted_check(void *h)
{
    CHECK_EQ(N(got), 77);
    CHECK_EQ(px_chan_len(h), 1);                 /* 78 was not taken by the re-call */
    CHECK_EQ(px_chan_tryrecv(h, &ignored), 0);
}

static const kind kinds[] = {
    { "mutex", "mutex", "Mutex lock", mutex_make, mutex_arm, mutex_lock_, mutex_leave,
      mutex_release, mutex_free_,
      { mutex_lock_, mutex_trylock_, mutex_unlock_ }, { NULL },
      { mutex_owner_, mutex_waiters_ }, mutex_waiters_, mutex_owner_, NULL, 1,
      { 2, PX_EOWNERDEAD, 0, mutex_trylock_, mutex_owner_, 0 }, { { 0 } }, { 0 },
      { mutex_trylock_ }, { mutex_unlock_ },
      { mutex_lock_ }, { NULL }, 0 },
    { "rwlock", "rwlock", "RwLock read lock", rwlock_make, rwlock_arm, rwlock_rdlock_,
      rwlock_leave, rwlock_release, rwlock_free_,
      { rwlock_rdlock_, rwlock_wrlock_, rwlock_tryrdlock_, rwlock_trywrlock_,
        rwlock_rdunlock_, rwlock_wrunlock_ }, { NULL },
      { rwlock_readers_, rwlock_writer_, rwlock_waiters_ }, rwlock_waiters_, NULL, NULL, 1,
      { 1, PX_EOWNERDEAD, PX_EOWNERDEAD, rwlock_tryrdlock_, rwlock_writer_, 0 }, { { 0 } }, { 0 },
      { rwlock_tryrdlock_, rwlock_trywrlock_ }, { rwlock_rdunlock_, rwlock_wrunlock_ },
      { rwlock_rdlock_, rwlock_wrlock_ }, { NULL }, 1 },
    { "waitgroup", "waitgroup", "WaitGroup wait", waitgroup_make, waitgroup_arm,
      waitgroup_wait_, NULL, waitgroup_release, waitgroup_free_,
      { waitgroup_wait_ }, { waitgroup_add_, waitgroup_done_ },
      { waitgroup_count_ }, NULL, NULL, NULL, 0, { 0 },
      { { waitgroup_add2_, 0, 2 }, { waitgroup_done_, 0, 1 }, { waitgroup_add0_, 0, 1 },
        { waitgroup_done_, 0, 0 } }, { waitgroup_done_, 0, 0, NULL }, { NULL }, { NULL },
      { waitgroup_wait_, waitgroup_done_ }, { waitgroup_done_ }, 0 },
    { "barrier", "barrier", "Barrier arrive", barrier_make, NULL, barrier_arrive_and_wait_,
      NULL, barrier_release, barrier_free_,
      { barrier_arrive_and_wait_ }, { NULL },
      { barrier_phase_, barrier_waiting_ }, barrier_waiting_, NULL, barrier_hosted_check, 0,
      { 0 }, { { 0 } }, { barrier_arrive_and_wait_, 1, 1, barrier9_make }, { NULL }, { NULL },
      { barrier_arrive_and_wait_ }, { NULL }, 0 },
    { "once", "once", "Once init", once_make, once_arm, once_begin_, NULL, once_release,
      once_free_,
      { once_do_, once_begin_, once_end_ }, { NULL },
      { once_done_ }, NULL, NULL, NULL, 1,
      { 2, 0, 0, NULL, once_done_, 1 }, { { 0 } }, { once_end_, 0, 1, NULL }, { NULL }, { NULL },
      { once_do_, once_begin_ }, { NULL }, 1 },
    { "sem", "semaphore", "Semaphore acquire", sem_make, NULL, sem_acquire_, NULL,
      sem_release, sem_free_,
      { sem_acquire_ }, { sem_tryacquire_, sem_release_ },
      { sem_value_, sem_waiters_ }, sem_waiters_, NULL, sem_hosted_check, 0, { 0 },
      { { sem_tryacquire_, PX_EBUSY, 0 }, { sem_release_, 0, 1 }, { sem_tryacquire_, 0, 0 } },
      { 0 }, { NULL }, { NULL }, { sem_acquire_, sem_release_ }, { sem_release_ }, 0 },
    { "event", "event", "Event wait", event_make, NULL, event_wait_, NULL, event_release,
      event_free_,
      { event_wait_ }, { event_set_, event_clear_ },
      { event_is_set_ }, NULL, NULL, NULL, 0, { 0 },
      { { event_set_, 0, 1 }, { event_clear_, 0, 0 } },
      { event_set_, 8, 1, NULL }, { NULL }, { NULL }, { event_wait_, event_set_ }, { event_set_ },
      0 },
    { "chan", "channel", "Channel recv", chan1_make, NULL, chan_recv_, chan_recv_leave,
      chan_send_release, chan_free_,
      { chan_send_, chan_recv_ }, { chan_trysend_, chan_tryrecv_, chan_close_ },
      { chan_len_ }, NULL, NULL, chan_hosted_check, 0,
      { 0 }, { { 0 } }, { 0 }, { NULL }, { NULL },
      { chan_send_, chan_recv_, chan_trysend_, chan_close_ }, { chan_trysend_, chan_close_ }, 1 },
    { "chan", "channel", "Channel send", chan_make, NULL, chan_send_, NULL,
      chan_recv_release, chan_free_,
      { chan_send_, chan_recv_ }, { chan_trysend_, chan_tryrecv_, chan_close_ },
      { chan_len_, chan_cap_ }, NULL, NULL, NULL, 0,
      { 0 }, { { 0 } }, { 0 }, { NULL }, { NULL },
      { chan_send_, chan_recv_, chan_tryrecv_, chan_close_ }, { chan_tryrecv_, chan_close_ }, 0 },
};

/* -- the harness ------------------------------------------------------------------ */

static const kind *K;        /* the row under test */
static void *H;              /* its primitive */
static int entered, result;

/* Runs `check` for every row of the area named on the command line (all rows
** without one); an area no row has is a mistake in CMakeLists.txt. */
static void each_kind(void (*check)(void))
{
    int ran = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (spec_arg != NULL && strcmp(spec_arg, kinds[i].area) != 0)
            continue;
        K = &kinds[i];
        entered = 0;
        result = 1;
        check();
        ran++;
    }
    if (ran == 0) {
        fprintf(stderr, "no primitive named %s\n", spec_arg);
        exit(1);
    }
}

/* Waits on H, records the outcome, and leaves as a waiter that got it does. */
static void *waiter(void *arg)
{
    (void)arg;
    entered++;
    result = K->block(H);
    if (result == 0 && K->leave)
        K->leave(H);
    return NULL;
}

static void make(void)
{
    H = K->make();
    CHECK(H != NULL);
}

/* A fresh H, main run on it, and H freed: nobody is left queued. */
static void run_fresh(px_fiber_fn main)
{
    make();
    CHECK_EQ(px_run(main, NULL, NULL), 0);
    CHECK_EQ(K->free(H), 0);
}

/* On the arming fiber: lets the waiter w through, which gets 0. */
static void release_to(px_fiber *w)
{
    K->release(H);
    join(w);
    CHECK_EQ(result, 0);
}

/* On a fiber: arms H (where the row arms it) and spawns fn(arg). */
static px_fiber *arm_then_spawn(px_fiber_fn fn, void *arg)
{
    if (K->arm)
        K->arm(H);
    px_fiber *f = px_spawn(fn, arg);
    CHECK(f != NULL);
    return f;
}

/* -- misuse ----------------------------------------------------------------------- */

static void off_fiber(void)
{
    make();
    for (const call_fn *c = K->fiber_calls; *c; c++) {
        CHECK_EQ((*c)(H), PX_ENOFIBER);
        CHECK_EQ((*c)(NULL), PX_EINVAL);
    }
    for (const call_fn *c = K->null_calls; *c; c++)
        CHECK_EQ((*c)(NULL), PX_EINVAL);
    for (const query_fn *q = K->queries; *q; q++) {
        CHECK_EQ((*q)(H), 0);                    /* the refused calls changed nothing */
        CHECK_EQ((*q)(NULL), 0);
    }
    CHECK_EQ(K->free(NULL), 0);
    CHECK_EQ(K->free(H), 0);
}

SPEC(off_fiber_calls_are_enofiber_and_null_is_einval)
{
    each_kind(off_fiber);
}

/* After each call that needs no fiber, the waits are still refused off-fiber
** and take nothing (a set event, a pending job, a free unit). */
static void off_fiber_steps(void)
{
    make();
    for (const step *st = K->off; st->call; st++) {
        CHECK_EQ(st->call(H), st->result);
        CHECK_EQ(K->queries[0](H), st->value);
        for (const call_fn *c = K->fiber_calls; *c; c++)
            CHECK_EQ((*c)(H), PX_ENOFIBER);
        CHECK_EQ(K->queries[0](H), st->value);
    }
    CHECK_EQ(K->free(H), 0);
}

SPEC(calls_that_need_no_fiber_work_off_fiber_and_waits_stay_enofiber) /* for: waitgroup sem event */
{
    each_kind(off_fiber_steps);
}

/* -- the try forms of a lock ------------------------------------------------------ */

static int tried[3];

static void *try_all(void *arg)
{
    (void)arg;
    for (int i = 0; K->tries[i]; i++)
        tried[i] = K->tries[i](H);
    return NULL;
}

/* Every try form is refused, by another fiber, without parking. */
static void check_refused(void)
{
    join(px_spawn(try_all, NULL));
    for (int i = 0; K->tries[i]; i++)
        CHECK_EQ(tried[i], PX_EBUSY);
}

/* A free one is taken (and held by the caller); a held one is refused, and
** so it stays while a waiter is queued: the try forms never park. */
static void *tries_main(void *arg)
{
    (void)arg;
    for (int i = 0; K->tries[i]; i++) {
        CHECK_EQ(K->tries[i](H), 0);
        if (K->holder)
            CHECK_EQ(K->holder(H), px_self());
        CHECK_EQ(K->untries[i](H), 0);
    }
    K->arm(H);
    check_refused();
    CHECK_EQ(K->queued(H), 0);
    px_fiber *w = px_spawn(waiter, NULL);
    YIELD_UNTIL(entered == 1);
    check_refused();
    CHECK_EQ(K->queued(H), 1);                   /* the waiter only */
    release_to(w);
    return NULL;
}

static void try_forms(void) { run_fresh(tries_main); }

SPEC(try_forms_take_a_free_one_and_refuse_a_held_one_without_parking) /* for: mutex rwlock */
{
    each_kind(try_forms);
}

/* -- free while a fiber waits --------------------------------------------------- */

static void *busy_main(void *arg)
{
    (void)arg;
    px_fiber *w = arm_then_spawn(waiter, NULL);
    YIELD_UNTIL(entered == 1);
    if (K->queued)
        CHECK_EQ(K->queued(H), 1);
    CHECK_EQ(K->free(H), PX_EBUSY);              /* nothing freed */
    release_to(w);
    return NULL;
}

static void free_busy(void) { run_fresh(busy_main); }

SPEC(free_refuses_a_waited_on_primitive_with_ebusy)
{
    each_kind(free_busy);
}

/* -- interrupted waits -------------------------------------------------------------- */

static px_token *T;
static int block_body(void *arg) { (void)arg; return K->block(H); }

static cancel_call cancelled;      /* the wait a spec's scope interrupts */

/* cancelled, made ready for a wait in a scope of T. */
static cancel_call *cancelled_block(void)
{
    cancelled = (cancel_call){ .token = T, .body = block_body, .started = &entered };
    return &cancelled;
}

static void *timed(void *arg)
{
    (void)arg;
    check_times_out(PX_MSEC(5), block_body, NULL);
    return NULL;
}

/* Right after an interrupted wait returned, nothing is queued: once the arming
** fiber lets go (with nobody waiting), the primitive frees at once.  A fresh
** one, armed again, goes on. */
static void free_at_once_and_renew(void)
{
    if (K->queued)
        CHECK_EQ(K->queued(H), 0);
    if (K->holder)
        CHECK_EQ(K->holder(H), px_self());       /* the hold stays where it was */
    if (K->arm)
        K->release(H);
    CHECK_EQ(K->free(H), 0);
    make();
    if (K->arm)
        K->arm(H);
}

/* A patient waiter after the interrupted one is the only one queued; the
** release lets it through (and, where the primitive names a holder, makes it
** the holder before it runs). */
static void patient_gets_it(void)
{
    int before = entered;
    px_fiber *w = px_spawn(waiter, NULL);
    YIELD_UNTIL(entered == before + 1);
    CHECK_EQ(result, 1);                         /* it waits */
    if (K->queued)
        CHECK_EQ(K->queued(H), 1);
    K->release(H);
    if (K->holder)
        CHECK_EQ(K->holder(H), px_fiber_id(w));
    join(w);
    CHECK_EQ(result, 0);
    if (K->queued)
        CHECK_EQ(K->queued(H), 0);
}

/* The waits are not the arming fiber's (the owner of a mutex would get
** PX_EDEADLK), and the patient one comes after the interrupted ones (a
** barrier's arrivals add up). */
static void *interrupt_main(void *arg)
{
    (void)arg;
    if (K->arm)
        K->arm(H);
    join(px_spawn(timed, NULL));
    free_at_once_and_renew();
    px_fiber *c = px_spawn(cancellable, cancelled_block());
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(px_token_cancel(T), 1);             /* by another fiber */
    join(c);
    CHECK_EQ(cancelled.result, PX_ECANCELED);
    free_at_once_and_renew();
    patient_gets_it();
    return NULL;
}

static void interrupted(px_fiber_fn main)
{
    make();
    T = px_token_new();
    CHECK_EQ(px_run(main, NULL, NULL), 0);
    px_token_free(T);
    CHECK_EQ(K->free(H), 0);
}

static void timed_out_or_cancelled(void) { interrupted(interrupt_main); }

SPEC(timed_out_or_cancelled_wait_leaves_nothing_queued)
{
    each_kind(timed_out_or_cancelled);
}

/* A wait in a scope that fired before it (cancelled, or a zero timeout), on
** a fiber that does not hold it, fails at once and queues nothing; a patient
** waiter after it gets the release.  (The mutex's, the barrier's and the
** waitgroup's are in their own files.) */
static void *fired_waiter(void *arg)
{
    (void)arg;
    CHECK_EQ(px_with_cancel(T, block_body, NULL), PX_ECANCELED);
    CHECK_EQ(px_with_timeout(0, block_body, NULL), PX_ETIMEDOUT);
    if (K->queued)
        CHECK_EQ(K->queued(H), 0);
    return NULL;
}

static void *fired_main(void *arg)
{
    (void)arg;
    if (K->arm)
        K->arm(H);
    CHECK_EQ(px_token_cancel(T), 1);             /* fired before the wait */
    join(px_spawn(fired_waiter, NULL));
    if (K->queued)
        CHECK_EQ(K->queued(H), 0);
    patient_gets_it();
    return NULL;
}

static void fired_scope(void) { interrupted(fired_main); }

SPEC(wait_in_a_fired_scope_fails_at_once_without_queueing) /* for: rwlock once sem event chan */
{
    each_kind(fired_scope);
}

/* Cancel, then release at once: the interrupted waiter is leaving but has
** not run yet, and the release goes past it to the patient one (a mutex's
** ownership, a semaphore's unit: not back to the count; an event's set, a
** waitgroup's zero, a once's end: they wake the patient one only). */
static void *race_main(void *arg)
{
    (void)arg;
    px_fiber *c = arm_then_spawn(cancellable, cancelled_block());
    YIELD_UNTIL(entered == 1);
    if (K->queued)
        CHECK_EQ(K->queued(H), 1);
    px_fiber *w = px_spawn(waiter, NULL);
    YIELD_UNTIL(entered == 2);
    if (K->queued)
        CHECK_EQ(K->queued(H), 2);
    CHECK_EQ(px_token_cancel(T), 1);
    K->release(H);
    if (K->holder)
        CHECK_EQ(K->holder(H), px_fiber_id(w));
    else
        CHECK_EQ(K->queries[0](H), K->raced);
    if (K->queued)
        CHECK_EQ(K->queued(H), 0);
    join(c);
    CHECK_EQ(cancelled.result, PX_ECANCELED);
    join(w);
    CHECK_EQ(result, 0);
    if (K->holder)
        CHECK_EQ(K->holder(H), 0);
    if (K->queued)
        CHECK_EQ(K->queued(H), 0);
    return NULL;
}

static void cancel_then_release(void) { interrupted(race_main); }

SPEC(release_right_after_an_interrupt_goes_past_it_to_the_next_waiter) /* not for: barrier */
{
    each_kind(cancel_then_release);
}

static void *cancelling_thread(void *arg)
{
    (void)arg;
    CHECK_EQ(px_token_cancel(T), 1);
    return NULL;
}

static int join_body(void *arg) { return px_join(arg, NULL); }

/* The scheduler cannot see the other thread: the arming fiber joins the waiter
** under a (generous) timeout, whose pending deadline keeps the run from being
** declared a deadlock while the cancel travels. */
static void *thread_cancel_main(void *arg)
{
    (void)arg;
    px_fiber *c = arm_then_spawn(cancellable, cancelled_block());
    YIELD_UNTIL(entered == 1);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, cancelling_thread, NULL) == 0);
    CHECK_EQ(px_with_timeout(PX_TEST_TIMEOUT_NS, join_body, c), 0);
    px_fiber_release(c);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_EQ(cancelled.result, PX_ECANCELED);
    free_at_once_and_renew();
    patient_gets_it();
    return NULL;
}

static void thread_cancelled(void) { interrupted(thread_cancel_main); }

SPEC(wait_cancelled_by_another_thread_leaves_nothing_queued)
{
    each_kind(thread_cancelled);
}

/* -- one call wakes them all ------------------------------------------------------ */

static int woken, results[8];

static void *one_of_many(void *arg)
{
    int i = entered++;
    (void)arg;
    results[i] = K->block(H);
    woken++;
    return NULL;
}

/* Eight waiters park; the one call lets them all through, and says so (a
** barrier: the ninth arrival leads; a once: the runner's end). */
static void *wake_all_main(void *arg)
{
    (void)arg;
    px_fiber *f[8];
    if (K->arm)
        K->arm(H);
    spawn_all(f, 8, one_of_many, NULL);
    YIELD_UNTIL(entered == 8);
    CHECK_EQ(woken, 0);
    CHECK_EQ(K->wake_all.call(H), K->wake_all.result);
    CHECK_EQ(K->queries[0](H), K->wake_all.value);
    join_all(f, 8);
    CHECK_EQ(woken, 8);
    for (int i = 0; i < 8; i++)
        CHECK_EQ(results[i], 0);
    return NULL;
}

static void wake_all(void)
{
    if (K->wake_all.call == NULL) {
        CHECK(spec_arg == NULL);    /* a row named on the command line must have one */
        return;
    }
    woken = 0;
    if (K->wake_all.make) {
        H = K->wake_all.make();
        CHECK(H != NULL);
        CHECK_EQ(px_run(wake_all_main, NULL, NULL), 0);
        CHECK_EQ(K->free(H), 0);
    } else {
        run_fresh(wake_all_main);
    }
}

SPEC(one_call_wakes_every_waiter) /* for: event waitgroup barrier once */
{
    each_kind(wake_all);
}

/* -- owner death (the lock-like rows) --------------------------------------------- */

static int armed, death_results[2];

/* Arms the primitive and ends holding it once `arg` waiters have come. */
static void *arm_and_end(void *arg)
{
    int n = (int)N(arg);
    K->arm(H);
    armed = 1;
    YIELD_UNTIL(entered == n && (K->queued == NULL || K->queued(H) == n));
    for (int i = 0; i < n; i++)
        CHECK_EQ(death_results[i], 1);           /* they all still wait */
    return NULL;
}

/* Waits and, holding it whatever the wait said, leaves. */
static void *death_waiter(void *arg)
{
    int i = entered++;
    (void)arg;
    death_results[i] = K->block(H);
    if ((death_results[i] == 0 || death_results[i] == PX_EOWNERDEAD) && K->leave)
        K->leave(H);
    return NULL;
}

/* Calls `wait` on this fiber twice, as a waiter would: first after a death,
** then again. */
static void call_after_death(call_fn wait)
{
    CHECK_EQ(wait(H), K->death.first);
    if (K->leave)
        K->leave(H);
    CHECK_EQ(wait(H), K->death.next);
    if (K->leave)
        K->leave(H);
}

static void *death_handoff_main(void *arg)
{
    (void)arg;
    int n = K->death.waiters;
    armed = 0;
    death_results[0] = death_results[1] = 1;
    px_fiber *d = px_spawn(arm_and_end, V(n)), *w[2];
    YIELD_UNTIL(armed);
    spawn_all(w, n, death_waiter, NULL);
    join(d);                                     /* d ended holding it */
    join_all(w, n);
    CHECK_EQ(death_results[0], K->death.first);  /* handed over at the death */
    for (int i = 1; i < n; i++)
        CHECK_EQ(death_results[i], K->death.next);
    CHECK_EQ(K->block(H), K->death.next);
    if (K->leave)
        K->leave(H);
    return NULL;
}

static void *death_later_main(void *arg)
{
    (void)arg;
    join(px_spawn(arm_and_end, V(0)));
    CHECK_EQ(K->death.state(H), K->death.value); /* released as it ended */
    call_after_death(K->block);
    return NULL;
}

static void *death_later_try_main(void *arg)
{
    (void)arg;
    join(px_spawn(arm_and_end, V(0)));
    call_after_death(K->death.try_wait);
    return NULL;
}

static void owner_death(void)
{
    if (K->death.waiters == 0)
        return;
    px_fiber_fn mains[] = { death_handoff_main, death_later_main, death_later_try_main };
    for (int i = 0; i < (K->death.try_wait ? 3 : 2); i++) {
        entered = 0;
        run_fresh(mains[i]);
    }
}

SPEC(owner_death_hands_it_over_with_eownerdead_and_tells_later_waits) /* for: mutex rwlock once */
{
    each_kind(owner_death);
}

/* -- the deadlock report ------------------------------------------------------------ */

/* Arms the primitive and then waits for ever on an event nobody sets. */
static px_event *never;
static uint64_t armer_id, waiter_id;

static void *stuck_armer(void *arg)
{
    (void)arg;
    armer_id = px_self();
    K->arm(H);
    px_event_wait(never);
    return NULL;
}

static void *stuck_waiter(void *arg)
{
    waiter_id = px_self();
    return waiter(arg);
}

/* The waiter's own line names its wait and the primitive (and, where the
** primitive has one, the fiber that holds it); an armer parked elsewhere does
** not stand in for it. */
static void deadlock(void)
{
    make();
    CHECK((never = px_event_new()) != NULL);
    px_fiber_fn both[] = { stuck_armer, stuck_waiter, NULL };
    px_sched *s = run_to_deadlock(K->arm ? both : both + 1);
    check_has("fiber %llu: parked on \"%s\", waits on %s@%p%s", (unsigned long long)px_fiber_number(waiter_id),
              K->wait, K->tag, H, K->holder_line ? " held by fiber " : "\n");
    if (K->holder_line)
        check_has("waits on %s@%p held by fiber %llu\n", K->tag, H,
                  (unsigned long long)px_fiber_number(armer_id));
    if (K->queued)
        CHECK_EQ(K->queued(H), 1);               /* off-fiber, the state is still there */
    CHECK_EQ(K->free(H), PX_EBUSY);
    px_sched_free(s);                            /* discards the fibers, wakes nobody */
    CHECK_EQ(result, 1);
    if (K->queued)
        CHECK_EQ(K->queued(H), 0);
    CHECK_EQ(K->free(H), 0);
    CHECK_EQ(px_event_free(never), 0);
}

SPEC(deadlock_report_names_the_wait_and_the_primitive)
{
    each_kind(deadlock);
}

/* -- a hosted fiber (a host that cannot switch inside C, as Lua) ------------------ */

static int host_step;
static px_sched *HS;

/* Parks through PX_EYIELD, then makes the same call again for the outcome. */
static int host_resume(void *ctx)
{
    (void)ctx;
    switch (host_step++) {
    case 0:
        entered++;
        CHECK_EQ(K->block(H), PX_EYIELD);
        return 0;
    default:
        result = K->block(H);                    /* the re-call */
        if (result == 0 && K->holder)
            CHECK_EQ(K->holder(H), px_self());
        if (result == 0 && K->leave && K->hosted_check == NULL)
            K->leave(H);
        return PX_HOST_DONE;
    }
}

static void *hosted_main(void *arg)
{
    (void)arg;
    if (K->arm)
        K->arm(H);
    px_host_ops ops = { host_resume, NULL, NULL };
    px_fiber *h = px_spawn_hosted(HS, &ops, NULL);
    CHECK(h != NULL);
    YIELD_UNTIL(entered == 1);
    K->release(H);
    if (K->holder)
        CHECK_EQ(K->holder(H), px_fiber_id(h));  /* owner before it runs */
    join(h);
    CHECK_EQ(host_step, 2);
    CHECK_EQ(result, 0);
    if (K->holder)
        CHECK_EQ(K->holder(H), 0);
    if (K->hosted_check)
        K->hosted_check(H);
    return NULL;
}

static void hosted(void)
{
    make();
    host_step = 0;
    HS = px_sched_new(NULL);
    CHECK_EQ(px_sched_post(HS, hosted_main, NULL), 0);
    CHECK_EQ(px_sched_run(HS), 0);
    px_sched_free(HS);
    CHECK_EQ(K->free(H), 0);
}

SPEC(hosted_fiber_waits_through_eyield_and_a_recall)
{
    each_kind(hosted);
}

/* -- two schedulers at once -------------------------------------------------------- */

static px_latch home_parked, stranger_done;

/* Another thread's run: arms H, parks a waiter on it, then blocks its own
** thread (the run stays in this fiber, the waiter parked) until the
** stranger is done; then lets the waiter through as usual. */
static void *home_main(void *arg)
{
    (void)arg;
    px_fiber *w = arm_then_spawn(waiter, NULL);
    YIELD_UNTIL(entered == 1);                   /* it ran up to its park */
    ev_set(&home_parked);
    EV_WAIT(&stranger_done, 1);
    release_to(w);
    return NULL;
}

static void *home_thread(void *arg)
{
    (void)arg;
    CHECK_EQ(px_run(home_main, NULL, NULL), 0);
    return NULL;
}

/* What the queries read: the state a refused call must leave as it was. */
static void snapshot(long long *out)
{
    for (int i = 0; i < 4; i++)
        out[i] = K->queries[i] ? K->queries[i](H) : 0;
    out[4] = K->queued ? K->queued(H) : 0;
}

static void refused(const call_fn *calls)
{
    long long before[5], after[5];
    snapshot(before);
    for (const call_fn *c = calls; *c; c++) {
        CHECK_EQ((*c)(H), PX_ETHREAD);
        snapshot(after);
        CHECK(memcmp(before, after, sizeof before) == 0);
    }
}

static void *stranger_main(void *arg)
{
    (void)arg;
    refused(K->foreign);
    return NULL;
}

static void two_schedulers(void)
{
    make();
    ev_init(&home_parked);
    ev_init(&stranger_done);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, home_thread, NULL) == 0);
    EV_WAIT(&home_parked, 1);
    refused(K->foreign_off);                     /* this thread runs no scheduler */
    CHECK_EQ(px_run(stranger_main, NULL, NULL), 0);
    ev_set(&stranger_done);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_EQ(result, 0);                         /* the waiter got what it waited for */
    CHECK_EQ(K->free(H), 0);
    ev_destroy(&home_parked);
    ev_destroy(&stranger_done);
}

SPEC(two_schedulers_at_once_is_ethread_and_changes_nothing)
{
    each_kind(two_schedulers);
}

/* -- an object nobody waits on or holds ------------------------------------------- */

static px_latch other_cycled, other_stop;

/* One use of H on a fiber: armed, a waiter parked and let through (a done
** once: a later caller returns at once). */
static void use_once_around(void)
{
    entered = 0;
    result = 1;
    if (K->arm == once_arm && px_once_done(H)) {
        CHECK_EQ(K->block(H), 0);
        return;
    }
    px_fiber *w = arm_then_spawn(waiter, NULL);
    YIELD_UNTIL(entered == 1);
    CHECK_EQ(result, 1);                         /* it waits */
    release_to(w);
}

static void *other_main(void *arg)
{
    (void)arg;
    use_once_around();
    ev_set(&other_cycled);
    EV_WAIT(&other_stop, 1);                     /* the run stays alive, its thread blocked */
    return NULL;
}

static void *other_thread(void *arg)
{
    (void)arg;
    CHECK_EQ(px_run(other_main, NULL, NULL), 0);
    return NULL;
}

static void *this_main(void *arg)
{
    (void)arg;
    use_once_around();
    return NULL;
}

/* Another run on another thread used H and is still alive, but none of its
** fibers waits on H or holds it: this run uses H as its own. */
static void any_run(void)
{
    make();
    ev_init(&other_cycled);
    ev_init(&other_stop);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0);
    EV_WAIT(&other_cycled, 1);
    CHECK_EQ(px_run(this_main, NULL, NULL), 0);
    ev_set(&other_stop);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_EQ(K->free(H), 0);
    ev_destroy(&other_cycled);
    ev_destroy(&other_stop);
}

SPEC(an_object_no_fiber_waits_on_or_holds_works_in_any_run)
{
    each_kind(any_run);
}

SPECS(off_fiber_calls_are_enofiber_and_null_is_einval,
      try_forms_take_a_free_one_and_refuse_a_held_one_without_parking,
      release_right_after_an_interrupt_goes_past_it_to_the_next_waiter,
      one_call_wakes_every_waiter,
      calls_that_need_no_fiber_work_off_fiber_and_waits_stay_enofiber,
      free_refuses_a_waited_on_primitive_with_ebusy,
      timed_out_or_cancelled_wait_leaves_nothing_queued,
      wait_in_a_fired_scope_fails_at_once_without_queueing,
      wait_cancelled_by_another_thread_leaves_nothing_queued,
      deadlock_report_names_the_wait_and_the_primitive,
      hosted_fiber_waits_through_eyield_and_a_recall,
      owner_death_hands_it_over_with_eownerdead_and_tells_later_waits,
      two_schedulers_at_once_is_ethread_and_changes_nothing,
      an_object_no_fiber_waits_on_or_holds_works_in_any_run)
