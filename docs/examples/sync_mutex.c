/*
** sync_mutex.c -- a px_mutex guarding shared state: four fibers update a
** table under the lock, a wait bounded by a timeout gives up cleanly, and a
** fiber that ends holding the lock tells the next owner (PX_EOWNERDEAD) so
** it can repair what was left half-done.
**
**   cc sync_mutex.c -lparataxis && ./a.out
*/
#include <stdio.h>

#include "parataxis.h"

int sync_mutex_example(void);

static px_mutex *lock;
static int table[4], total;        /* total == sum of table, under the lock */

static void *updater(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < 100; i++) {
        px_mutex_lock(lock);
        table[id]++;
        px_yield();                /* the others queue; nobody gets in */
        total++;
        px_mutex_unlock(lock);
    }
    return NULL;
}

static int mutex_lock_body(void *arg) { (void)arg; return px_mutex_lock(lock); }

static void *impatient(void *arg)
{
    (void)arg;
    int r = px_with_timeout(PX_MSEC(10), mutex_lock_body, NULL);
    printf("the impatient fiber: %s, %zu waiter(s) left\n", px_strerror(r),
           px_mutex_waiters(lock));
    return NULL;
}

static void *dies_halfway(void *arg)
{
    (void)arg;
    px_mutex_lock(lock);
    table[0]++;                    /* ... and ends before total++ */
    return NULL;
}

static void *mutex_main(void *arg)
{
    (void)arg;
    px_fiber *f[4];
    for (intptr_t i = 0; i < 4; i++)
        f[i] = px_spawn(updater, (void *)i);
    for (int i = 0; i < 4; i++) {
        px_join(f[i], NULL);
        px_fiber_release(f[i]);
    }
    printf("total %d after 4 x 100 updates\n", total);

    px_mutex_lock(lock);           /* held while the impatient one waits */
    px_fiber *w = px_spawn(impatient, NULL);
    px_join(w, NULL);
    px_fiber_release(w);
    px_mutex_unlock(lock);

    w = px_spawn(dies_halfway, NULL);
    px_join(w, NULL);
    px_fiber_release(w);
    if (px_mutex_lock(lock) == PX_EOWNERDEAD) {   /* we own it: repair */
        total = table[0] + table[1] + table[2] + table[3];
        printf("the owner died holding it; repaired total %d\n", total);
    }
    px_mutex_unlock(lock);
    return NULL;
}

int sync_mutex_example(void)
{
    lock = px_mutex_new();
    int r = px_run(mutex_main, NULL, NULL);
    px_mutex_free(lock);
    return r == 0 && total == 401 ? 0 : 1;
}

#ifndef SYNC_EXAMPLE_NO_MAIN
int main(void) { return sync_mutex_example(); }
#endif
