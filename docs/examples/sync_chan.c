/*
** sync_chan.c -- producers and consumers on a bounded channel, closed once
** the producers are done (a WaitGroup tells when).
**
**   cc -std=c11 -Icore/include docs/examples/sync_chan.c libparataxis.a -lpthread
**
** Each consumer receives until PX_ECLOSED: close lets them drain what is
** buffered first, so nothing sent is lost.
*/
#include <stdio.h>

#include "parataxis.h"

enum { PRODUCERS = 2, CONSUMERS = 3, EACH = 100 };
static px_chan *jobs;
static px_waitgroup *producing;
static long handled, sum;

static void *producer(void *arg)
{
    (void)arg;
    for (intptr_t i = 1; i <= EACH; i++)
        px_chan_send(jobs, (void *)i);       /* parks while the ring is full */
    px_waitgroup_done(producing);
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    void *v;
    while (px_chan_recv(jobs, &v) == 0) {
        handled++;
        sum += (intptr_t)v;
    }
    return NULL;                             /* PX_ECLOSED: drained */
}

static void *main_fiber(void *arg)
{
    (void)arg;
    px_fiber *c[CONSUMERS];
    jobs = px_chan_new(16);
    producing = px_waitgroup_new();
    px_waitgroup_add(producing, PRODUCERS);
    for (int i = 0; i < CONSUMERS; i++)
        c[i] = px_spawn(consumer, NULL);
    for (int i = 0; i < PRODUCERS; i++)
        px_fiber_release(px_spawn(producer, NULL));
    px_waitgroup_wait(producing);
    px_chan_close(jobs);                     /* the consumers drain, then end */
    for (int i = 0; i < CONSUMERS; i++) {
        px_join(c[i], NULL);
        px_fiber_release(c[i]);
    }
    printf("handled %ld values, sum %ld\n", handled, sum);
    px_chan_free(jobs);
    px_waitgroup_free(producing);
    return handled == PRODUCERS * EACH && sum == PRODUCERS * 5050 ? NULL : (void *)1;
}

int main(void)
{
    void *bad = NULL;
    return px_run(main_fiber, NULL, &bad) == 0 && bad == NULL ? 0 : 1;
}
