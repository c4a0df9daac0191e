/*
** fork_timerq -- a child of fork() makes and uses a timer queue of its own
** while its parent's queue was just made: the fork comes right after the
** parent's first add, while the parent's worker faults the first arena's pages
** in (arena.c).  In the child a new queue calls a due handler once, with status
** 0, and its free returns; the parent's queue goes on as if no fork happened.
**
** Skipped (77) under TSan.  The parent has two threads (main and the queue's
** worker), so TSan puts the child in its "after multi-threaded fork" mode,
** where starting a thread -- the child queue's worker -- ends the process:
** "starting new threads after multi-threaded fork is not supported", exit 66
** (die_after_fork=1, the default).  With die_after_fork=0 the child dies at
** px_timerq_free's pthread_join instead: glibc gives the child's worker the
** parent worker's stack, hence the same pthread_t, and gcc 12's libtsan still
** lists the parent's worker, gone in the child, under that id: "dup thread
** with used id" (newer LLVM runtimes forget the ids of the threads a child
** lacks, ThreadRegistry::OnFork).  No lock or state of the library is
** involved: the same happens to any program whose child starts a thread.
**
** Skipped (77) under ASan too: gcc 12's ASan does not lock its allocator
** across fork(), and the child's worker was seen (4 runs in 50) waiting for
** ever in calloc -> SizeClassAllocator64::GetFromAllocator on a region lock
** that the parent's worker held at the fork (see fork_locks.c).
*/
#include <sys/types.h>
#include <unistd.h>

#include "reap.h"

#define FORKS 10

static status_latch fired, child_fired;

static void on_parent(void *arg, int status)
{
    (void)arg;
    status_latch_set(&fired, status);
}

static void on_child(void *arg, int status)
{
    (void)arg;
    status_latch_set(&child_fired, status);
}

/* Exit codes 10.. tell the parent which promise broke in the child. */
static void child(void)
{
    alarm(20);   /* a hang becomes SIGALRM, not a stuck test */
    status_latch_init(&child_fired);
    px_timerq *q = px_timerq_new(NULL);
    if (q == NULL)
        _exit(10);
    if (px_timerq_add(q, 0, on_child, NULL) == 0)
        _exit(11);
    if (!ev_wait_n(&child_fired.latch, 1))
        _exit(12);
    px_timerq_free(q);   /* joins its worker: every call was made */
    _exit(ev_count(&child_fired.latch) == 1 && child_fired.status == 0 ? 0 : 13);
}

int main(void)
{
#ifdef PX_TEST_TSAN
    puts("skipped: under TSan a child of a multi-threaded process cannot start a "
         "thread (die_after_fork; gcc 12: dup thread with used id)");
    return 77;
#endif
#ifdef PX_TEST_SANITIZER_MALLOC
    puts("skipped: the sanitizer's malloc is not fork-safe with threads running");
    return 77;
#endif
    for (int i = 0; i < FORKS; i++) {
        status_latch_init(&fired);
        px_timerq *q = px_timerq_new(NULL);
        CHECK(q != NULL);
        uint64_t far = px_timerq_add(q, PX_SEC(10), on_parent, NULL);
        CHECK(far != 0);   /* the first record: the worker prefaults now */
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0)
            child();
        reap_child(pid, PX_SEC(30), "the child");
        CHECK(px_timerq_add(q, 0, on_parent, NULL) != 0);
        EV_WAIT(&fired.latch, 1);
        CHECK_EQ(fired.status, 0);
        CHECK_EQ(px_timerq_cancel(q, far), 1);
        EV_WAIT(&fired.latch, 2);
        CHECK_EQ(fired.status, PX_ECANCELED);
        px_timerq_free(q);
        ev_destroy(&fired.latch);
    }
    puts("ok");
    return 0;
}
