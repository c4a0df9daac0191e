/*
** stray_wake.c -- px_wake is public and takes any id: a wake that no release
** sent must not end a wait.  The waiter waits on, still queued, and gets what
** it waited for only when it is handed over.
**
** Every waiting operation of the family (and px_join) is tried two ways, from
** one table of kinds: stray wakes from the scheduler's own thread, before and
** right after a release that the woken waiter has not yet collected; and a
** flood of px_wake from another thread, landing while the fibers wait and
** while they are released.  The flood is paced by the main fiber (it asks for
** a burst and yields until the burst was handed over), so every release
** finds the waiters freshly woken by it.  It is bounded by rounds; a wait that
** would never end (a lost wake-up) fails a check after PX_TEST_TIMEOUT_NS, or
** px_run reports the deadlock.  A hosted fiber's re-call is tried too.
*/
#include <stdatomic.h>

#define FIBERS_GATE_NO_MAIN
#include "fibers_gate.c"

#include "sync_kit.h"

static px_mutex *m;
static gate g;
static int lock_result = 1, take_result = 1;
static void *join_result;

static void *locker(void *arg)
{
    (void)arg;
    lock_result = px_mutex_lock(m);
    CHECK_EQ(px_mutex_owner(m), px_self());
    CHECK_EQ(px_mutex_unlock(m), 0);
    return NULL;
}

static void *taker(void *arg)
{
    (void)arg;
    take_result = gate_take(&g);
    CHECK_EQ(g.owner, px_self());
    gate_give(&g);
    return NULL;
}

static void *child(void *arg)
{
    (void)arg;
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_yield(), 0);
    return (void *)7;
}

static void *joiner(void *arg)
{
    CHECK_EQ(px_join(arg, &join_result), 0);
    return NULL;
}

static void finish(px_fiber *f)
{
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
}

static void *mutex_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(m), 0);
    px_fiber *l = px_spawn(locker, NULL);
    CHECK_EQ(px_yield(), 0);                     /* it queues */
    CHECK_EQ(px_wake(px_fiber_id(l)), 1);        /* a wake nobody granted */
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(lock_result, 1);                    /* still waiting ... */
    CHECK_EQ(px_mutex_waiters(m), 1);            /* ... and still queued */
    CHECK_EQ(px_mutex_unlock(m), 0);
    finish(l);
    CHECK_EQ(lock_result, 0);
    return NULL;
}

SPEC(a_stray_wake_does_not_end_a_mutex_lock)
{
    CHECK((m = px_mutex_new()) != NULL);
    CHECK_EQ(px_run(mutex_main, NULL, NULL), 0);
    CHECK_EQ(px_mutex_free(m), 0);
}

static void *join_main(void *arg)
{
    (void)arg;
    px_fiber *c = px_spawn(child, NULL);
    px_fiber *j = px_spawn(joiner, c);
    CHECK_EQ(px_yield(), 0);                     /* the joiner parks */
    CHECK_EQ(px_wake(px_fiber_id(j)), 1);
    finish(j);
    CHECK(join_result == (void *)7);             /* it waited for the real end */
    finish(c);
    return NULL;
}

SPEC(a_stray_wake_does_not_end_a_join)
{
    CHECK_EQ(px_run(join_main, NULL, NULL), 0);
}

static void *gate_main(void *arg)
{
    (void)arg;
    CHECK_EQ(gate_take(&g), 0);
    px_fiber *t = px_spawn(taker, NULL);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_wake(px_fiber_id(t)), 1);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(take_result, 1);
    CHECK_EQ(gate_waiters(&g), 1);
    gate_give(&g);
    finish(t);
    CHECK_EQ(take_result, 0);
    return NULL;
}

SPEC(a_stray_wake_does_not_end_a_gate_take)
{
    CHECK_EQ(px_run(gate_main, NULL, NULL), 0);
    free(g.waiters);
}

/* -- a sleep, and fibers that wait on nothing -------------------------------- */

static int64_t slept;

static void *sleeper(void *arg)
{
    (void)arg;
    int64_t t0 = px_now();
    CHECK_EQ(px_sleep(50 * 1000 * 1000), 0);
    slept = px_now() - t0;
    return NULL;
}

