/*
** rwlock.c -- the conformance specification of px_rwlock.
**
** Each SPEC is one documented behaviour.  Fibers synchronize on events (the
** number of waiters and readers, a fiber's end), never on sleeps.
*/
#include <string.h>

#include "sync_kit.h"

#define SYNC_EXAMPLE_NO_MAIN
#include "sync_rwlock.c"   /* docs/examples: run below as a spec */

static px_rwlock *L;
static char logbuf[128];                         /* what the fibers did, in order */
static int crowd_seen;
static px_token *T;        /* each run's own (run_with_token) */

static void run(px_fiber_fn main)
{
    logbuf[0] = 0;
    crowd_seen = 0;
    L = px_rwlock_new();
    CHECK(L != NULL);
    run_with_token(main, &T);
    check_rwlock_unheld(L);
    CHECK_EQ(px_rwlock_waiters(L), 0);
    CHECK_EQ(px_rwlock_free(L), 0);
}

static void note(const char *s)
{
    CHECK(strlen(logbuf) + strlen(s) < sizeof logbuf);
    strcat(logbuf, s);
}

static int last;                                 /* a helper fiber's result */

static void *reader(void *arg)
{
    last = px_rwlock_rdlock(L);
    if (arg)
        note(arg);
    if (last == 0 || last == PX_EOWNERDEAD)
        CHECK_EQ(px_rwlock_rdunlock(L), 0);
    return NULL;
}

static void *writer(void *arg)
{
    last = px_rwlock_wrlock(L);
    if (arg)
        note(arg);
    if (last == 0 || last == PX_EOWNERDEAD)
        CHECK_EQ(px_rwlock_wrunlock(L), 0);
    return NULL;
}

static int rdlock_body(void *arg) { (void)arg; return px_rwlock_rdlock(L); }
static int wrlock_body(void *arg) { (void)arg; return px_rwlock_wrlock(L); }

/* -- sharing and exclusion ---------------------------------------------------- */

/* Takes a read hold and keeps it until `arg` fibers held read holds at once. */
static void *hold_read(void *arg)
{
    size_t crowd = (size_t)(uintptr_t)arg;
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    YIELD_UNTIL(crowd_seen || px_rwlock_readers(L) == crowd);
    crowd_seen = 1;
    CHECK_EQ(px_rwlock_writer(L), 0);
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    return NULL;
}

static void *readers_main(void *arg)
{
    (void)arg;
    spawn_join_all(hold_read, (void *)3, 3);     /* all three at once */
    return NULL;
}

SPEC(any_number_of_readers_hold_it_together)
{
    run(readers_main);
}

static void *exclusion_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_wrlock(L), 0);
    CHECK_EQ(px_rwlock_writer(L), px_self());
    px_fiber *r = px_spawn(reader, "r");
    px_fiber *w = px_spawn(writer, "w");
    YIELD_UNTIL(px_rwlock_waiters(L) == 2);      /* both wait for the writer */
    CHECK_EQ(px_rwlock_readers(L), 0);
    CHECK(strcmp(logbuf, "") == 0);
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    join(r);
    join(w);
    CHECK(strcmp(logbuf, "rw") == 0);            /* FIFO */
    return NULL;
}

SPEC(a_writer_excludes_readers_and_other_writers)
{
    run(exclusion_main);
}

/* A+ A- W+ W- R+ R-: reader A holds; writer W arrives and waits; reader R
** arrives while W waits and must queue behind it. */
static void *reader_a(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    note("A+");
    YIELD_UNTIL(px_rwlock_waiters(L) == 2);
    note("A-");
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    return NULL;
}

static void *writer_w(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_wrlock(L), 0);
    note("W+");
    for (int i = 0; i < 10; i++)
        CHECK_EQ(px_yield(), 0);                 /* R would slip in here */
    note("W-");
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    return NULL;
}

static void *reader_r(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    note("R+");
    note("R-");
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    return NULL;
}

