/*
** fibers_blocking.c -- a blocking call made on another thread, so that it
** stalls only the fiber that waits for its result, not the whole run.
**
**   cc fibers_blocking.c -lparataxis -pthread && ./a.out
**
** read(2) on a pipe blocks its thread until a fiber writes to the pipe.  Made
** in a fiber, it would block the scheduler's thread: the writer would never run
** and the program would hang.  Made on a thread of its own, it lets every fiber
** run meanwhile, and the thread hands the result back through px_sched_post.
*/
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "parataxis.h"

struct job {
    px_sched *s;                 /* the run to hand the result back to */
    int fd;
    char buf[64];
    ssize_t n;
    px_event *done;              /* set, in the run, once buf and n are final */
};

/* A fiber of the run, posted by the thread: the sync family is for fibers. */
static void *deliver(void *arg)
{
    struct job *j = arg;
    px_event_set(j->done);
    return NULL;
}

static void *blocking_read(void *arg)    /* the job's thread */
{
    struct job *j = arg;
    j->n = read(j->fd, j->buf, sizeof j->buf - 1);   /* blocks this thread only */
    px_sched_post(j->s, deliver, j);
    return NULL;
}

static void *ticker(void *fd)
{
    for (int i = 1; i <= 3; i++) {
        px_sleep(PX_MSEC(5));
        printf("tick %d\n", i);
    }
    const char msg[] = "hello through the pipe";
    if (write(*(int *)fd, msg, strlen(msg)) < 0)
        perror("write");
    printf("ticker: wrote to the pipe\n");
    return NULL;
}

static void *main_fiber(void *arg)
{
    struct job *j = arg;
    int fds[2];
    pthread_t t;
    if (pipe(fds) != 0)
        return NULL;
    j->fd = fds[0];
    j->done = px_event_new();
    /* The thread will post: hold the run open for it, or the run would see
    ** this fiber parked with nothing left to wake it and report a deadlock. */
    px_sched_hold(j->s);
    if (pthread_create(&t, NULL, blocking_read, j) != 0) {
        px_sched_unhold(j->s);
        return NULL;                     /* j->n stays 0: main says it failed */
    }
    px_fiber *tk = px_spawn(ticker, &fds[1]);
    px_event_wait(j->done);              /* parks this fiber; the ticker runs */
    px_sched_unhold(j->s);
    pthread_join(t, NULL);               /* at once: it has posted, it is ending */
    j->buf[j->n > 0 ? j->n : 0] = '\0';
    printf("main: read \"%s\" on another thread; the fibers ran meanwhile\n", j->buf);
    px_join(tk, NULL);
    px_fiber_release(tk);
    px_event_free(j->done);
    close(fds[0]);
    close(fds[1]);
    return NULL;
}

int main(void)
{
    struct job j = { .s = px_sched_new(NULL) };
    if (j.s == NULL || px_sched_post(j.s, main_fiber, &j) != 0)
        return 1;
    int r = px_sched_run(j.s);
    px_sched_free(j.s);
    return r == 0 && j.n > 0 ? 0 : 1;
}
