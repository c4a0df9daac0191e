/* consumer.c -- a program built against an installed libparataxis. */
#include <parataxis.h>
#include <stdio.h>
#include <string.h>

static void fired(void *arg, int status)
{
    *(int *)arg = status == 0 ? 1 : -1;
}

int main(void)
{
    int result = 0;
    px_queue *inbox = px_queue_new();
    px_executor exec = px_queue_executor(inbox);
    px_timerq_opts opts = { .executor = &exec };
    px_timerq *q = px_timerq_new(&opts);
    px_timerq_add(q, PX_MSEC(1), fired, &result);
    while (result == 0 && px_queue_wait(inbox, PX_SEC(10)) == 1)
        px_queue_drain(inbox, 0);
    px_timerq_free(q);
    px_queue_free(inbox);
    printf("parataxis %s: timer %s\n", px_version(), result == 1 ? "fired" : "FAILED");
    return result == 1 && strcmp(px_version(), "0.1.0") == 0 ? 0 : 1;
}
