/*
** mutex_holds.c -- px_mutex beside its caller's other holds.
**
** The uncontended lock and unlock take the fast way only when the mutex is
** the caller's most recent hold and nobody waits; these specifications hold
** the paths around it to the documented behaviour: unlocks in any order,
** deaths with several holds of several kinds, and a mutex left free by a
** death (it has no owner, refuses an unlock, tells the next owner, frees).
*/
#include "sync_kit.h"

static px_mutex *A, *B, *C;
static px_rwlock *R;

static void run(px_fiber_fn main)
{
    A = px_mutex_new();
    B = px_mutex_new();
    C = px_mutex_new();
    R = px_rwlock_new();
    CHECK(A != NULL && B != NULL && C != NULL && R != NULL);
    CHECK_EQ(px_run(main, NULL, NULL), 0);
    CHECK_EQ(px_mutex_free(A), 0);
    CHECK_EQ(px_mutex_free(B), 0);
    CHECK_EQ(px_mutex_free(C), 0);
    CHECK_EQ(px_rwlock_free(R), 0);
}

static void lock_all(void)
{
    CHECK_EQ(px_mutex_lock(A), 0);
    CHECK_EQ(px_mutex_lock(B), 0);
    CHECK_EQ(px_mutex_lock(C), 0);
}

/* Unlocks the three, which the caller holds, in the order given. */
static void unlock_in_order(px_mutex *first, px_mutex *second, px_mutex *third)
{
    CHECK_EQ(px_mutex_unlock(first), 0);
    CHECK_EQ(px_mutex_unlock(second), 0);
    CHECK_EQ(px_mutex_unlock(third), 0);
}

/* Nobody holds A, B or C. */
static void check_none_owned(void)
{
    CHECK_EQ(px_mutex_owner(A), 0);
    CHECK_EQ(px_mutex_owner(B), 0);
    CHECK_EQ(px_mutex_owner(C), 0);
}

/* -- unlock order --------------------------------------------------------------- */

static void *any_order_main(void *arg)
{
    (void)arg;
    /* The oldest first, then the middle, then the last. */
    lock_all();
    CHECK_EQ(px_mutex_unlock(A), 0);
    CHECK_EQ(px_mutex_owner(A), 0);
    CHECK_EQ(px_mutex_owner(B), px_self());
    CHECK_EQ(px_mutex_unlock(A), PX_EPERM);
    CHECK_EQ(px_mutex_lock(A), 0);               /* now the newest */
    CHECK_EQ(px_mutex_unlock(B), 0);
    CHECK_EQ(px_mutex_unlock(C), 0);
    CHECK_EQ(px_mutex_lock(C), 0);
    CHECK_EQ(px_mutex_lock(C), PX_EDEADLK);
    CHECK_EQ(px_mutex_unlock(A), 0);
    CHECK_EQ(px_mutex_unlock(C), 0);
    check_none_owned();
    /* Every hold is gone: each is free to take and let go again. */
    for (int i = 0; i < 3; i++) {
        lock_all();
        unlock_in_order(C, B, A);
    }
    CHECK_EQ(px_mutex_trylock(B), 0);
    CHECK_EQ(px_mutex_unlock(B), 0);
    return NULL;
}

SPEC(unlocks_in_any_order_release_each_mutex_and_keep_the_others)
{
    run(any_order_main);
}

/* -- deaths ----------------------------------------------------------------------- */

static void *lock_three_unlock_middle_and_end(void *arg)
{
    (void)arg;
    lock_all();
    CHECK_EQ(px_mutex_unlock(B), 0);
    return NULL;                                 /* ends holding A and C */
}

static void *death_main(void *arg)
{
    (void)arg;
    join(px_spawn(lock_three_unlock_middle_and_end, NULL));
    check_none_owned();
    CHECK_EQ(px_mutex_lock(A), PX_EOWNERDEAD);
    CHECK_EQ(px_mutex_lock(B), 0);               /* let go before the end */
    CHECK_EQ(px_mutex_trylock(C), PX_EOWNERDEAD);
    unlock_in_order(A, B, C);
    lock_all();                                  /* each death told once */
    unlock_in_order(B, A, C);
    return NULL;
}