static void *preference_main(void *arg)
{
    (void)arg;
    px_fiber *a = px_spawn(reader_a, NULL);
    YIELD_UNTIL(px_rwlock_readers(L) == 1);
    px_fiber *w = px_spawn(writer_w, NULL);
    YIELD_UNTIL(px_rwlock_waiters(L) == 1);
    px_fiber *r = px_spawn(reader_r, NULL);
    CHECK_EQ(px_rwlock_tryrdlock(L), PX_EBUSY);  /* no new reader while W waits */
    join(a);
    join(w);
    join(r);
    CHECK(strcmp(logbuf, "A+A-W+W-R+R-") == 0);
    return NULL;
}

SPEC(writer_preference_orders_a_in_a_out_w_in_w_out_r_in_r_out)
{
    run(preference_main);
}

static void *batch_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_wrlock(L), 0);
    px_fiber *f[5];
    f[0] = px_spawn(reader, NULL);
    f[1] = px_spawn(reader, NULL);
    f[2] = px_spawn(reader, NULL);
    f[3] = px_spawn(writer, NULL);               /* and one writer behind them */
    f[4] = px_spawn(reader, NULL);
    YIELD_UNTIL(px_rwlock_waiters(L) == 5);
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    /* The three readers at the head hold it before any of them runs; the
    ** writer and the reader behind it still wait. */
    CHECK_EQ(px_rwlock_readers(L), 3);
    CHECK_EQ(px_rwlock_waiters(L), 2);
    join_all(f, 5);
    return NULL;
}

SPEC(readers_queued_behind_a_writer_are_admitted_together)
{
    run(batch_main);
}

static void *writers_fifo_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    px_fiber *f[3];
    const char *names[3] = { "1", "2", "3" };
    for (int i = 0; i < 3; i++) {
        f[i] = px_spawn(writer, (void *)names[i]);
        YIELD_UNTIL(px_rwlock_waiters(L) == (size_t)i + 1);
    }
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    CHECK_EQ(px_rwlock_writer(L), px_fiber_id(f[0]));   /* handed over directly */
    join_all(f, 3);
    CHECK(strcmp(logbuf, "123") == 0);
    return NULL;
}

SPEC(writers_are_served_in_fifo_order_by_direct_hand_off)
{
    run(writers_fifo_main);
}

/* Five writers queue behind main's write lock, then five readers behind a
** fresh one: one wrunlock hands it on, writer to writer in the order they
** came (each passing it on); and admits the readers, who run in that order. */
static void *fifo_main(void *arg)
{
    (void)arg;
    const char *names[5] = { "a", "b", "c", "d", "e" };
    px_fiber *f[5];
    for (px_fiber_fn fn = writer; fn; fn = fn == writer ? reader : NULL) {
        logbuf[0] = 0;
        CHECK_EQ(px_rwlock_wrlock(L), 0);
        for (int i = 0; i < 5; i++) {
            f[i] = px_spawn(fn, (void *)names[i]);
            YIELD_UNTIL(px_rwlock_waiters(L) == (size_t)i + 1);
        }
        CHECK_EQ(px_rwlock_wrunlock(L), 0);
        if (fn == writer)
            CHECK_EQ(px_rwlock_writer(L), px_fiber_id(f[0]));
        else
            CHECK_EQ(px_rwlock_readers(L), 5);
        join_all(f, 5);
        CHECK(strcmp(logbuf, "abcde") == 0);
    }
    return NULL;
}

SPEC(hands_off_in_fifo_order)
{
    run(fifo_main);
}

/* -- holds of one fiber ---------------------------------------------------------- */

static void *reentrant_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    px_fiber *w = px_spawn(writer, NULL);
    YIELD_UNTIL(px_rwlock_waiters(L) == 1);
    /* A writer waits, yet a fiber holding read holds gets more at once. */
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    CHECK_EQ(px_rwlock_tryrdlock(L), 0);
    CHECK_EQ(px_rwlock_readers(L), 1);           /* one fiber, three holds */
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    CHECK_EQ(px_rwlock_writer(L), 0);            /* still one hold left */
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    CHECK_EQ(px_rwlock_writer(L), px_fiber_id(w));
    CHECK_EQ(px_rwlock_rdunlock(L), PX_EPERM);
    join(w);
    return NULL;
}

