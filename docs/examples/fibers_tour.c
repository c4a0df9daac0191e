/*
** fibers_tour.c -- the fiber engine in one program: fan-out and join, sleep, a
** timeout, a cancellation token, and a deliberate deadlock with its report.
**
**   cc fibers_tour.c -lparataxis && ./a.out
*/
#include <stdint.h>
#include <stdio.h>

#include "parataxis.h"

static void *work(void *arg)
{
    intptr_t n = (intptr_t)arg;
    px_sleep(PX_MSEC(10 * (4 - n)));        /* the last spawned finishes first */
    return (void *)(n * n);
}

static int wait_forever(void *arg)
{
    (void)arg;
    return px_park("waits for nothing", NULL, NULL);
}

static void *cancel_later(void *arg)
{
    px_sleep(PX_MSEC(5));
    px_token_cancel(arg);
    return NULL;
}

static void *tour(void *arg)
{
    (void)arg;
    /* Fan out, then join in spawn order: results come back whatever the finish order. */
    px_fiber *f[4];
    for (intptr_t i = 0; i < 4; i++)
        f[i] = px_spawn(work, (void *)i);
    for (int i = 0; i < 4; i++) {
        void *r;
        px_join(f[i], &r);
        px_fiber_release(f[i]);
        printf("fiber %d returned %ld\n", i, (long)(intptr_t)r);
    }

    /* A timeout bounds every park inside it. */
    int r = px_with_timeout(PX_MSEC(20), wait_forever, NULL);
    printf("with_timeout: %s\n", px_strerror(r));

    /* A token cancels every park inside its scope, from any fiber or thread. */
    px_token *t = px_token_new();
    px_fiber *c = px_spawn(cancel_later, t);
    r = px_with_cancel(t, wait_forever, NULL);
    printf("with_cancel: %s\n", px_strerror(r));
    px_join(c, NULL);
    px_fiber_release(c);
    px_token_free(t);
    return NULL;
}

static void *stuck(void *arg)
{
    (void)arg;
    px_park("nobody will wake me", NULL, NULL);
    return NULL;
}

int main(void)
{
    if (px_run(tour, NULL, NULL) != 0)
        return 1;
    /* Nothing can ever wake this fiber: px_run reports it and says PX_EDEADLK.
    ** The report goes to stderr: flush what stdout holds first, or a pipe shows
    ** the report before the lines printed ahead of it. */
    fflush(stdout);
    int r = px_run(stuck, NULL, NULL);
    printf("px_run: %s\n", px_strerror(r));
    return r == PX_EDEADLK ? 0 : 1;
}
