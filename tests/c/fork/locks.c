/*
** fork_locks -- a child of fork() can make and run schedulers even when other
** threads of the parent were inside the library at the moment of the fork:
** threads hammer px_wake (which takes the registry of schedulers) and
** px_sched_post (which takes a scheduler's inbox lock) while the main thread
** forks children one by one; each child runs px_run of a trivial fiber, makes
** and frees a scheduler, and exits 0.  A child that has not exited within a
** generous bound hung on a lock a dead thread held: it is killed and the test
** fails.
**
** Skipped (77) under ASan and TSan: the allocators of gcc 12's sanitizer
** runtimes are not locked across fork(), so a hung child is found waiting in
** the sanitizer's own allocator -- malloc/realloc (px__sched_inbox_post, px__stack_put) ->
** asan_malloc or __tsan::user_alloc -> SizeClassAllocator64::GetFromAllocator
** -> a size class's region Mutex::Lock -> FutexWait -- on a lock that another
** thread of the parent (a poster or the scheduler thread, filling or emptying
** its cache) held at the moment of the fork; the child has one thread and
** holds no lock of the library.  Newer runtimes lock their allocator around
** fork (LLVM 18 for ASan, LLVM 19 for TSan); glibc's malloc always did, so
** plain builds do not hang.
*/
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "reap.h"

#define CHILDREN 40
#define CHILD_BOUND_NS PX_SEC(20)

static atomic_int stop;
static atomic_int in_flight;      /* posted, not run yet: kept small */
static px_sched *target;          /* run by the scheduler thread */

static void *nothing(void *arg)
{
    return arg;
}

static void *counted(void *arg)
{
    atomic_fetch_sub(&in_flight, 1);
    return arg;
}

static void *waker(void *arg)
{
    (void)arg;
    uint64_t id = (uint64_t)1 << 40 | 1;   /* a fiber id of no scheduler of this thread */
    while (!atomic_load(&stop))
        px_wake(id++);
    return NULL;
}

static void *poster(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        if (atomic_load(&in_flight) >= 256) {
            sched_yield();
            continue;
        }
        atomic_fetch_add(&in_flight, 1);
        CHECK_EQ(px_sched_post(target, counted, NULL), 0);
    }
    return NULL;
}

static void *sched_thread(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sched_run(target), 0);
    return NULL;
}

static void *child_main(void *arg)
{
    return arg;
}

static void child(void)
{
    int token;
    void *result = NULL;
    if (px_run(child_main, &token, &result) != 0 || result != &token)
        _exit(2);
    px_sched *s = px_sched_new(NULL);
    if (s == NULL)
        _exit(3);
    if (px_sched_post(s, nothing, NULL) != 0 || px_sched_run(s) != 0)
        _exit(4);
    px_sched_free(s);
    _exit(0);
}

/* Waits for `pid` for at most CHILD_BOUND_NS; kills it and fails if it hangs. */
static void reap(pid_t pid, int i)
{
    char who[32];
    snprintf(who, sizeof who, "child %d", i);
    reap_child(pid, CHILD_BOUND_NS, who);
}

int main(void)
{
#ifdef PX_TEST_SANITIZER_MALLOC
    puts("skipped: the sanitizer's malloc is not fork-safe with threads running");
    return 77;
#endif
    target = px_sched_new(NULL);
    CHECK(target != NULL);
    CHECK_EQ(px_sched_hold(target), 0);   /* runs until the posters are done */
    pthread_t st, w[2], p[2];
    CHECK_EQ(pthread_create(&st, NULL, sched_thread, NULL), 0);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(pthread_create(&w[i], NULL, waker, NULL), 0);
        CHECK_EQ(pthread_create(&p[i], NULL, poster, NULL), 0);
    }
    sleep_ns(PX_MSEC(10));   /* not for synchronizing: lets the hammering start */
    for (int i = 0; i < CHILDREN; i++) {
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0)
            child();
        reap(pid, i);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++) {
        pthread_join(w[i], NULL);
        pthread_join(p[i], NULL);
    }
    CHECK_EQ(px_sched_unhold(target), 0);
    pthread_join(st, NULL);
    px_sched_free(target);
    puts("ok");
    return 0;
}