SPEC(read_side_is_reentrant_even_with_a_writer_waiting)
{
    run(reentrant_main);
}

static void *writer_reads_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_wrlock(L), 0);
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    CHECK_EQ(px_rwlock_tryrdlock(L), 0);
    CHECK_EQ(px_rwlock_readers(L), 1);
    CHECK_EQ(px_rwlock_wrlock(L), PX_EDEADLK);   /* not reentrant on the write side */
    CHECK_EQ(px_rwlock_trywrlock(L), PX_EDEADLK);
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    CHECK_EQ(px_rwlock_writer(L), px_self());
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    CHECK_EQ(px_rwlock_wrunlock(L), PX_EPERM);
    return NULL;
}

SPEC(the_writer_may_take_read_holds_but_not_a_second_write_lock)
{
    run(writer_reads_main);
}

static void *upgrade_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    CHECK_EQ(px_rwlock_wrlock(L), PX_EDEADLK);
    CHECK_EQ(px_rwlock_trywrlock(L), PX_EDEADLK);
    CHECK_EQ(px_rwlock_waiters(L), 0);           /* refused without parking */
    CHECK_EQ(px_rwlock_writer(L), 0);
    /* Also with another reader in: still refused at once. */
    px_fiber *r = px_spawn(hold_read, (void *)3);   /* holds until we release */
    YIELD_UNTIL(px_rwlock_readers(L) == 2);
    CHECK_EQ(px_rwlock_wrlock(L), PX_EDEADLK);
    CHECK_EQ(px_rwlock_waiters(L), 0);
    crowd_seen = 1;
    join(r);
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    CHECK_EQ(px_rwlock_wrlock(L), 0);            /* with no read hold it is fine */
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    return NULL;
}

SPEC(upgrade_from_read_to_write_is_edeadlk_without_parking)
{
    run(upgrade_main);
}

static void *downgrade_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_wrlock(L), 0);
    px_fiber *r = px_spawn(reader, "r");
    YIELD_UNTIL(px_rwlock_waiters(L) == 1);
    px_fiber *w = px_spawn(writer, "w");
    YIELD_UNTIL(px_rwlock_waiters(L) == 2);
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    CHECK_EQ(px_rwlock_wrunlock(L), 0);          /* downgrade: the read hold stays */
    CHECK_EQ(px_rwlock_writer(L), 0);
    CHECK_EQ(px_rwlock_readers(L), 2);           /* us, and the reader let in */
    join(r);
    CHECK(strcmp(logbuf, "r") == 0);
    CHECK_EQ(px_rwlock_waiters(L), 1);           /* the writer waits for us */
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    CHECK_EQ(px_rwlock_writer(L), px_fiber_id(w));
    join(w);
    CHECK(strcmp(logbuf, "rw") == 0);
    return NULL;
}

SPEC(wrunlock_keeps_the_writers_read_holds_as_a_downgrade)
{
    run(downgrade_main);
}

static int tried;

static void *try_both(void *arg)
{
    (void)arg;
    tried = px_rwlock_tryrdlock(L) * 100 + px_rwlock_trywrlock(L);
    return NULL;
}

static void *try_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_tryrdlock(L), 0);
    px_fiber *w = px_spawn(writer, NULL);
    YIELD_UNTIL(px_rwlock_waiters(L) == 1);
    /* A writer waits for our read hold: a newcomer may neither read nor write. */
    join(px_spawn(try_both, NULL));
    CHECK_EQ(tried, PX_EBUSY * 100 + PX_EBUSY);
    /* Released: the writer owns it before it runs, and try* cannot pass it. */
    px_fiber *t = px_spawn(try_both, NULL);
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    CHECK_EQ(px_rwlock_writer(L), px_fiber_id(w));
    join(t);
    CHECK_EQ(tried, PX_EBUSY * 100 + PX_EBUSY);
    CHECK_EQ(px_rwlock_waiters(L), 0);           /* try* never parked */
    join(w);
    CHECK_EQ(px_rwlock_trywrlock(L), 0);
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    return NULL;
}

SPEC(try_forms_never_park_and_never_pass_a_queued_waiter)
{
    run(try_main);
}

static int unlocked;

