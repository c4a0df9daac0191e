/*
** sync_rwlock.c -- a px_rwlock in front of a settings table: readers share
** it, a writer waits for them and is not starved by the readers that come
** after it, and a reader that wants to write releases its read hold first
** (an upgrade in place is refused with PX_EDEADLK: it would wait for itself).
**
**   cc sync_rwlock.c -lparataxis && ./a.out
*/
#include <stdio.h>

#include "parataxis.h"

int sync_rwlock_example(void);

static px_rwlock *lock;
static int version = 1;
static char seen[64];
static int nseen;

static void *show_reader(void *arg)
{
    px_rwlock_rdlock(lock);
    seen[nseen++] = (char)('0' + version);  /* what this reader saw */
    seen[nseen++] = *(const char *)arg;
    px_yield();                            /* readers overlap here */
    px_rwlock_rdunlock(lock);
    return NULL;
}

static void *bump_writer(void *arg)
{
    (void)arg;
    px_rwlock_wrlock(lock);                /* waits for the readers in */
    version++;
    px_rwlock_wrunlock(lock);
    return NULL;
}

static void *refresher(void *arg)
{
    (void)arg;
    px_rwlock_rdlock(lock);
    int stale = version < 3;
    if (stale && px_rwlock_wrlock(lock) == PX_EDEADLK) {
        px_rwlock_rdunlock(lock);          /* give the read hold up ... */
        px_rwlock_wrlock(lock);            /* ... then queue as a writer */
        if (version < 3)                   /* look again: others may have */
            version = 3;
        px_rwlock_wrunlock(lock);
        return NULL;
    }
    px_rwlock_rdunlock(lock);
    return NULL;
}

static void *rwlock_main(void *arg)
{
    (void)arg;
    px_fiber *f[5];
    f[0] = px_spawn(show_reader, "a");
    f[1] = px_spawn(show_reader, "b");
    f[2] = px_spawn(bump_writer, NULL);    /* queues behind a and b */
    f[3] = px_spawn(show_reader, "c");     /* comes after the writer: waits */
    f[4] = px_spawn(refresher, NULL);
    for (int i = 0; i < 5; i++) {
        px_join(f[i], NULL);
        px_fiber_release(f[i]);
    }
    seen[nseen] = 0;
    printf("readers saw %s; version is now %d\n", seen, version);
    return NULL;
}

int sync_rwlock_example(void)
{
    lock = px_rwlock_new();
    int r = px_run(rwlock_main, NULL, NULL);
    px_rwlock_free(lock);
    /* a and b saw version 1, c saw the writer's 2. */
    return r == 0 && version == 3 && seen[0] == '1' && seen[2] == '1' && seen[4] == '2' ? 0 : 1;
}

#ifndef SYNC_EXAMPLE_NO_MAIN
int main(void) { return sync_rwlock_example(); }
#endif
