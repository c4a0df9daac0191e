/*
** sync_waitgroup.c -- fan-out and join with a WaitGroup.
**
**   cc -std=c11 -Icore/include docs/examples/sync_waitgroup.c libparataxis.a -lpthread
**
** The jobs are counted before the fibers that do them are spawned: a wait on
** a count of zero returns at once, and the join would be over too early.
*/
#include <stdio.h>

#include "parataxis.h"

enum { JOBS = 8 };
static px_waitgroup *wg;
static int squares[JOBS];

static void *job(void *arg)
{
    int i = (int)(intptr_t)arg;
    px_sleep(PX_MSEC(JOBS - i));             /* later jobs finish first */
    squares[i] = i * i;
    px_waitgroup_done(wg);
    return NULL;
}

static void *main_fiber(void *arg)
{
    (void)arg;
    wg = px_waitgroup_new();
    px_waitgroup_add(wg, JOBS);              /* before the spawns */
    for (intptr_t i = 0; i < JOBS; i++)
        px_fiber_release(px_spawn(job, (void *)i));
    px_waitgroup_wait(wg);                   /* 0 once every job is done */
    int sum = 0;
    for (int i = 0; i < JOBS; i++)
        sum += squares[i];
    printf("%d jobs joined, sum of squares %d\n", JOBS, sum);
    px_waitgroup_free(wg);
    return sum == 140 ? NULL : (void *)1;
}

int main(void)
{
    void *bad = NULL;
    return px_run(main_fiber, NULL, &bad) == 0 && bad == NULL ? 0 : 1;
}
