/*
** local.c -- fiber-local values (px_local_*): one value per fiber and key,
** passed on to spawned fibers only through the key's inherit, destroyed
** exactly once -- when replaced, when the fiber ends, when its scheduler is
** freed with it still parked, in the child of a fork as in the parent.
*/
#include <sys/wait.h>
#include <unistd.h>

#include "../spec.h"

static px_local *K;
static int destroyed[8];      /* per value: how many times destroy ran on it */
static uint64_t destroyed_by;  /* px_self() in the last destroy */
static int values[8];          /* the values are &values[i] */

static void destroy(void *v)
{
    destroyed[(int *)v - values]++;
    destroyed_by = px_self();
}

static void *same(void *v)
{
    return v;
}

static void *next_value(void *v)
{
    return (int *)v + 1;   /* the child owns a value of its own */
}

static void *read_it(void *arg)
{
    (void)arg;
    return px_local_get(K);
}

static void *spawn_and_join(px_fiber_fn fn, void *arg)
{
    px_fiber *f = px_spawn(fn, arg);
    CHECK(f != NULL);
    void *r;
    CHECK_EQ(px_join(f, &r), 0);
    px_fiber_release(f);
    return r;
}

/* -- per fiber ---------------------------------------------------------------- */

static void *sets_its_own(void *arg)
{
    CHECK(px_local_get(K) == NULL);
    CHECK_EQ(px_local_set(K, arg), 0);
    CHECK_EQ(px_yield(), 0);
    return px_local_get(K);
}

static void *per_fiber_main(void *arg)
{
    (void)arg;
    CHECK(px_local_get(K) == NULL);
    CHECK_EQ(px_local_set(K, &values[0]), 0);
    px_fiber *a = px_spawn(sets_its_own, &values[1]), *b = px_spawn(sets_its_own, &values[2]);
    CHECK(a && b);
    void *ra, *rb;
    CHECK_EQ(px_join(a, &ra), 0);
    CHECK_EQ(px_join(b, &rb), 0);
    CHECK(ra == &values[1] && rb == &values[2]);
    CHECK(px_local_get(K) == &values[0]);
    px_fiber_release(a);
    px_fiber_release(b);
    CHECK(px_local_get(NULL) == NULL);
    CHECK_EQ(px_local_set(NULL, &values[0]), PX_EINVAL);
    return NULL;
}

SPEC(a_value_is_per_fiber)
{
    CHECK((K = px_local_new(NULL, NULL)) != NULL);
    CHECK_EQ(px_local_set(K, &values[0]), PX_ENOFIBER);   /* off-fiber */
    CHECK(px_local_get(K) == NULL);
    CHECK_EQ(px_run(per_fiber_main, NULL, NULL), 0);
    px_local_free(K);
    px_local_free(NULL);
}

/* -- inheritance -------------------------------------------------------------- */

static void *grandchild_reads(void *arg)
{
    (void)arg;
    return spawn_and_join(read_it, NULL);
}

static void *inherit_main(void *arg)
{
    px_local *plain = arg;
    CHECK_EQ(px_local_set(K, &values[0]), 0);
    CHECK_EQ(px_local_set(plain, &values[5]), 0);
    CHECK(spawn_and_join(read_it, NULL) == &values[0]);          /* shared: same pointer */
    CHECK(spawn_and_join(grandchild_reads, NULL) == &values[0]);  /* and on down */
    px_local *saved = K;
    K = plain;
    CHECK(spawn_and_join(read_it, NULL) == NULL);   /* no inherit: starts empty */
    K = saved;
    return NULL;
}

SPEC(a_spawned_fiber_inherits_when_asked)
{
    CHECK((K = px_local_new(NULL, same)) != NULL);
    px_local *plain = px_local_new(NULL, NULL);
    CHECK(plain != NULL);
    CHECK_EQ(px_run(inherit_main, plain, NULL), 0);
    px_local_free(K);
    px_local_free(plain);
}

static void *starts_empty_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_local_set(K, &values[0]), 0);
    CHECK(spawn_and_join(read_it, NULL) == NULL);
    CHECK(px_local_get(K) == &values[0]);
    return NULL;
}

SPEC(without_inherit_a_new_fiber_starts_empty)
{
    CHECK((K = px_local_new(destroy, NULL)) != NULL);
    memset(destroyed, 0, sizeof destroyed);
    CHECK_EQ(px_run(starts_empty_main, NULL, NULL), 0);
    CHECK_EQ(destroyed[0], 1);
    px_local_free(K);
}