/* A sleep is in no primitive's queue: a wake aimed at it is stale (0) and the
** sleep lasts its time. */
static void *sleep_main(void *arg)
{
    (void)arg;
    px_fiber *s = px_spawn(sleeper, NULL);
    CHECK_EQ(px_yield(), 0);                     /* it sleeps */
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(px_wake(px_fiber_id(s)), 0);
        CHECK_EQ(px_yield(), 0);
    }
    finish(s);
    CHECK_GE(slept, 50 * 1000 * 1000);
    return NULL;
}

SPEC(a_stray_wake_does_not_end_a_sleep)
{
    CHECK_EQ(px_run(sleep_main, NULL, NULL), 0);
}

static void *nothing(void *arg)
{
    return arg;
}

static void *ended_main(void *arg)
{
    (void)arg;
    px_fiber *f = px_spawn(nothing, NULL);
    CHECK_EQ(px_join(f, NULL), 0);
    CHECK_EQ(px_wake(px_fiber_id(f)), 0);        /* ended */
    px_fiber_release(f);
    CHECK_EQ(px_wake(0), 0);                     /* no fiber has id 0 */
    CHECK_EQ(px_wake((uint64_t)1 << 40), 0);     /* nor this one */
    return NULL;
}

SPEC(a_stray_wake_of_an_ended_or_unknown_fiber_does_nothing)
{
    CHECK_EQ(px_run(ended_main, NULL, NULL), 0);
}

/* -- a joiner made ready by a stray wake as its fiber ends ------------------- */

static px_event *go_b;
static int joiner_runs;

static void *waits_for_go(void *arg)
{
    (void)arg;
    CHECK_EQ(px_event_wait(go_b), 0);
    return (void *)9;
}

static void *joins_once(void *arg)
{
    void *r = NULL;
    joiner_runs++;
    CHECK_EQ(px_join(arg, &r), 0);
    CHECK(r == (void *)9);
    return (void *)5;
}

static void *joiner_ready_main(void *arg)
{
    (void)arg;
    px_fiber *b = px_spawn(waits_for_go, NULL);
    px_fiber *j = px_spawn(joins_once, b);
    CHECK_EQ(px_yield(), 0);                     /* b waits, j joins b */
    CHECK_EQ(px_event_set(go_b), 1);             /* b is ready ... */
    CHECK_EQ(px_wake(px_fiber_id(j)), 1);        /* ... and j behind it: b ends
                                                 ** while j is ready already */
    void *r = NULL;
    CHECK_EQ(px_join(j, &r), 0);
    CHECK(r == (void *)5);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(px_yield(), 0);                 /* nothing runs j again */
    CHECK_EQ(joiner_runs, 1);
    px_fiber_release(j);
    finish(b);
    return NULL;
}

SPEC(a_joiner_woken_as_its_fiber_ends_returns_once)
{
    CHECK((go_b = px_event_new()) != NULL);
    CHECK_EQ(px_run(joiner_ready_main, NULL, NULL), 0);
    CHECK_EQ(px_event_free(go_b), 0);
}

/* -- every kind of wait, one table ------------------------------------------- */

#define NW 4                 /* waiters with a flood */
#define NS 2                 /* waiters with stray wakes from the same thread */
#define FLOOD_ROUNDS 100
#define STRAY_ROUNDS 2

/*
** A kind of wait.  The main fiber arms the object so that waits park, each
** waiter calls wait() `rounds` times (wait checks that what it got was handed
** over, and returns the operation's result), and the main fiber calls
** release() whenever every unfinished waiter is parked in its wait; release
** returns how many waits it ends.  disarm() checks the accounts and frees.
*/
typedef struct kind {
    void (*arm)(void);
    int (*wait)(int i);
    int (*release)(void);
    size_t (*queued)(void);  /* the object's count of queued waiters; NULL: none */
    void (*disarm)(void);
} kind;

static const kind *k;
static int nwaiters, rounds;
static int in_wait, finished;     /* waiters inside wait(); waiters done */
static int done_w[NW];            /* waiter i did all its rounds */
static long owed, returned;       /* waits released; waits that returned */
static uint64_t ids[NW];