SPEC(a_fiber_ending_with_several_mutexes_releases_each_with_eownerdead)
{
    run(death_main);
}

static void *lock_and_end(void *arg)
{
    CHECK_EQ(px_mutex_lock((px_mutex *)arg), 0);
    return NULL;
}

static void *unlock_other(void *arg)
{
    CHECK_EQ(px_mutex_unlock((px_mutex *)arg), PX_EPERM);
    return NULL;
}

static void *dead_free_main(void *arg)
{
    (void)arg;
    join(px_spawn(lock_and_end, A));
    CHECK_EQ(px_mutex_owner(A), 0);
    CHECK_EQ(px_mutex_waiters(A), 0);
    CHECK_EQ(px_mutex_unlock(A), PX_EPERM);      /* nothing changes ... */
    join(px_spawn(unlock_other, A));
    CHECK_EQ(px_mutex_lock(A), PX_EOWNERDEAD);   /* ... the death is still told */
    CHECK_EQ(px_mutex_unlock(A), 0);
    CHECK_EQ(px_mutex_trylock(A), 0);
    CHECK_EQ(px_mutex_unlock(A), 0);
    /* A mutex a death left free is free: px_mutex_free takes it (run). */
    join(px_spawn(lock_and_end, B));
    CHECK_EQ(px_mutex_owner(B), 0);
    return NULL;
}

SPEC(a_mutex_left_free_by_a_death_has_no_owner_refuses_unlock_and_frees)
{
    run(dead_free_main);
}

/* -- other kinds of holds ------------------------------------------------------ */

static void *wrlock_lock_and_end(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_wrlock(R), 0);
    CHECK_EQ(px_mutex_lock(A), 0);
    CHECK_EQ(px_rwlock_rdlock(R), 0);
    return NULL;                                 /* ends holding all three */
}

static void *kinds_main(void *arg)
{
    (void)arg;
    /* The mutex under a write lock, let go first. */
    CHECK_EQ(px_mutex_lock(A), 0);
    CHECK_EQ(px_rwlock_wrlock(R), 0);
    CHECK_EQ(px_mutex_unlock(A), 0);
    CHECK_EQ(px_rwlock_wrunlock(R), 0);
    /* A read hold between two mutexes, let go in the middle. */
    CHECK_EQ(px_mutex_lock(A), 0);
    CHECK_EQ(px_rwlock_rdlock(R), 0);
    CHECK_EQ(px_mutex_lock(B), 0);
    CHECK_EQ(px_rwlock_rdunlock(R), 0);
    CHECK_EQ(px_mutex_unlock(A), 0);
    CHECK_EQ(px_mutex_unlock(B), 0);
    CHECK_EQ(px_rwlock_rdunlock(R), PX_EPERM);
    CHECK_EQ(px_mutex_owner(A), 0);
    CHECK_EQ(px_mutex_owner(B), 0);
    check_rwlock_unheld(R);
    /* A death with all three kinds. */
    join(px_spawn(wrlock_lock_and_end, NULL));
    CHECK_EQ(px_mutex_owner(A), 0);
    check_rwlock_unheld(R);
    CHECK_EQ(px_mutex_lock(A), PX_EOWNERDEAD);
    CHECK_EQ(px_rwlock_wrlock(R), PX_EOWNERDEAD);
    CHECK_EQ(px_mutex_unlock(A), 0);
    CHECK_EQ(px_rwlock_wrunlock(R), 0);
    return NULL;
}

SPEC(mutex_holds_mix_with_rwlock_holds_in_any_order_and_in_death)
{
    run(kinds_main);
}

SPECS(unlocks_in_any_order_release_each_mutex_and_keep_the_others,
      a_fiber_ending_with_several_mutexes_releases_each_with_eownerdead,
      a_mutex_left_free_by_a_death_has_no_owner_refuses_unlock_and_frees,
      mutex_holds_mix_with_rwlock_holds_in_any_order_and_in_death)
