/*
** fibers_select.c -- a worker that waits for whichever comes first: a job on
** its channel, a job on the urgent channel, the quit event, or its idle
** deadline.
**
**   cc -std=c11 -Icore/include docs/examples/fibers_select.c libparataxis.a -lpthread
**
** Each px_select takes exactly one of them: a job not taken stays in its
** channel for the next round, and a case with a NULL object is switched off.
*/
#include <stdio.h>

#include "parataxis.h"

static px_chan *jobs, *urgent;
static px_event *quit;

static void *worker(void *arg)
{
    (void)arg;
    px_select_case cases[] = {
        { .kind = PX_SELECT_RECV, .obj = jobs },
        { .kind = PX_SELECT_RECV, .obj = urgent },
        { .kind = PX_SELECT_EVENT, .obj = quit },
        { .kind = PX_SELECT_DEADLINE },
    };
    for (;;) {
        cases[3].deadline = px_now() + PX_MSEC(50);   /* idle for 50 ms: say so */
        int i = px_select(cases, 4);
        if (i == 0 || i == 1)
            printf("%s job %d\n", i ? "urgent" : "plain", (int)(intptr_t)cases[i].value);
        else if (i == 2)
            break;
        else if (i == 3)
            printf("idle\n");
        else
            return NULL;                      /* an error: a scope of ours fired */
    }
    printf("quit\n");
    return NULL;
}

static void *main_fiber(void *arg)
{
    (void)arg;
    jobs = px_chan_new(4);
    urgent = px_chan_new(0);
    quit = px_event_new();
    px_fiber *w = px_spawn(worker, NULL);
    px_chan_send(jobs, (void *)1);
    px_chan_send(urgent, (void *)2);          /* a rendezvous: parks until taken */
    px_sleep(PX_MSEC(80));                    /* the worker goes idle once */
    px_event_set(quit);
    px_join(w, NULL);
    px_fiber_release(w);
    px_chan_free(jobs);
    px_chan_free(urgent);
    px_event_free(quit);
    return NULL;
}

int main(void)
{
    return px_run(main_fiber, NULL, NULL) == 0 ? 0 : 1;
}