/* -- the flood: another thread's px_wake of every waiter, in paced bursts ---- */

static struct {
    int on;
    pthread_t t;
    pthread_mutex_t m;
    pthread_cond_t c;
    unsigned long credit;    /* wakes it may still send; under m */
    int stop;                /* under m */
    atomic_ulong sent;       /* wakes handed to the scheduler */
} fl = { .m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER };

static void *flood_thread(void *arg)
{
    (void)arg;
    unsigned long j = 0;
    pthread_mutex_lock(&fl.m);
    for (;;) {
        while (fl.credit == 0 && !fl.stop)
            pthread_cond_wait(&fl.c, &fl.m);
        if (fl.stop)
            break;
        unsigned long burst = fl.credit;
        fl.credit = 0;
        pthread_mutex_unlock(&fl.m);
        for (unsigned long b = 0; b < burst; b++, j++) {
            CHECK_EQ(px_wake(ids[j % (unsigned long)nwaiters]), 1);   /* posted */
            atomic_fetch_add(&fl.sent, 1);
        }
        pthread_mutex_lock(&fl.m);
    }
    pthread_mutex_unlock(&fl.m);
    return NULL;
}

static void flood_start(void)
{
    fl.on = 1;
    fl.stop = 0;
    fl.credit = 0;
    CHECK(pthread_create(&fl.t, NULL, flood_thread, NULL) == 0);
}

static void flood_stop(void)
{
    pthread_mutex_lock(&fl.m);
    fl.stop = 1;
    pthread_cond_signal(&fl.c);
    pthread_mutex_unlock(&fl.m);
    CHECK(pthread_join(fl.t, NULL) == 0);
    fl.on = 0;
}

/*
** From the main fiber, with the waiters parked: asks for four wakes a waiter,
** yields until two a waiter were handed over, then yields once more, so the
** scheduler takes them in (making every parked waiter ready) before the main
** fiber runs on to its release.  The rest of the burst lands during the
** release and the hand-overs.  Without a flood, nothing.
*/
static void flood_pass(void)
{
    if (!fl.on)
        return;
    unsigned long target = atomic_load(&fl.sent) + 2 * (unsigned long)nwaiters;
    pthread_mutex_lock(&fl.m);
    fl.credit += 4 * (unsigned long)nwaiters;
    pthread_cond_signal(&fl.c);
    pthread_mutex_unlock(&fl.m);
    int64_t until = px_now() + PX_TEST_TIMEOUT_NS;
    while (atomic_load(&fl.sent) < target) {
        CHECK(px_now() < until);
        CHECK_EQ(px_yield(), 0);
    }
    CHECK_EQ(px_yield(), 0);
}

/* -- the waiters and the main fiber ------------------------------------------ */

static void *waiter(void *arg)
{
    int i = (int)(intptr_t)arg;
    for (int r = 0; r < rounds; r++) {
        in_wait++;
        int res = k->wait(i);
        in_wait--;
        returned++;
        CHECK_EQ(res, 0);
    }
    done_w[i] = 1;
    finished++;
    return NULL;
}

/* Yields until every released wait returned and every unfinished waiter is in
** its wait again, queued (where the object can tell). */
static void settle(void)
{
    int64_t until = px_now() + PX_TEST_TIMEOUT_NS;
    for (;;) {
        int want = nwaiters - finished;
        if (returned == owed && in_wait == want && (k->queued == NULL || k->queued() == (size_t)want))
            return;
        CHECK(returned <= owed);                 /* no wait ended unreleased */
        CHECK(px_now() < until);
        CHECK_EQ(px_yield(), 0);
    }
}

static void release(void)
{
    owed += k->release();
}

static void start(px_fiber **w)
{
    in_wait = finished = 0;
    owed = returned = 0;
    memset(done_w, 0, sizeof done_w);
    k->arm();
    for (int i = 0; i < nwaiters; i++) {
        CHECK((w[i] = px_spawn(waiter, (void *)(intptr_t)i)) != NULL);
        ids[i] = px_fiber_id(w[i]);
    }
}

static void end(px_fiber **w)
{
    for (int i = 0; i < nwaiters; i++)
        finish(w[i]);
    CHECK_EQ(returned, (long)nwaiters * rounds);
    CHECK_EQ(owed, returned);
    k->disarm();
}

