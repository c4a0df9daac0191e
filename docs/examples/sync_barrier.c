/*
** sync_barrier.c -- a barrier between pipeline stages.
**
**   cc -std=c11 -Icore/include docs/examples/sync_barrier.c libparataxis.a -lpthread
**
** Each worker fills its slice (stage 1); nobody reads the merged total
** (stage 2) before every slice is filled.  The leader -- the one arrival per
** phase that gets 1 -- does the merge between the stages, and a second
** barrier phase makes the merge visible to all before they read it.
*/
#include <stdio.h>

#include "parataxis.h"

enum { WORKERS = 4 };
static px_barrier *stage;
static int slice[WORKERS], total, read_back[WORKERS];

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    for (int y = 0; y < me; y++)
        px_yield();                          /* the workers finish unevenly */
    slice[me] = me + 1;                      /* stage 1 */
    if (px_barrier_arrive_and_wait(stage) == 1)
        for (int i = 0; i < WORKERS; i++)    /* the leader merges */
            total += slice[i];
    px_barrier_arrive_and_wait(stage);       /* the merge is done */
    read_back[me] = total;                   /* stage 2 */
    return NULL;
}

static void *main_fiber(void *arg)
{
    (void)arg;
    px_fiber *f[WORKERS];
    stage = px_barrier_new(WORKERS);
    for (intptr_t i = 0; i < WORKERS; i++)
        f[i] = px_spawn(worker, (void *)i);
    for (int i = 0; i < WORKERS; i++) {
        px_join(f[i], NULL);
        px_fiber_release(f[i]);
    }
    int ok = 1;
    for (int i = 0; i < WORKERS; i++)
        ok &= read_back[i] == 10;
    printf("%llu phases; every worker read the total %d: %s\n",
           (unsigned long long)px_barrier_phase(stage), total, ok ? "yes" : "no");
    px_barrier_free(stage);
    return ok ? NULL : (void *)1;
}

int main(void)
{
    void *bad = NULL;
    return px_run(main_fiber, NULL, &bad) == 0 && bad == NULL ? 0 : 1;
}