static void *foreign_unlocks(void *arg)
{
    (void)arg;
    unlocked = px_rwlock_rdunlock(L) * 100 + px_rwlock_wrunlock(L);
    return NULL;
}

static void *eperm_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_rdunlock(L), PX_EPERM);
    CHECK_EQ(px_rwlock_wrunlock(L), PX_EPERM);
    CHECK_EQ(px_rwlock_wrlock(L), 0);
    CHECK_EQ(px_rwlock_rdunlock(L), PX_EPERM);   /* the write lock is not a read hold */
    join(px_spawn(foreign_unlocks, NULL));
    CHECK_EQ(unlocked, PX_EPERM * 100 + PX_EPERM);
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    join(px_spawn(foreign_unlocks, NULL));
    CHECK_EQ(unlocked, PX_EPERM * 100 + PX_EPERM);
    CHECK_EQ(px_rwlock_readers(L), 1);           /* nothing changed */
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    return NULL;
}

SPEC(releasing_a_hold_the_caller_does_not_have_is_eperm)
{
    run(eperm_main);
}

/* -- interrupted waits ------------------------------------------------------------ */

static int timed_result;

static void *timed_writer(void *arg)
{
    (void)arg;
    timed_result = px_with_timeout(PX_MSEC(20), wrlock_body, NULL);
    return NULL;
}

static void *timed_writer_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    px_fiber *w = px_spawn(timed_writer, NULL);
    YIELD_UNTIL(px_rwlock_waiters(L) == 1);
    px_fiber *r = px_spawn(hold_read, (void *)3);   /* queues behind the writer */
    YIELD_UNTIL(px_rwlock_waiters(L) == 2);
    px_fiber *r2 = px_spawn(hold_read, (void *)3);
    YIELD_UNTIL(px_rwlock_waiters(L) == 3);
    join(w);                                     /* it gave up ... */
    CHECK_EQ(timed_result, PX_ETIMEDOUT);
    /* ... and the readers it held up came in. */
    CHECK_EQ(px_rwlock_waiters(L), 0);
    join(r);
    join(r2);
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    return NULL;
}

SPEC(timed_out_writer_leaves_no_waiter_and_lets_the_readers_behind_it_in)
{
    run(timed_writer_main);
}

static cancel_call cancelled;      /* the lock a spec's scope interrupts */

static void *race_writer_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_wrlock(L), 0);
    cancelled = (cancel_call){ .token = T, .body = wrlock_body };
    px_fiber *c = px_spawn(cancellable, &cancelled);
    YIELD_UNTIL(px_rwlock_waiters(L) == 1);
    px_fiber *r1 = px_spawn(reader, NULL);
    px_fiber *r2 = px_spawn(reader, NULL);
    YIELD_UNTIL(px_rwlock_waiters(L) == 3);
    CHECK_EQ(px_token_cancel(T), 1);             /* c interrupted, still queued */
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    CHECK_EQ(px_rwlock_writer(L), 0);            /* past c, which is leaving ... */
    CHECK_EQ(px_rwlock_readers(L), 2);           /* ... to the readers behind it */
    CHECK_EQ(px_rwlock_waiters(L), 0);
    join(c);
    CHECK_EQ(cancelled.result, PX_ECANCELED);
    join(r1);
    CHECK_EQ(last, 0);
    join(r2);
    CHECK_EQ(last, 0);
    return NULL;
}

SPEC(wrunlock_right_after_an_interrupted_writer_goes_past_it_to_the_readers)
{
    run(race_writer_main);
}

static void *race_reader_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_wrlock(L), 0);
    cancelled = (cancel_call){ .token = T, .body = rdlock_body };
    px_fiber *c = px_spawn(cancellable, &cancelled);
    YIELD_UNTIL(px_rwlock_waiters(L) == 1);
    px_fiber *w = px_spawn(writer, NULL);
    YIELD_UNTIL(px_rwlock_waiters(L) == 2);
    CHECK_EQ(px_token_cancel(T), 1);
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    CHECK_EQ(px_rwlock_readers(L), 0);           /* past c, which is leaving, */
    CHECK_EQ(px_rwlock_writer(L), px_fiber_id(w));   /* to the writer behind it */
    CHECK_EQ(px_rwlock_waiters(L), 0);
    join(c);
    CHECK_EQ(cancelled.result, PX_ECANCELED);
    join(w);
    CHECK_EQ(last, 0);
    return NULL;
}