/*
** Same thread.  Each round wakes every waiter, lets it look and park again (it
** is still waiting, still queued, nothing ended), and then, alternately, wakes
** it again and releases before it ran, or releases and then wakes it (a
** joined fiber then ends while its joiner is ready already).
*/
static void *stray_main(void *arg)
{
    (void)arg;
    px_fiber *w[NW];
    start(w);
    for (int round = 0;; round++) {
        settle();
        if (finished == nwaiters)
            break;
        long before = returned;
        for (int i = 0; i < nwaiters; i++)
            CHECK_EQ(px_wake(ids[i]), !done_w[i]);   /* each one parked */
        CHECK_EQ(px_yield(), 0);
        CHECK_EQ(px_yield(), 0);
        settle();                                /* all back, still queued */
        CHECK_EQ(returned, before);              /* and none of them ended */
        if (round % 2 == 0) {
            for (int i = 0; i < nwaiters; i++)
                CHECK_EQ(px_wake(ids[i]), !done_w[i]);
            release();                           /* before the woken run */
        } else {
            release();
            for (int i = 0; i < nwaiters; i++)
                px_wake(ids[i]);                 /* 1 for those not handed over */
        }
    }
    end(w);
    return NULL;
}

static void *flood_main(void *arg)
{
    (void)arg;
    px_fiber *w[NW];
    start(w);
    flood_start();
    for (;;) {
        settle();
        if (finished == nwaiters)
            break;
        release();
    }
    flood_stop();
    end(w);
    return NULL;
}

static void run_stray(const kind *kd)
{
    k = kd;
    nwaiters = NS;
    rounds = STRAY_ROUNDS;
    CHECK_EQ(px_run(stray_main, NULL, NULL), 0);
}

static void run_flood(const kind *kd)
{
    k = kd;
    nwaiters = NW;
    rounds = FLOOD_ROUNDS;
    CHECK_EQ(px_run(flood_main, NULL, NULL), 0);
}

/* -- Mutex: the main fiber holds it; each wait is a lock and its section ---- */

static px_mutex *mx;
static int inside;
static long sections;

static void mutex_arm(void)
{
    CHECK((mx = px_mutex_new()) != NULL);
    CHECK_EQ(px_mutex_lock(mx), 0);
    sections = 0;
}

static int mutex_wait(int i)
{
    (void)i;
    int r = px_mutex_lock(mx);
    if (r != 0)
        return r;
    CHECK_EQ(px_mutex_owner(mx), px_self());
    CHECK(!inside);
    inside = 1;
    CHECK_EQ(px_yield(), 0);                     /* the others stay parked */
    inside = 0;
    sections++;
    CHECK_EQ(px_mutex_unlock(mx), 0);
    return 0;
}

/* Unlock hands it to the first waiter; the lock that follows queues behind
** every waiter, so it returns once each had its turn. */
static int mutex_release(void)
{
    int n = in_wait;
    flood_pass();
    CHECK_EQ(px_mutex_unlock(mx), 0);
    CHECK_EQ(px_mutex_lock(mx), 0);
    return n;
}

static size_t mutex_queued(void) { return px_mutex_waiters(mx); }

static void mutex_disarm(void)
{
    CHECK_EQ(sections, returned);
    CHECK_EQ(px_mutex_unlock(mx), 0);
    CHECK_EQ(px_mutex_free(mx), 0);
}

static const kind mutex_kind = { mutex_arm, mutex_wait, mutex_release, mutex_queued, mutex_disarm };

/* -- RwLock: the main fiber writes; even waiters read, odd ones write ------- */

static px_rwlock *rw;

static void rwlock_arm(void)
{
    CHECK((rw = px_rwlock_new()) != NULL);
    CHECK_EQ(px_rwlock_wrlock(rw), 0);
    sections = 0;
}