static void *child_changes(void *arg)
{
    (void)arg;
    void *mine = px_local_get(K);
    CHECK(mine == &values[1]);                 /* inherit made it a value of its own */
    CHECK_EQ(px_local_set(K, &values[3]), 0);   /* destroys values[1], not the parent's */
    return mine;
}

static void *child_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_local_set(K, &values[0]), 0);
    CHECK(spawn_and_join(child_changes, NULL) == &values[1]);
    CHECK(px_local_get(K) == &values[0]);
    CHECK_EQ(destroyed[1], 1);
    CHECK_EQ(destroyed[3], 1);                  /* the child's, at its end */
    CHECK_EQ(destroyed[0], 0);
    return NULL;
}

SPEC(changes_in_a_child_do_not_reach_its_parent)
{
    CHECK((K = px_local_new(destroy, next_value)) != NULL);
    memset(destroyed, 0, sizeof destroyed);
    CHECK_EQ(px_run(child_main, NULL, NULL), 0);
    CHECK_EQ(destroyed[0], 1);
    px_local_free(K);
}

/* -- destruction -------------------------------------------------------------- */

static void *replace_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_local_set(K, &values[0]), 0);
    CHECK_EQ(px_local_set(K, &values[1]), 0);
    CHECK_EQ(destroyed[0], 1);
    CHECK_EQ(px_local_set(K, &values[1]), 0);   /* the same value: kept */
    CHECK_EQ(destroyed[1], 0);
    CHECK_EQ(px_local_set(K, NULL), 0);
    CHECK_EQ(destroyed[1], 1);
    CHECK(px_local_get(K) == NULL);
    CHECK_EQ(px_local_set(K, &values[2]), 0);
    return NULL;
}

SPEC(replacing_a_value_destroys_the_old_one)
{
    CHECK((K = px_local_new(destroy, NULL)) != NULL);
    memset(destroyed, 0, sizeof destroyed);
    CHECK_EQ(px_run(replace_main, NULL, NULL), 0);
    CHECK_EQ(destroyed[0], 1);
    CHECK_EQ(destroyed[1], 1);
    CHECK_EQ(destroyed[2], 1);   /* at the end */
    px_local_free(K);
}

static void *ends_with_value(void *arg)
{
    CHECK_EQ(px_local_set(K, arg), 0);
    CHECK_EQ(px_yield(), 0);
    return NULL;
}

static void *end_main(void *arg)
{
    (void)arg;
    px_fiber *f = px_spawn(ends_with_value, &values[4]);
    CHECK(f != NULL);
    uint64_t id = px_fiber_id(f);
    CHECK_EQ(px_join(f, NULL), 0);
    CHECK_EQ(destroyed[4], 1);
    CHECK_EQ(destroyed_by, id);   /* on the ending fiber */
    px_fiber_release(f);
    /* The key given up while a fiber holds a value: destroyed at its end. */
    f = px_spawn(ends_with_value, &values[5]);
    CHECK(f != NULL);
    CHECK_EQ(px_yield(), 0);      /* it set its value */
    px_local_free(K);
    CHECK_EQ(destroyed[5], 0);
    CHECK_EQ(px_join(f, NULL), 0);
    CHECK_EQ(destroyed[5], 1);
    px_fiber_release(f);
    return NULL;
}

SPEC(the_destructor_runs_once_when_the_fiber_ends)
{
    CHECK((K = px_local_new(destroy, NULL)) != NULL);
    memset(destroyed, 0, sizeof destroyed);
    CHECK_EQ(px_run(end_main, NULL, NULL), 0);
    CHECK_EQ(destroyed[4], 1);
    CHECK_EQ(destroyed[5], 1);
}

static px_event *Never;

static void *parks_with_value(void *arg)
{
    CHECK_EQ(px_local_set(K, arg), 0);
    px_event_wait(Never);
    return NULL;
}

static void *discard_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++) {
        px_fiber *f = px_spawn(parks_with_value, &values[i]);
        CHECK(f != NULL);
        px_fiber_release(f);
    }
    CHECK_EQ(px_local_set(K, &values[3]), 0);
    px_event_wait(Never);
    return NULL;
}

static void quiet(void *ctx, const char *text)
{
    (void)ctx;
    (void)text;
}

SPEC(the_destructor_runs_once_when_the_run_is_discarded)
{
    CHECK((K = px_local_new(destroy, NULL)) != NULL);
    CHECK((Never = px_event_new()) != NULL);
    memset(destroyed, 0, sizeof destroyed);
    px_sched *s = px_sched_new(&(px_sched_opts){ .on_deadlock = quiet });
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, discard_main, NULL), 0);
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(destroyed[i], 0);
    px_local_free(K);   /* the values keep the key */
    px_sched_free(s);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(destroyed[i], 1);
    CHECK_EQ(px_event_free(Never), 0);
}

