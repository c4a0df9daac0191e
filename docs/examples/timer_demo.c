/*
** timer_demo.c -- the timer queue doing its job from C.
**
** Build and run:  make demo   (or: cc timer_demo.c $(pkg-config --cflags --libs parataxis))
**
** Three one-shot timers, one of them cancelled; a periodic timer that ticks until
** cancelled; a deadline timer with two waiters; and handlers redirected to a
** px_queue drained on the main thread.  Every handler is called exactly once
** (a periodic one once per tick, then once with PX_ECANCELED).
*/
#include <stdio.h>

#include "parataxis.h"

static int64_t start;

static double ms(void)
{
    return (double)(px_now() - start) / 1e6;
}

/* status is 0 when the timer expired, PX_ECANCELED when it was aborted first. */
static void say(void *arg, int status)
{
    printf("%7.1f ms  %-28s %s\n", ms(), (const char *)arg,
           status == 0 ? "expired" : "aborted");
}

static void tick(void *arg, int status)
{
    int *ticks = arg;
    if (status == 0)
        printf("%7.1f ms  periodic, tick %d\n", ms(), ++*ticks);
    else
        say("periodic, final call", status);
}

int main(void)
{
    start = px_now();
    printf("parataxis %s from C\n", px_version());

    /* Handlers run on the main thread, inside px_queue_drain. */
    px_queue *inbox = px_queue_new();
    px_executor exec = px_queue_executor(inbox);
    px_timerq_opts opts = { .executor = &exec };
    px_timerq *q = px_timerq_new(&opts);
    if (q == NULL || inbox == NULL)
        return 1;

    px_timerq_add(q, PX_MSEC(30), say, "one-shot, 30 ms");
    px_timerq_add(q, PX_MSEC(10), say, "one-shot, 10 ms");
    uint64_t doomed = px_timerq_add(q, PX_MSEC(20), say, "one-shot, 20 ms, cancelled");
    printf("%7.1f ms  cancel the 20 ms timer: %d\n", ms(), px_timerq_cancel(q, doomed));

    int ticks = 0;
    uint64_t periodic = px_timerq_add_periodic(q, PX_MSEC(5), PX_MSEC(15), tick, &ticks);

    px_timer *t = px_timer_new(q);
    px_timer_expires_after(t, PX_MSEC(40));
    px_timer_async_wait(t, say, "deadline timer, waiter A");
    px_timer_async_wait(t, say, "deadline timer, waiter B");

    int64_t stop = px_now() + PX_MSEC(60);
    while (px_now() < stop) {
        px_queue_wait(inbox, stop - px_now());
        px_queue_drain(inbox, 0);
        if (ticks == 3 && periodic != 0) {
            px_timerq_cancel(q, periodic);   /* its final call follows */
            periodic = 0;
        }
    }
    printf("%7.1f ms  every handler ran exactly once; %zu pending\n", ms(),
           px_timerq_pending(q));

    px_timer_free(t);
    px_timerq_free(q);
    px_queue_free(inbox);      /* runs whatever the queue still holds */
    return 0;
}