static int rwlock_wait(int i)
{
    int r;
    if (i % 2 == 0) {
        if ((r = px_rwlock_rdlock(rw)) != 0)
            return r;
        CHECK_EQ(px_rwlock_writer(rw), 0);
        CHECK_GE(px_rwlock_readers(rw), 1);
        sections++;
        CHECK_EQ(px_rwlock_rdunlock(rw), 0);
    } else {
        if ((r = px_rwlock_wrlock(rw)) != 0)
            return r;
        CHECK_EQ(px_rwlock_writer(rw), px_self());
        CHECK_EQ(px_rwlock_readers(rw), 0);
        sections++;
        CHECK_EQ(px_rwlock_wrunlock(rw), 0);
    }
    return 0;
}

static int rwlock_release(void)
{
    int n = in_wait;
    flood_pass();
    CHECK_EQ(px_rwlock_wrunlock(rw), 0);
    CHECK_EQ(px_rwlock_wrlock(rw), 0);           /* behind every waiter */
    return n;
}

static size_t rwlock_queued(void) { return px_rwlock_waiters(rw); }

static void rwlock_disarm(void)
{
    CHECK_EQ(sections, returned);
    CHECK_EQ(px_rwlock_wrunlock(rw), 0);
    CHECK_EQ(px_rwlock_free(rw), 0);
}

static const kind rwlock_kind = { rwlock_arm, rwlock_wait, rwlock_release, rwlock_queued, rwlock_disarm };

/* -- RwLock, readers only: the main fiber writes; its wrunlock admits them all */

static int rdlock_wait(int i)
{
    (void)i;
    int r = px_rwlock_rdlock(rw);
    if (r != 0)
        return r;
    CHECK_EQ(px_rwlock_writer(rw), 0);
    CHECK_GE(px_rwlock_readers(rw), 1);
    sections++;
    CHECK_EQ(px_rwlock_rdunlock(rw), 0);
    return 0;
}

static const kind rdlock_kind = { rwlock_arm, rdlock_wait, rwlock_release, rwlock_queued, rwlock_disarm };

/* -- WaitGroup: one job a round; done ends every wait ------------------------ */

static px_waitgroup *wg;
static long gen;             /* releases so far: a wait must see it move */

static void waitgroup_arm(void)
{
    CHECK((wg = px_waitgroup_new()) != NULL);
    CHECK_EQ(px_waitgroup_add(wg, 1), 0);
    gen = 0;
}

static int waitgroup_wait(int i)
{
    (void)i;
    long g0 = gen;
    int r = px_waitgroup_wait(wg);
    if (r == 0)
        CHECK(gen > g0);
    return r;
}

static int waitgroup_release(void)
{
    int n = in_wait;
    flood_pass();
    gen++;
    CHECK_EQ(px_waitgroup_done(wg), 0);
    CHECK_EQ(px_waitgroup_add(wg, 1), 0);        /* the next round's job */
    return n;
}

static void waitgroup_disarm(void)
{
    CHECK_EQ(px_waitgroup_done(wg), 0);
    CHECK_EQ(px_waitgroup_free(wg), 0);
}

static const kind waitgroup_kind = { waitgroup_arm, waitgroup_wait, waitgroup_release, NULL,
                                     waitgroup_disarm };

/* -- Barrier: the main fiber is the last of nwaiters + 1 parties ------------ */

static px_barrier *bar;

static void barrier_arm(void)
{
    CHECK((bar = px_barrier_new((size_t)nwaiters + 1)) != NULL);
}

static int barrier_wait(int i)
{
    (void)i;
    uint64_t p0 = px_barrier_phase(bar);
    int r = px_barrier_arrive_and_wait(bar);
    if (r == 0)
        CHECK_EQ(px_barrier_phase(bar), p0 + 1);
    return r;
}

static int barrier_release(void)
{
    int n = in_wait;
    flood_pass();
    CHECK_EQ(px_barrier_arrive_and_wait(bar), 1);   /* the last: no park */
    return n;
}

static size_t barrier_queued(void) { return px_barrier_waiting(bar); }

static void barrier_disarm(void)
{
    CHECK_EQ(px_barrier_phase(bar), (uint64_t)rounds);
    CHECK_EQ(px_barrier_free(bar), 0);
}

static const kind barrier_kind = { barrier_arm, barrier_wait, barrier_release, barrier_queued,
                                   barrier_disarm };

/* -- Once: a new one a round, run by the main fiber -------------------------- */

static px_once *onces[FLOOD_ROUNDS + 2];
static int nonces;

