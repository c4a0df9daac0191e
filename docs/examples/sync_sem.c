/*
** sync_sem.c -- bounding a wait: a pool of 2 slots, and fibers that give up
** after 20 ms rather than queue for ever.
**
**   cc -std=c11 -Icore/include docs/examples/sync_sem.c libparataxis.a -lpthread
**
** px_with_timeout bounds every park inside its body.  A timed-out acquire
** holds no slot and is queued nowhere, so giving up (or retrying) is safe.
*/
#include <stdio.h>

#include "parataxis.h"

static px_sem *slots;
static int served, gave_up;

static int acquire_body(void *arg) { return px_sem_acquire(arg); }

static void *client(void *arg)
{
    int64_t hold = (int64_t)(intptr_t)arg;
    if (px_with_timeout(PX_MSEC(20), acquire_body, slots) == PX_ETIMEDOUT) {
        gave_up++;
        return NULL;
    }
    px_sleep(hold);                          /* use the slot */
    served++;
    px_sem_release(slots);
    return NULL;
}

static void *main_fiber(void *arg)
{
    (void)arg;
    slots = px_sem_new(2);
    /* Two long holders take both slots; the third client cannot get one
    ** within 20 ms, the fourth arrives after a slot is free again. */
    px_fiber *f[3] = {
        px_spawn(client, (void *)(intptr_t)PX_MSEC(200)),
        px_spawn(client, (void *)(intptr_t)PX_MSEC(200)),
        px_spawn(client, (void *)(intptr_t)PX_MSEC(1)),
    };
    for (int i = 0; i < 3; i++) {
        px_join(f[i], NULL);
        px_fiber_release(f[i]);
    }
    px_fiber *late = px_spawn(client, (void *)(intptr_t)PX_MSEC(1));
    px_join(late, NULL);
    px_fiber_release(late);
    printf("served %d, gave up %d, %zu waiting, %zu free\n", served, gave_up,
           px_sem_waiters(slots), px_sem_value(slots));
    px_sem_free(slots);
    return served == 3 && gave_up == 1 ? NULL : (void *)1;
}

int main(void)
{
    void *bad = NULL;
    return px_run(main_fiber, NULL, &bad) == 0 && bad == NULL ? 0 : 1;
}