SPEC(wrunlock_right_after_an_interrupted_reader_goes_past_it_to_the_writer)
{
    run(race_reader_main);
}

/* -- owner death --------------------------------------------------------------------- */

/* Takes the lock and ends holding it once `arg` fibers wait. */
static void *write_and_end(void *arg)
{
    CHECK_EQ(px_rwlock_wrlock(L), 0);
    CHECK_EQ(px_rwlock_rdlock(L), 0);            /* and a read hold, for good measure */
    YIELD_UNTIL(px_rwlock_waiters(L) == (size_t)(uintptr_t)arg);
    return NULL;
}

static void *read_and_end(void *arg)
{
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    CHECK_EQ(px_rwlock_rdlock(L), 0);            /* three holds */
    YIELD_UNTIL(px_rwlock_waiters(L) == (size_t)(uintptr_t)arg);
    return NULL;
}

static void *dead_writer_main(void *arg)
{
    (void)arg;
    px_fiber *d = px_spawn(write_and_end, (void *)1);
    YIELD_UNTIL(px_rwlock_writer(L) == px_fiber_id(d));
    px_fiber *w = px_spawn(writer, NULL);
    join(d);                                     /* ended holding both */
    join(w);                                     /* handed over at the death */
    CHECK_EQ(last, PX_EOWNERDEAD);
    CHECK_EQ(px_rwlock_wrlock(L), 0);            /* the new writer repaired it */
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    /* Taken later: no waiter at the death. */
    join(px_spawn(write_and_end, (void *)0));
    CHECK_EQ(px_rwlock_writer(L), 0);
    CHECK_EQ(px_rwlock_readers(L), 0);
    CHECK_EQ(px_rwlock_trywrlock(L), PX_EOWNERDEAD);
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    CHECK_EQ(px_rwlock_trywrlock(L), 0);
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    return NULL;
}

SPEC(dead_writer_releases_its_holds_and_the_next_writer_gets_eownerdead)
{
    run(dead_writer_main);
}

/* Read holds after the death are told (family.c, owner_death); so is the
** writer that takes it, which repairs it. */
static void *dead_writer_readers_main(void *arg)
{
    (void)arg;
    join(px_spawn(write_and_end, (void *)0));
    CHECK_EQ(px_rwlock_rdlock(L), PX_EOWNERDEAD);
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    CHECK_EQ(px_rwlock_wrlock(L), PX_EOWNERDEAD);
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    CHECK_EQ(px_rwlock_rdlock(L), 0);            /* repaired */
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    return NULL;
}

SPEC(readers_after_a_dead_writer_get_eownerdead_until_a_writer_takes_it)
{
    run(dead_writer_readers_main);
}

static void *dead_reader_main(void *arg)
{
    (void)arg;
    px_fiber *d = px_spawn(read_and_end, (void *)1);
    YIELD_UNTIL(px_rwlock_readers(L) == 1);
    px_fiber *w = px_spawn(writer, NULL);
    join(d);                                     /* ended with three read holds */
    join(w);
    CHECK_EQ(last, 0);                           /* a reader changed nothing */
    join(px_spawn(read_and_end, (void *)0));
    CHECK_EQ(px_rwlock_readers(L), 0);
    CHECK_EQ(px_rwlock_wrlock(L), 0);
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    return NULL;
}

SPEC(dead_reader_releases_all_its_read_holds)
{
    run(dead_reader_main);
}

static void *newcomer(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_readers(L), 0);
    CHECK_EQ(px_rwlock_rdunlock(L), PX_EPERM);   /* holds nothing */
    CHECK_EQ(px_rwlock_wrunlock(L), PX_EPERM);
    int r = px_rwlock_wrlock(L);                 /* not an upgrade: no EDEADLK */
    CHECK(r == 0 || r == PX_EOWNERDEAD);
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    return NULL;
}