static void once_next(void)
{
    CHECK(nonces < FLOOD_ROUNDS + 2);
    CHECK((onces[nonces] = px_once_new()) != NULL);
    CHECK_EQ(px_once_begin(onces[nonces]), 1);   /* the main fiber runs it */
    nonces++;
}

static void once_arm(void)
{
    nonces = 0;
    once_next();
}

static int once_wait(int i)
{
    (void)i;
    px_once *o = onces[nonces - 1];
    int r = px_once_begin(o);
    if (r == 0)
        CHECK(px_once_done(o));
    return r;
}

static int once_release(void)
{
    int n = in_wait;
    flood_pass();
    CHECK_EQ(px_once_end(onces[nonces - 1]), 0);
    once_next();
    return n;
}

static void once_disarm(void)
{
    CHECK_EQ(px_once_end(onces[nonces - 1]), 0);
    for (int i = 0; i < nonces; i++)
        CHECK_EQ(px_once_free(onces[i]), 0);
}

static const kind once_kind = { once_arm, once_wait, once_release, NULL, once_disarm };

/* -- Semaphore: one unit a release ------------------------------------------- */

static px_sem *sem;
static long units_given, units_taken;

static void sem_arm(void)
{
    CHECK((sem = px_sem_new(0)) != NULL);
    units_given = units_taken = 0;
}

static int sem_wait(int i)
{
    (void)i;
    int r = px_sem_acquire(sem);
    if (r == 0)
        CHECK(++units_taken <= units_given);
    return r;
}

static int sem_release(void)
{
    flood_pass();
    units_given++;
    CHECK_EQ(px_sem_release(sem), 0);
    CHECK_EQ(px_sem_value(sem), 0);              /* the unit is a waiter's */
    return 1;
}

static size_t sem_queued(void) { return px_sem_waiters(sem); }

static void sem_disarm(void)
{
    CHECK_EQ(units_taken, units_given);
    CHECK_EQ(px_sem_value(sem), 0);
    CHECK_EQ(px_sem_free(sem), 0);
}

static const kind sem_kind = { sem_arm, sem_wait, sem_release, sem_queued, sem_disarm };

/* -- Event: set ends every wait, and says how many ------------------------- */

static px_event *ev;

static void event_arm(void)
{
    CHECK((ev = px_event_new()) != NULL);
    gen = 0;
}

static int event_wait(int i)
{
    (void)i;
    long g0 = gen;
    int r = px_event_wait(ev);
    if (r == 0)
        CHECK(gen > g0);
    return r;
}

static int event_release(void)
{
    int n = in_wait;
    flood_pass();
    gen++;
    CHECK_EQ(px_event_set(ev), n);               /* every waiter was woken */
    CHECK_EQ(px_event_clear(ev), 0);             /* the next round waits */
    return n;
}

static void event_disarm(void)
{
    CHECK_EQ(px_event_free(ev), 0);
}

static const kind event_kind = { event_arm, event_wait, event_release, NULL, event_disarm };

/* -- Channel: unbuffered; waiters receive, or waiters send ------------------- */

static px_chan *ch;
static long values_made, values_moved;
static unsigned char seen[NW * FLOOD_ROUNDS + 1];

static void chan_arm(void)
{
    CHECK((ch = px_chan_new(0)) != NULL);
    values_made = values_moved = 0;
    memset(seen, 0, sizeof seen);
}

/* Each value moves once, and only one that was made. */
static void moved(void *v)
{
    uintptr_t n = (uintptr_t)v;
    CHECK(n >= 1 && n <= (uintptr_t)values_made);
    CHECK(!seen[n]);
    seen[n] = 1;
    values_moved++;
}

static int recv_wait(int i)
{
    (void)i;
    void *v = NULL;
    int r = px_chan_recv(ch, &v);
    if (r == 0)
        moved(v);
    return r;
}

static int send_release(void)
{
    flood_pass();
    CHECK_EQ(px_chan_send(ch, (void *)(uintptr_t)++values_made), 0);
    return 1;
}

static int send_wait(int i)
{
    (void)i;
    return px_chan_send(ch, (void *)(uintptr_t)++values_made);
}

