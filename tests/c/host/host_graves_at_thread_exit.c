/*
** host_graves_at_thread_exit.c -- an object a thread keeps (pxhost_collect
** found it busy) is not leaked when that thread ends before any run of it
** does: its free is tried once more as the thread exits, and it is freed
** when nothing uses it any more.  (ASan's leak check sees the list itself.)
*/
#include "../check.h"
#include "pxhost.h"

static atomic_int busy, freed;

/* A px_*_free stand-in: PX_EBUSY while `busy`, else frees p. */
static int fake_free(void *p)
{
    if (atomic_load(&busy))
        return PX_EBUSY;
    free(p);
    atomic_fetch_add(&freed, 1);
    return 0;
}

static void *collects_then_exits(void *arg)
{
    (void)arg;
    atomic_store(&busy, 1);
    for (int i = 0; i < 20; i++)                 /* past the list's first size */
        pxhost_collect(fake_free, malloc(8), 0);
    CHECK_EQ(atomic_load(&freed), 0);
    atomic_store(&busy, 0);                      /* its users are gone */
    return NULL;                                 /* no run ends on this thread */
}

int main(void)
{
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, collects_then_exits, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(atomic_load(&freed), 20);
    CHECK_EQ(pxhost_sweep(), 0);                 /* this thread keeps nothing */
    puts("host.graves_at_thread_exit: ok");
    return 0;
}