static void *ids_main(void *arg)
{
    (void)arg;
    join(px_spawn(read_and_end, (void *)0));
    join(px_spawn(write_and_end, (void *)0));
    for (int i = 0; i < 64; i++)                 /* on recycled fiber records */
        join(px_spawn(newcomer, NULL));
    return NULL;
}

SPEC(a_fiber_that_once_held_it_is_never_mistaken_for_a_new_fiber)
{
    run(ids_main);
}

/* -- misuse, introspection, free, reports -------------------------------------------- */

static px_mutex *Mx;
static uint64_t rd_id, wr_id, late_id;

/* rd holds a read hold and waits for the mutex; wr holds the mutex and
** waits for the write lock; late waits behind wr for a read hold. */
static void *stuck_reader(void *arg)
{
    (void)arg;
    rd_id = px_self();
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    YIELD_UNTIL(px_mutex_owner(Mx) != 0);
    px_mutex_lock(Mx);
    return NULL;
}

static void *stuck_writer(void *arg)
{
    (void)arg;
    wr_id = px_self();
    CHECK_EQ(px_mutex_lock(Mx), 0);
    YIELD_UNTIL(px_rwlock_readers(L) == 1);
    px_rwlock_wrlock(L);
    return NULL;
}

static void *stuck_late(void *arg)
{
    (void)arg;
    late_id = px_self();
    YIELD_UNTIL(px_rwlock_waiters(L) == 1 && px_mutex_waiters(Mx) == 1);
    px_rwlock_rdlock(L);
    return NULL;
}

SPEC(deadlock_report_names_readers_and_writer_and_prints_the_cycle)
{
    L = px_rwlock_new();
    Mx = px_mutex_new();
    px_sched *s = run_to_deadlock((px_fiber_fn[]){ stuck_reader, stuck_writer, stuck_late,
                                                   NULL });
    check_has("fiber %llu: parked on \"RwLock write lock\", waits on rwlock@%p held by fiber %llu\n",
              (unsigned long long)px_fiber_number(wr_id), (void *)L, (unsigned long long)px_fiber_number(rd_id));
    check_has("fiber %llu: parked on \"RwLock read lock\", waits on rwlock@%p held by fiber %llu\n",
              (unsigned long long)px_fiber_number(late_id), (void *)L, (unsigned long long)px_fiber_number(rd_id));
    check_has("-> rwlock@%p (\"RwLock write lock\") held by fiber %llu", (void *)L,
              (unsigned long long)px_fiber_number(rd_id));
    check_has("-> mutex@%p (\"Mutex lock\") held by fiber %llu", (void *)Mx,
              (unsigned long long)px_fiber_number(wr_id));
    /* Introspection off-fiber. */
    CHECK_EQ(px_rwlock_readers(L), 1);
    CHECK_EQ(px_rwlock_writer(L), 0);
    CHECK_EQ(px_rwlock_waiters(L), 2);
    CHECK_EQ(px_rwlock_free(L), PX_EBUSY);
    px_sched_free(s);                            /* discards holds and waits */
    CHECK_EQ(px_rwlock_readers(L), 0);
    CHECK_EQ(px_rwlock_waiters(L), 0);
    CHECK_EQ(px_rwlock_free(L), 0);
    CHECK_EQ(px_mutex_free(Mx), 0);
}

static int free_read, free_write, free_waited;

static void *free_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    free_read = px_rwlock_free(L);
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    CHECK_EQ(px_rwlock_wrlock(L), 0);
    free_write = px_rwlock_free(L);
    px_fiber *r = px_spawn(reader, NULL);
    YIELD_UNTIL(px_rwlock_waiters(L) == 1);
    CHECK_EQ(px_rwlock_wrunlock(L), 0);
    free_waited = px_rwlock_free(L);             /* held by the admitted reader */
    join(r);
    return NULL;
}

SPEC(free_refuses_a_held_or_waited_on_rwlock_with_ebusy)
{
    run(free_main);
    CHECK_EQ(free_read, PX_EBUSY);
    CHECK_EQ(free_write, PX_EBUSY);
    CHECK_EQ(free_waited, PX_EBUSY);
}