static int recv_release(void)
{
    void *v = NULL;
    flood_pass();
    CHECK_EQ(px_chan_recv(ch, &v), 0);
    moved(v);
    return 1;
}

static void chan_disarm(void)
{
    CHECK_EQ(values_moved, values_made);
    CHECK_EQ(px_chan_len(ch), 0);
    CHECK_EQ(px_chan_free(ch), 0);
}

static const kind recv_kind = { chan_arm, recv_wait, send_release, NULL, chan_disarm };
static const kind send_kind = { chan_arm, send_wait, recv_release, NULL, chan_disarm };

/* -- Join: each wait joins a new child, which ends when released ------------ */

static long child_gen;        /* releases of children so far */
static long child_from[NW];   /* child_gen when waiter i spawned its child */
static uint64_t child_ids[NW];

static void *child_body(void *arg)
{
    intptr_t i = (intptr_t)arg;
    while (child_gen == child_from[i])
        CHECK_EQ(px_park("child waits for its release", NULL, NULL), 0);
    return (void *)(i + 1);
}

static void join_arm(void)
{
    child_gen = 0;
}

static int join_wait(int i)
{
    child_from[i] = child_gen;
    px_fiber *c = px_spawn(child_body, (void *)(intptr_t)i);
    CHECK(c != NULL);
    child_ids[i] = px_fiber_id(c);
    void *res = NULL;
    int r = px_join(c, &res);
    if (r == 0)
        CHECK(res == (void *)(intptr_t)(i + 1));
    px_fiber_release(c);
    return r;
}

/* The children are made ready first, and the flood lands behind them: each
** child ends while its joiner may be ready already. */
static int join_release(void)
{
    int n = in_wait;
    child_gen++;
    for (int i = 0; i < nwaiters; i++)
        px_wake(child_ids[i]);
    flood_pass();
    return n;
}

static void join_disarm(void)
{
}

static const kind join_kind = { join_arm, join_wait, join_release, NULL, join_disarm };

/* -- a hosted fiber (its host cannot switch inside C: PX_EYIELD, re-call) --- */

static px_sched *hs;
static px_fiber *hosted;
static int host_calls, host_result = 1;

static int host_resume(void *ctx)
{
    (void)ctx;
    host_calls++;
    int r = px_sem_acquire(sem);                 /* the first call, and each re-call */
    if (r == PX_EYIELD)
        return 0;
    host_result = r;
    return PX_HOST_DONE;
}

static void *hosted_main(void *arg)
{
    (void)arg;
    px_host_ops ops = { host_resume, NULL, NULL };
    CHECK((hosted = px_spawn_hosted(hs, &ops, NULL)) != NULL);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(host_calls, 1);                     /* it waits */
    CHECK_EQ(px_sem_waiters(sem), 1);
    CHECK_EQ(px_wake(px_fiber_id(hosted)), 1);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(host_calls, 2);                     /* it called again: PX_EYIELD, */
    CHECK_EQ(px_sem_waiters(sem), 1);            /* still waiting, still queued */
    CHECK_EQ(px_wake(px_fiber_id(hosted)), 1);
    CHECK_EQ(px_sem_release(sem), 0);            /* before it runs */
    CHECK_EQ(px_sem_value(sem), 0);              /* the unit is its own */
    finish(hosted);
    CHECK_EQ(host_calls, 3);
    CHECK_EQ(host_result, 0);
    return NULL;
}

/* -- the specifications ---------------------------------------------------------- */

SPEC(a_stray_wake_then_an_unlock_hands_the_mutex_over)      { run_stray(&mutex_kind); }
SPEC(a_stray_wake_then_an_unlock_hands_the_rwlock_over)     { run_stray(&rwlock_kind); }
SPEC(a_stray_wake_then_a_wrunlock_admits_the_readers)       { run_stray(&rdlock_kind); }
SPEC(a_stray_wake_then_done_ends_a_waitgroup_wait)          { run_stray(&waitgroup_kind); }
SPEC(a_stray_wake_then_the_last_arrival_releases_a_barrier) { run_stray(&barrier_kind); }
SPEC(a_stray_wake_then_the_end_releases_a_once_wait)        { run_stray(&once_kind); }
SPEC(a_stray_wake_then_a_release_hands_a_sem_unit_over)     { run_stray(&sem_kind); }
SPEC(a_stray_wake_then_a_set_ends_an_event_wait)            { run_stray(&event_kind); }
SPEC(a_stray_wake_then_a_send_hands_the_value_over)         { run_stray(&recv_kind); }
SPEC(a_stray_wake_then_a_recv_takes_the_sent_value)         { run_stray(&send_kind); }
SPEC(a_stray_wake_then_the_end_of_the_joined_ends_a_join)   { run_stray(&join_kind); }

