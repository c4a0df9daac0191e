/*
** queue_intr_thread_exit.c -- px_queue_wait_intr at the end of a thread: a
** wait made from a thread-specific destructor that runs after the library's
** own (which closes the thread's interrupt descriptor) is a wait like any
** other -- 0 on timeout, not PX_EINTR from a closed descriptor, never a poll
** of a descriptor number the process has since reused -- and the thread
** leaves no descriptor open behind it.
*/
#include <dirent.h>

#include "../check.h"

static px_queue *q;
static pthread_key_t late_key;
static atomic_int late_result = 99;

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    int n = 0;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

/* Runs after the library's destructor: its key was made first. */
static void late_wait(void *p)
{
    (void)p;
    atomic_store(&late_result, px_queue_wait_intr(q, 0));
}

static void *waits_then_exits(void *arg)
{
    (void)arg;
    CHECK_EQ(px_queue_wait_intr(q, 0), 0);
    CHECK_EQ(pthread_setspecific(late_key, (void *)1), 0);
    return NULL;
}

int main(void)
{
    q = px_queue_new();
    CHECK(q != NULL);
    CHECK_EQ(px_queue_wait_intr(q, 0), 0);     /* the library's key exists now */
    CHECK_EQ(pthread_key_create(&late_key, late_wait), 0);
    int before = open_fds();
    for (int i = 0; i < 3; i++) {
        pthread_t t;
        atomic_store(&late_result, 99);
        CHECK_EQ(pthread_create(&t, NULL, waits_then_exits, NULL), 0);
        CHECK_EQ(pthread_join(t, NULL), 0);
        CHECK_EQ(atomic_load(&late_result), 0);
    }
    CHECK_EQ(open_fds(), before);
    px_queue_free(q);
    puts("timerq.queue_intr_thread_exit: ok");
    return 0;
}
