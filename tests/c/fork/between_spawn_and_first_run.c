/*
** fork_between_spawn_and_first_run -- fork() in a fiber while fibers it spawned
** have not run yet: each holds a claim on a stack of its scheduler's pool, no
** stack.  In the parent every one of them runs exactly once, on stacks taken at
** their first turn, and the run ends normally.  In the child none of them runs
** (the inherited run returns PX_EFORKED once the forking fiber returns) and
** px_sched_free drops them with their claims; a new scheduler there spawns its
** own fibers, which take stacks from its own pool.
**
** Skipped (77) under TSan, which does not follow a fork made on a fiber (see
** fiber.c in this directory).
*/
#include <unistd.h>

#include "reap.h"

enum { N = 100 };

static int ran[N];
static pid_t child_pid;

static void *leaf(void *arg)
{
    ran[(uintptr_t)arg]++;
    return arg;
}

/* In the child: fibers of a new scheduler, taken from its pool. */
static void *child_main(void *arg)
{
    (void)arg;
    px_fiber *f[N];
    for (uintptr_t i = 0; i < N; i++)
        if ((f[i] = px_spawn(leaf, (void *)i)) == NULL)
            return NULL;
    for (int i = 0; i < N; i++) {
        void *r;
        if (px_join(f[i], &r) != 0 || r != (void *)(uintptr_t)i)
            return NULL;
        px_fiber_release(f[i]);
    }
    return arg;
}

static void *forker(void *arg)
{
    (void)arg;
    for (uintptr_t i = 0; i < N; i++) {
        px_fiber *f = px_spawn(leaf, (void *)i);
        CHECK(f != NULL);
        px_fiber_release(f);
    }
    fflush(NULL);
    child_pid = fork();
    CHECK(child_pid >= 0);
    if (child_pid == 0) {
        alarm(20);   /* a hang becomes SIGALRM, not a stuck test */
        int none_ran = 1;
        for (int i = 0; i < N; i++)
            none_ran &= ran[i] == 0;
        if (!none_ran || px_self() != 0)
            _exit(20);
        int mark;
        void *r = NULL;
        if (px_run(child_main, &mark, &r) != 0 || r != &mark)
            _exit(21);
        for (int i = 0; i < N; i++)
            if (ran[i] != 1)   /* the new run's leaves, once each */
                _exit(22);
        memset(ran, 0, sizeof ran);
    }
    return NULL;
}

int main(void)
{
#ifdef PX_TEST_TSAN
    return 77;
#endif
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, forker, NULL), 0);
    int r = px_sched_run(s);
    if (child_pid == 0) {
        /* the forking fiber returned: the inherited run stops there */
        int ok = r == PX_EFORKED;
        for (int i = 0; i < N; i++)
            ok &= ran[i] == 0;
        px_sched_free(s);
        exit(ok ? 0 : 23);   /* not _exit: LSan checks that the free released s */
    }
    CHECK_EQ(r, 0);
    for (int i = 0; i < N; i++)
        CHECK_EQ(ran[i], 1);
    px_sched_free(s);
    reap_child(child_pid, PX_SEC(30), "the child");
    return 0;
}
