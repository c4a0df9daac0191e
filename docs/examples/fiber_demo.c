/*
** fiber_demo.c -- the fiber engine and the sync family doing their job from C.
**
** Build and run:  make demo   (or: cc fiber_demo.c $(pkg-config --cflags --libs parataxis))
**
** The program of fiber_demo.py and fiber_demo.lua: a producer and two consumers
** on a channel, a mutex handed over in FIFO order, a timeout that fires at the
** interrupted wait, timer handlers delivered as fibers, and a deadlock the
** engine explains -- a dump of the named fibers while they wait, then the
** report: who waits on whom.
*/
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "parataxis.h"

static int64_t start;
static px_sched *sched;          /* the run of main_fiber; timer handlers go there */

static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%7.1f ms  fiber %" PRIu64 ": ", (double)(px_now() - start) / 1e6,
           px_fiber_number(px_self()));
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
}

/* A producer and two consumers on a channel of capacity 2. */

static void *produce(void *ch)
{
    for (intptr_t i = 0; i < 5; i++)
        px_chan_send(ch, (void *)i);
    px_chan_close(ch);
    return NULL;
}

static px_chan *pipe_ch;

static void *consume(void *name)
{
    intptr_t total = 0;
    void *v;
    while (px_chan_recv(pipe_ch, &v) == 0) {   /* PX_ECLOSED once closed and drained */
        say("%s got %ld", (const char *)name, (long)(intptr_t)v);
        total += (intptr_t)v;
        px_yield();
    }
    return (void *)total;
}

static intptr_t pipeline(void)
{
    pipe_ch = px_chan_new(2);
    px_fiber_release(px_spawn(produce, pipe_ch));   /* runs on, detached */
    px_fiber *a = px_spawn(consume, "left"), *b = px_spawn(consume, "right");
    void *ra, *rb;
    px_join(a, &ra);
    px_join(b, &rb);
    px_fiber_release(a);
    px_fiber_release(b);
    px_chan_free(pipe_ch);
    return (intptr_t)ra + (intptr_t)rb;
}

/* Four fibers ask for a mutex in turn; it goes to them in that order. */

static px_mutex *m;
static int order[4], ordered;

static void *worker(void *i)
{
    px_mutex_lock(m);
    order[ordered++] = (int)(intptr_t)i;
    px_sleep(PX_MSEC(1));
    px_mutex_unlock(m);
    return NULL;
}

static void hand_off(void)
{
    px_fiber *w[4];
    m = px_mutex_new();
    for (intptr_t i = 0; i < 4; i++)
        w[i] = px_spawn(worker, (void *)(i + 1));
    for (int i = 0; i < 4; i++) {
        px_join(w[i], NULL);
        px_fiber_release(w[i]);
    }
    px_mutex_free(m);
    say("the mutex went to the fibers in the order they asked: %d, %d, %d, %d",
        order[0], order[1], order[2], order[3]);
}

/* A timeout bounds the wait inside it; timer handlers run as fibers of this run. */

static int wait_unset(void *e)
{
    return px_event_wait(e);             /* nobody sets it */
}

static px_waitgroup *handled;

static void handler(void *arg, int status)   /* a fiber of this run: it may lock and wait */
{
    (void)arg;
    px_mutex_lock(m);
    say("timer handler %s in a fiber", status == 0 ? "fired" : "aborted");
    px_mutex_unlock(m);
    px_waitgroup_done(handled);
}

static void timeouts_and_timers(void)
{
    px_event *e = px_event_new();
    int r = px_with_timeout(PX_MSEC(20), wait_unset, e);
    px_event_free(e);
    say("px_with_timeout(20 ms) fired at the interrupted wait: %s", px_strerror(r));

    m = px_mutex_new();
    handled = px_waitgroup_new();
    px_executor exec = px_sched_executor(sched);
    px_timerq_opts opts = { .executor = &exec };
    px_timerq *q = px_timerq_new(&opts);
    px_sched_hold(sched);                /* the queue may post: the run waits for it */
    px_waitgroup_add(handled, 2);
    px_timerq_add(q, PX_MSEC(30), handler, NULL);
    px_timerq_add(q, PX_MSEC(10), handler, NULL);
    px_waitgroup_wait(handled);
    px_sched_unhold(sched);
    px_timerq_free(q);
    px_waitgroup_free(handled);
    px_mutex_free(m);
}

static void *main_fiber(void *arg)
{
    (void)arg;
    say("pipeline total = %ld", (long)pipeline());
    hand_off();
    timeouts_and_timers();
    return NULL;
}

/* Two fibers take two mutexes in opposite orders. */

static px_mutex *ma, *mb;

static void *one(void *arg)
{
    (void)arg;
    px_mutex_lock(ma);
    px_yield();
    px_mutex_lock(mb);
    return NULL;
}

static void *other(void *arg)
{
    (void)arg;
    px_mutex_lock(mb);
    px_yield();
    px_mutex_lock(ma);
    return NULL;
}

/* Named fibers and mutexes: the dump and the report say who is who. */
static void *deadlock(void *arg)
{
    (void)arg;
    px_fiber_set_name(0, "main");
    px_fiber *x = px_spawn(one, NULL), *y = px_spawn(other, NULL);
    px_fiber_set_name(px_fiber_id(x), "transfer a->b");
    px_fiber_set_name(px_fiber_id(y), "transfer b->a");
    px_yield();   /* each takes its first mutex */
    px_yield();   /* and parks on its second */
    printf("px_dump while they wait:\n");
    px_dump(NULL, stdout);
    fflush(stdout);
    px_join(x, NULL);
    px_join(y, NULL);
    return NULL;
}

int main(void)
{
    start = px_now();
    sched = px_sched_new(NULL);
    if (sched == NULL || px_sched_post(sched, main_fiber, NULL) != 0)
        return 1;
    int r = px_sched_run(sched);
    px_sched_free(sched);
    if (r != 0)
        return 1;

    ma = px_mutex_new();
    mb = px_mutex_new();
    px_object_set_name(ma, "account a");
    px_object_set_name(mb, "account b");
    printf("px_run(deadlock); the engine's report, on stderr:\n");
    fflush(stdout);   /* stdout is buffered when piped: the report must not overtake it */
    r = px_run(deadlock, NULL, NULL);
    printf("px_run returned %s\n", px_strerror(r));
    px_mutex_free(ma);   /* px_run released what its discarded fibers held */
    px_mutex_free(mb);
    return r == PX_EDEADLK ? 0 : 1;
}