SPEC(a_hosted_waiter_woken_stray_calls_again_and_still_gets_the_unit)
{
    CHECK((sem = px_sem_new(0)) != NULL);
    CHECK((hs = px_sched_new(NULL)) != NULL);
    CHECK_EQ(px_sched_post(hs, hosted_main, NULL), 0);
    CHECK_EQ(px_sched_run(hs), 0);
    px_sched_free(hs);
    CHECK_EQ(px_sem_free(sem), 0);
}

SPEC(a_wake_flood_from_another_thread_ends_no_mutex_lock)      { run_flood(&mutex_kind); }
SPEC(a_wake_flood_from_another_thread_ends_no_rwlock_wait)     { run_flood(&rwlock_kind); }
SPEC(a_wake_flood_from_another_thread_ends_no_waitgroup_wait)  { run_flood(&waitgroup_kind); }
SPEC(a_wake_flood_from_another_thread_ends_no_barrier_wait)    { run_flood(&barrier_kind); }
SPEC(a_wake_flood_from_another_thread_ends_no_once_wait)       { run_flood(&once_kind); }
SPEC(a_wake_flood_from_another_thread_ends_no_sem_acquire)     { run_flood(&sem_kind); }
SPEC(a_wake_flood_from_another_thread_ends_no_event_wait)      { run_flood(&event_kind); }
SPEC(a_wake_flood_from_another_thread_ends_no_chan_recv)       { run_flood(&recv_kind); }
SPEC(a_wake_flood_from_another_thread_ends_no_chan_send)       { run_flood(&send_kind); }
SPEC(a_wake_flood_from_another_thread_ends_no_join)            { run_flood(&join_kind); }

SPECS(a_stray_wake_does_not_end_a_mutex_lock,
      a_stray_wake_does_not_end_a_join,
      a_stray_wake_does_not_end_a_gate_take,
      a_stray_wake_does_not_end_a_sleep,
      a_stray_wake_of_an_ended_or_unknown_fiber_does_nothing,
      a_joiner_woken_as_its_fiber_ends_returns_once,
      a_stray_wake_then_an_unlock_hands_the_mutex_over,
      a_stray_wake_then_an_unlock_hands_the_rwlock_over,
      a_stray_wake_then_a_wrunlock_admits_the_readers,
      a_stray_wake_then_done_ends_a_waitgroup_wait,
      a_stray_wake_then_the_last_arrival_releases_a_barrier,
      a_stray_wake_then_the_end_releases_a_once_wait,
      a_stray_wake_then_a_release_hands_a_sem_unit_over,
      a_stray_wake_then_a_set_ends_an_event_wait,
      a_stray_wake_then_a_send_hands_the_value_over,
      a_stray_wake_then_a_recv_takes_the_sent_value,
      a_stray_wake_then_the_end_of_the_joined_ends_a_join,
      a_hosted_waiter_woken_stray_calls_again_and_still_gets_the_unit,
      a_wake_flood_from_another_thread_ends_no_mutex_lock,
      a_wake_flood_from_another_thread_ends_no_rwlock_wait,
      a_wake_flood_from_another_thread_ends_no_waitgroup_wait,
      a_wake_flood_from_another_thread_ends_no_barrier_wait,
      a_wake_flood_from_another_thread_ends_no_once_wait,
      a_wake_flood_from_another_thread_ends_no_sem_acquire,
      a_wake_flood_from_another_thread_ends_no_event_wait,
      a_wake_flood_from_another_thread_ends_no_chan_recv,
      a_wake_flood_from_another_thread_ends_no_chan_send,
      a_wake_flood_from_another_thread_ends_no_join)

