/*
** sync_event.c -- a level that opens a gate for every waiter at once.
**
**   cc -std=c11 -Icore/include docs/examples/sync_event.c libparataxis.a -lpthread
*/
#include <stdio.h>

#include "parataxis.h"

static px_event *ready;
static const char *config;
static int started;

static void *consumer(void *arg)
{
    (void)arg;
    px_event_wait(ready);                    /* at once if already set */
    started++;
    printf("consumer %d sees config \"%s\"\n", started, config);
    return NULL;
}

static void *main_fiber(void *arg)
{
    (void)arg;
    ready = px_event_new();
    for (int i = 0; i < 3; i++)
        px_fiber_release(px_spawn(consumer, NULL));
    px_sleep(PX_MSEC(5));                    /* they are all parked by now */
    config = "loaded";
    printf("set woke %d\n", px_event_set(ready));
    px_sleep(PX_MSEC(5));
    px_fiber_release(px_spawn(consumer, NULL));   /* a late one: no wait */
    px_sleep(PX_MSEC(5));
    px_event_free(ready);
    return started == 4 ? NULL : (void *)1;
}

int main(void)
{
    void *bad = NULL;
    return px_run(main_fiber, NULL, &bad) == 0 && bad == NULL ? 0 : 1;
}
