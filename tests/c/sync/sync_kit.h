/*
** sync_kit.h -- what the specs of the synchronization family share: waiting
** by yielding, runs with a token, spawning and joining groups of fibers, one
** wait in a cancel scope.  The harness itself (SPEC, SPECS) is ../spec.h.
*/
#ifndef PX_TEST_SYNC_KIT_H
#define PX_TEST_SYNC_KIT_H

#include "../spec.h"

/* Yields until cond holds (a broken contract fails instead of spinning on). */
#define YIELD_UNTIL(cond) do { \
    for (long y_ = 0; !(cond); y_++) { \
        CHECK(y_ < 1000000); \
        CHECK_EQ(px_yield(), 0); \
    } \
} while (0)

/* Runs main as the main fiber of px_run, with a fresh token in *token for
** the specs that cancel one (freed after, and *token NULL again). */
static inline void run_with_token(px_fiber_fn main, px_token **token)
{
    CHECK((*token = px_token_new()) != NULL);
    CHECK_EQ(px_run(main, NULL, NULL), 0);
    px_token_free(*token);
    *token = NULL;
}

/* Joins a fiber that must end normally, and releases it. */
static inline void join(px_fiber *f)
{
    CHECK(f != NULL);
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
}
/* Spawns n fibers of fn into f[0..n-1], each given arg. */
static inline void spawn_all(px_fiber **f, int n, px_fiber_fn fn, void *arg)
{
    for (int i = 0; i < n; i++)
        CHECK((f[i] = px_spawn(fn, arg)) != NULL);
}

/* Spawns n fibers of fn into f[0..n-1], the i-th given i as its argument. */
static inline void spawn_numbered(px_fiber **f, int n, px_fiber_fn fn)
{
    for (int i = 0; i < n; i++)
        CHECK((f[i] = px_spawn(fn, (void *)(uintptr_t)i)) != NULL);
}

/* Joins f[0..n-1] (each must end normally). */
static inline void join_all(px_fiber **f, int n)
{
    for (int i = 0; i < n; i++)
        join(f[i]);
}

/* Joins f[0..n-1] and checks that each one's wait returned 0 (got[i], as
** the i-th fiber stored it). */
static inline void join_all_got_0(px_fiber **f, int n, const int *got)
{
    join_all(f, n);
    for (int i = 0; i < n; i++)
        CHECK_EQ(got[i], 0);
}

#define SPEC_MAX_FIBERS 64   /* the most spawn_join_all runs at once */

/* Runs n fibers of fn (each given arg) together, and joins them all. */
static inline void spawn_join_all(px_fiber_fn fn, void *arg, int n)
{
    px_fiber *f[SPEC_MAX_FIBERS];
    CHECK(n <= SPEC_MAX_FIBERS);
    spawn_all(f, n, fn, arg);
    join_all(f, n);
}

/* The same, the i-th fiber given i as its argument. */
static inline void spawn_join_numbered(px_fiber_fn fn, int n)
{
    px_fiber *f[SPEC_MAX_FIBERS];
    CHECK(n <= SPEC_MAX_FIBERS);
    spawn_numbered(f, n, fn);
    join_all(f, n);
}

/* Nobody holds l, to read or to write. */
static inline void check_rwlock_unheld(const px_rwlock *l)
{
    CHECK_EQ(px_rwlock_readers(l), 0);
    CHECK_EQ(px_rwlock_writer(l), 0);
}

/*
** One wait in a cancel scope, on a fiber of its own (the specs of interrupted
** waits): fill a cancel_call and spawn (or post) cancellable with its
** address; once the fiber has ended, result is what px_with_cancel returned.
*/
typedef struct cancel_call {
    px_token *token;
    px_scope_fn body;        /* the wait */
    void *arg;               /* body's argument */
    int *started;            /* if set, counts the fiber in before it waits */
    int result;
} cancel_call;

static inline void *cancellable(void *arg)
{
    cancel_call *c = arg;
    if (c->started)
        ++*c->started;
    c->result = px_with_cancel(c->token, c->body, c->arg);
    return NULL;
}

#endif /* PX_TEST_SYNC_KIT_H */