/* -- a randomized soak ------------------------------------------------------------ */

/* 24 fibers take read holds (sometimes reentrant), write locks and a mutex at
** random, under random short timeouts, holding them across yields, and check
** the exclusion invariants at every step; at the end nothing is held or
** queued. */
static px_mutex *SM;
static int in_write, in_read, in_mutex;
static long soak_ops, soak_timeouts, soak_waits;

static int soak_rd(void *arg) { (void)arg; return px_rwlock_rdlock(L); }
static int soak_wr(void *arg) { (void)arg; return px_rwlock_wrlock(L); }
static int soak_mx(void *arg) { (void)arg; return px_mutex_lock(SM); }

static int bounded(uint64_t *rng, px_scope_fn body)
{
    soak_waits += px_rwlock_writer(L) != 0 || px_rwlock_waiters(L) != 0
                  || px_mutex_owner(SM) != 0;
    int r;
    if (rng_next(rng) % 4 == 0)
        r = body(NULL);                          /* unbounded */
    else
        r = px_with_timeout(PX_USEC(rng_next(rng) % 300), body, NULL);
    soak_timeouts += r == PX_ETIMEDOUT;
    return r;
}

static void hold_for(uint64_t *rng)
{
    if (rng_next(rng) % 8 == 0)
        CHECK_EQ(px_sleep(PX_USEC(50)), 0);      /* long enough for timeouts to fire */
    for (uint64_t n = rng_next(rng) % 3; n > 0; n--)
        CHECK_EQ(px_yield(), 0);
}

static void soak_step(uint64_t *rng)
{
    int r;
    switch (rng_next(rng) % 3) {
    case 0:
        if ((r = bounded(rng, soak_rd)) != 0) {
            CHECK(r == PX_ETIMEDOUT);
            return;
        }
        CHECK_EQ(in_write, 0);
        in_read++;
        if (rng_next(rng) % 2)
            CHECK_EQ(px_rwlock_rdlock(L), 0);    /* reentrant: at once */
        else
            CHECK_EQ(px_rwlock_tryrdlock(L), 0);
        CHECK_EQ(px_rwlock_wrlock(L), PX_EDEADLK);
        hold_for(rng);
        CHECK_EQ(in_write, 0);
        in_read--;
        CHECK_EQ(px_rwlock_rdunlock(L), 0);
        CHECK_EQ(px_rwlock_rdunlock(L), 0);
        return;
    case 1:
        if ((r = bounded(rng, soak_wr)) != 0) {
            CHECK(r == PX_ETIMEDOUT);
            return;
        }
        CHECK(in_write == 0 && in_read == 0);
        CHECK_EQ(px_rwlock_readers(L), 0);
        in_write = 1;
        hold_for(rng);
        CHECK(in_read == 0);
        in_write = 0;
        CHECK_EQ(px_rwlock_wrunlock(L), 0);
        return;
    default:
        if ((r = bounded(rng, soak_mx)) != 0) {
            CHECK(r == PX_ETIMEDOUT);
            return;
        }
        CHECK_EQ(in_mutex, 0);
        in_mutex = 1;
        CHECK_EQ(px_mutex_owner(SM), px_self());
        hold_for(rng);
        in_mutex = 0;
        CHECK_EQ(px_mutex_unlock(SM), 0);
    }
}

static void *soaker(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg;
    for (int i = 0; i < 1000; i++) {
        soak_step(&rng);
        soak_ops++;
        if (rng_next(&rng) % 2)
            CHECK_EQ(px_yield(), 0);
    }
    return NULL;
}

static void *soak_main(void *arg)
{
    (void)arg;
    px_fiber *f[24];
    for (uintptr_t i = 0; i < 24; i++)
        f[i] = px_spawn(soaker, (void *)(i * 7919 + 1));
    join_all(f, 24);
    CHECK_EQ(soak_ops, 24 * 1000);
    printf("%ld operations, %ld found it busy, %ld timed out\n", soak_ops, soak_waits,
           soak_timeouts);
    CHECK(soak_timeouts > 0);
    CHECK_EQ(px_mutex_owner(SM), 0);
    CHECK_EQ(px_mutex_waiters(SM), 0);
    return NULL;
}