/* -- pulled fibers ----------------------------------------------------------- */

SPEC(a_pulled_fiber_ends_as_itself)
{
    CHECK((K = px_local_new(destroy, NULL)) != NULL);
    memset(destroyed, 0, sizeof destroyed);
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    px_fiber *f = px_spawn_hosted(s, &(px_host_ops){ NULL, NULL, NULL }, &values[7]);
    CHECK(f != NULL);
    void *ctx;
    CHECK_EQ(px_sched_next(s, 0, &ctx), 1);   /* its turn: the host runs it */
    CHECK(ctx == &values[7]);
    CHECK_EQ(px_local_set(K, &values[6]), 0);
    destroyed_by = 0;
    CHECK_EQ(px_sched_next(s, PX_HOST_DONE, &ctx), 0);   /* it ended */
    CHECK_EQ(destroyed[6], 1);
    CHECK_EQ(destroyed_by, px_fiber_id(f));   /* px_self() was the fiber that ended */
    px_fiber_release(f);
    px_sched_free(s);
    px_local_free(K);
}

/* A run left parked on another thread, freed from a fiber of this one: its
** values are destroyed off-fiber all the same, not as the freeing fiber. */
static px_sched *Left;

static void *runs_left(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sched_run(Left), PX_EDEADLK);
    return NULL;
}

static void *frees_left(void *arg)
{
    (void)arg;
    destroyed_by = 1;
    px_sched_free(Left);
    CHECK_EQ(destroyed[0], 1);
    CHECK_EQ(destroyed_by, 0);   /* px_self() in destroy: no fiber */
    return NULL;
}

SPEC(the_destructor_of_a_run_freed_from_a_fiber_runs_off_fiber)
{
    CHECK((K = px_local_new(destroy, NULL)) != NULL);
    CHECK((Never = px_event_new()) != NULL);
    memset(destroyed, 0, sizeof destroyed);
    CHECK((Left = px_sched_new(&(px_sched_opts){ .on_deadlock = quiet })) != NULL);
    CHECK_EQ(px_sched_post(Left, parks_with_value, &values[0]), 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, runs_left, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(px_run(frees_left, NULL, NULL), 0);
    px_local_free(K);
    CHECK_EQ(px_event_free(Never), 0);
}

/* -- fork --------------------------------------------------------------------- */

static int marks[2];   /* a pipe: each destroy writes 'p' (parent) or 'c' (child) */
static pid_t parent_pid;

static void destroy_marked(void *v)
{
    (void)v;
    char c = getpid() == parent_pid ? 'p' : 'c';
    CHECK_EQ(write(marks[1], &c, 1), 1);
}

static pid_t child;

static void *forks(void *arg)
{
    (void)arg;
    CHECK_EQ(px_local_set(K, &values[0]), 0);
    fflush(NULL);
    child = fork();
    CHECK(child >= 0);
    return NULL;   /* ends in both: its value is destroyed in each */
}

SPEC(the_destructor_runs_once_in_a_fork_child)
{
#ifdef PX_TEST_TSAN
    exit(77);   /* TSan does not follow a fork made on a fiber (tests/c/fork) */
#endif
    parent_pid = getpid();
    CHECK_EQ(pipe(marks), 0);
    CHECK((K = px_local_new(destroy_marked, NULL)) != NULL);
    int r = px_run(forks, NULL, NULL);
    if (child == 0)
        _exit(r == PX_EFORKED ? 0 : 10);
    CHECK_EQ(r, 0);
    int ws;
    CHECK_EQ(waitpid(child, &ws, 0), child);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    close(marks[1]);
    char got[8];
    ssize_t n = read(marks[0], got, sizeof got);
    CHECK_EQ(n, 2);
    CHECK((got[0] == 'p' && got[1] == 'c') || (got[0] == 'c' && got[1] == 'p'));
    close(marks[0]);
    px_local_free(K);
}

SPECS(a_value_is_per_fiber, a_spawned_fiber_inherits_when_asked,
      without_inherit_a_new_fiber_starts_empty, changes_in_a_child_do_not_reach_its_parent,
      replacing_a_value_destroys_the_old_one, the_destructor_runs_once_when_the_fiber_ends,
      the_destructor_runs_once_when_the_run_is_discarded,
      the_destructor_runs_once_in_a_fork_child, a_pulled_fiber_ends_as_itself,
      the_destructor_of_a_run_freed_from_a_fiber_runs_off_fiber)