SPEC(random_locking_under_random_timeouts_keeps_exclusion_and_leaves_nothing_queued)
{
    SM = px_mutex_new();
    run(soak_main);                              /* checks L is idle at the end */
    CHECK_EQ(px_mutex_free(SM), 0);
}

/* -- two schedulers -------------------------------------------------------- */

static px_latch read_held, stranger_done;

/* Another thread's run holds a read hold and blocks its thread meanwhile. */
static void *home_reader(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_rdlock(L), 0);
    ev_set(&read_held);
    EV_WAIT(&stranger_done, 1);
    CHECK_EQ(px_rwlock_rdunlock(L), 0);
    return NULL;
}

static void *home_thread(void *arg)
{
    (void)arg;
    CHECK_EQ(px_run(home_reader, NULL, NULL), 0);
    return NULL;
}

/* A read hold beside another scheduler's readers would let that scheduler's
** writer wait for this one's reader: refused, like every lock that would
** wait; the try forms that would fail anyway stay PX_EBUSY. */
static void *stranger(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_rdlock(L), PX_ETHREAD);
    CHECK_EQ(px_rwlock_tryrdlock(L), PX_ETHREAD);
    CHECK_EQ(px_rwlock_wrlock(L), PX_ETHREAD);
    CHECK_EQ(px_rwlock_trywrlock(L), PX_EBUSY);
    CHECK_EQ(px_rwlock_rdunlock(L), PX_EPERM);
    CHECK_EQ(px_rwlock_readers(L), 1);           /* the home reader alone */
    CHECK_EQ(px_rwlock_waiters(L), 0);
    return NULL;
}

SPEC(read_hold_beside_another_schedulers_readers_is_ethread)
{
    L = px_rwlock_new();
    ev_init(&read_held);
    ev_init(&stranger_done);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, home_thread, NULL) == 0);
    EV_WAIT(&read_held, 1);
    CHECK_EQ(px_run(stranger, NULL, NULL), 0);
    ev_set(&stranger_done);
    CHECK(pthread_join(t, NULL) == 0);
    check_rwlock_unheld(L);
    CHECK_EQ(px_rwlock_free(L), 0);
    ev_destroy(&read_held);
    ev_destroy(&stranger_done);
}

SPEC(the_documented_example_runs)
{
    CHECK_EQ(sync_rwlock_example(), 0);
}

SPECS(any_number_of_readers_hold_it_together,
      a_writer_excludes_readers_and_other_writers,
      writer_preference_orders_a_in_a_out_w_in_w_out_r_in_r_out,
      readers_queued_behind_a_writer_are_admitted_together,
      hands_off_in_fifo_order,
      writers_are_served_in_fifo_order_by_direct_hand_off,
      read_side_is_reentrant_even_with_a_writer_waiting,
      the_writer_may_take_read_holds_but_not_a_second_write_lock,
      upgrade_from_read_to_write_is_edeadlk_without_parking,
      wrunlock_keeps_the_writers_read_holds_as_a_downgrade,
      try_forms_never_park_and_never_pass_a_queued_waiter,
      releasing_a_hold_the_caller_does_not_have_is_eperm,
      timed_out_writer_leaves_no_waiter_and_lets_the_readers_behind_it_in,
      wrunlock_right_after_an_interrupted_writer_goes_past_it_to_the_readers,
      wrunlock_right_after_an_interrupted_reader_goes_past_it_to_the_writer,
      dead_writer_releases_its_holds_and_the_next_writer_gets_eownerdead,
      readers_after_a_dead_writer_get_eownerdead_until_a_writer_takes_it,
      dead_reader_releases_all_its_read_holds,
      a_fiber_that_once_held_it_is_never_mistaken_for_a_new_fiber,
      deadlock_report_names_readers_and_writer_and_prints_the_cycle,
      free_refuses_a_held_or_waited_on_rwlock_with_ebusy,
      the_documented_example_runs,
      read_hold_beside_another_schedulers_readers_is_ethread,
      random_locking_under_random_timeouts_keeps_exclusion_and_leaves_nothing_queued)
