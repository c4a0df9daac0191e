/*
** wait_fd.c -- px_wait_fd and px_fd_notify_closing: a fiber parks until its
** fd is ready, every rule of the header, one SPEC (one ctest io.<name>) each.
*/
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../spec.h"

static int P[2];                 /* a pipe: P[0] read end, P[1] write end */

static void pipe_open(void)
{
    CHECK_EQ(pipe2(P, O_NONBLOCK | O_CLOEXEC), 0);
}

static void pipe_close(void)
{
    px_fd_notify_closing(P[0]);
    px_fd_notify_closing(P[1]);
    close(P[0]);
    close(P[1]);
}

static void put_byte(int fd)
{
    CHECK_EQ(write(fd, "x", 1), 1);
}

static void get_byte(int fd)
{
    char c;
    CHECK_EQ(read(fd, &c, 1), 1);
}

/* -- ready ----------------------------------------------------------------- */

static void *writer(void *arg)
{
    (void)arg;
    put_byte(P[1]);
    return NULL;
}

static void *reads_one(void *arg)
{
    (void)arg;
    char c;
    CHECK_EQ(read(P[0], &c, 1), -1);          /* nothing yet */
    CHECK_EQ(errno, EAGAIN);
    px_fiber *w = px_spawn(writer, NULL);     /* runs only once we park */
    CHECK_EQ(px_wait_fd(P[0], PX_READABLE), 0);
    get_byte(P[0]);
    CHECK_EQ(px_join(w, NULL), 0);
    return NULL;
}

SPEC(wait_fd_wakes_a_reader_when_data_comes)
{
    pipe_open();
    CHECK_EQ(px_run(reads_one, NULL, NULL), 0);
    pipe_close();
}

static void *drainer(void *arg)
{
    char buf[4096];
    *(int *)arg = 1;
    while (read(P[0], buf, sizeof buf) > 0) {
    }
    return NULL;
}

static void *writes_until_full(void *arg)
{
    (void)arg;
    char buf[4096] = { 0 };
    while (write(P[1], buf, sizeof buf) > 0) {
    }
    CHECK_EQ(errno, EAGAIN);
    int drained = 0;
    px_fiber *d = px_spawn(drainer, &drained);
    CHECK_EQ(px_wait_fd(P[1], PX_WRITABLE), 0);
    CHECK_EQ(drained, 1);
    CHECK(write(P[1], buf, sizeof buf) > 0);
    CHECK_EQ(px_join(d, NULL), 0);
    return NULL;
}

SPEC(wait_fd_wakes_a_writer_when_there_is_room)
{
    pipe_open();
    CHECK_EQ(px_run(writes_until_full, NULL, NULL), 0);
    pipe_close();
}

/* A wait on both directions ends with either, once: a socket with room is
** writable at once; a second wait on both then sees no stale count. */
static void *both(void *arg)
{
    int *sv = arg;
    for (int i = 0; i < 3; i++)
        CHECK_EQ(px_wait_fd(sv[0], PX_READABLE | PX_WRITABLE), 0);
    CHECK_EQ(px_fd_notify_closing(sv[0]), 0);
    return NULL;
}

SPEC(a_wait_on_both_directions_ends_with_either)
{
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    CHECK_EQ(px_run(both, sv, NULL), 0);
    close(sv[0]);
    close(sv[1]);
}

/* -- one reader and one writer --------------------------------------------- */

static void *waits_readable(void *arg)
{
    *(int *)arg = px_wait_fd(P[0], PX_READABLE);
    return NULL;
}

static void *second_waiter(void *arg)
{
    (void)arg;
    int first = 1;
    px_fiber *f = px_spawn(waits_readable, &first);
    CHECK_EQ(px_yield(), 0);                               /* f parks */
    CHECK_EQ(px_wait_fd(P[0], PX_READABLE), PX_EBUSY);
    CHECK_EQ(px_wait_fd(P[0], PX_READABLE | PX_WRITABLE), PX_EBUSY);
    /* The other direction is free: a pipe's read end is never writable, so
    ** bound it. */
    CHECK_EQ(px_scope_push_timeout(PX_MSEC(20)), 0);
    CHECK_EQ(px_wait_fd(P[0], PX_WRITABLE), PX_ETIMEDOUT);
    CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
    put_byte(P[1]);
    CHECK_EQ(px_join(f, NULL), 0);
    CHECK_EQ(first, 0);
    get_byte(P[0]);
    return NULL;
}

SPEC(a_second_waiter_in_the_same_direction_is_ebusy)
{
    pipe_open();
    CHECK_EQ(px_run(second_waiter, NULL, NULL), 0);
    pipe_close();
}

/* -- scopes ---------------------------------------------------------------- */

static void *scoped(void *arg)
{
    (void)arg;
    CHECK_EQ(px_scope_push_timeout(PX_MSEC(20)), 0);
    int64_t t0 = px_now();
    CHECK_EQ(px_wait_fd(P[0], PX_READABLE), PX_ETIMEDOUT);
    CHECK_GE(px_now() - t0, PX_MSEC(20));
    CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
    /* Nothing left registered: another fiber may wait there now, and the
    ** data wakes that one. */
    int r = 1;
    px_fiber *f = px_spawn(waits_readable, &r);
    CHECK_EQ(px_yield(), 0);
    put_byte(P[1]);
    CHECK_EQ(px_join(f, NULL), 0);
    CHECK_EQ(r, 0);
    get_byte(P[0]);
    /* A cancelled token ends it too. */
    px_token *t = px_token_new();
    CHECK(t != NULL);
    CHECK_EQ(px_scope_push_cancel(t), 0);
    CHECK(px_token_cancel(t) >= 0);
    CHECK_EQ(px_wait_fd(P[0], PX_READABLE), PX_ECANCELED);
    CHECK_EQ(px_scope_pop(), PX_ECANCELED);
    px_token_free(t);
    return NULL;
}

SPEC(a_scope_ends_a_wait_and_leaves_nothing_registered)
{
    pipe_open();
    CHECK_EQ(px_run(scoped, NULL, NULL), 0);
    pipe_close();
}

/* -- refusals -------------------------------------------------------------- */

static void *refusals(void *arg)
{
    (void)arg;
    char path[] = "/tmp/px_wait_fd_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    CHECK_EQ(px_wait_fd(fd, PX_READABLE), PX_ENOTSUP);
    close(fd);
    CHECK_EQ(px_wait_fd(fd, PX_READABLE), PX_EINVAL);      /* closed */
    CHECK_EQ(px_wait_fd(-1, PX_READABLE), PX_EINVAL);
    CHECK_EQ(px_wait_fd(P[0], 0), PX_EINVAL);
    CHECK_EQ(px_wait_fd(P[0], 4), PX_EINVAL);
    CHECK_EQ(px_fd_notify_closing(-1), PX_EINVAL);
    return NULL;
}

SPEC(a_regular_file_is_enotsup_and_a_bad_fd_einval)
{
    pipe_open();
    CHECK_EQ(px_wait_fd(P[0], PX_READABLE), PX_ENOFIBER);
    CHECK_EQ(px_run(refusals, NULL, NULL), 0);
    pipe_close();
}

/* -- hang-up --------------------------------------------------------------- */

static void *closes_write_end(void *arg)
{
    (void)arg;
    px_fd_notify_closing(P[1]);
    close(P[1]);
    P[1] = -1;
    return NULL;
}

static void *hangup(void *arg)
{
    (void)arg;
    px_fiber *c = px_spawn(closes_write_end, NULL);
    CHECK_EQ(px_wait_fd(P[0], PX_READABLE), 0);
    char ch;
    CHECK_EQ(read(P[0], &ch, 1), 0);                       /* end of file */
    CHECK_EQ(px_join(c, NULL), 0);
    return NULL;
}

SPEC(a_pipes_hangup_wakes_its_reader)
{
    pipe_open();
    CHECK_EQ(px_run(hangup, NULL, NULL), 0);
    close(P[0]);
}

/* -- notify_closing -------------------------------------------------------- */

static void *closer(void *arg)
{
    (void)arg;
    CHECK_EQ(px_fd_notify_closing(P[0]), 0);
    return NULL;
}

static void *notified(void *arg)
{
    (void)arg;
    int r = 1, w = 1;
    px_fiber *a = px_spawn(waits_readable, &r);
    CHECK_EQ(px_yield(), 0);
    /* a writer on the same fd: a pipe's read end never becomes writable */
    px_fiber *b = px_spawn(closer, NULL);
    CHECK_EQ(px_wait_fd(P[0], PX_WRITABLE), PX_ECLOSED);
    w = 0;
    CHECK_EQ(px_join(a, NULL), 0);
    CHECK_EQ(px_join(b, NULL), 0);
    CHECK_EQ(r, PX_ECLOSED);
    CHECK_EQ(w, 0);
    return NULL;
}

SPEC(notify_closing_wakes_every_waiter_with_eclosed)
{
    pipe_open();
    CHECK_EQ(px_run(notified, NULL, NULL), 0);
    pipe_close();
}

static px_latch parked;

static void *notifies_from_a_thread(void *arg)
{
    (void)arg;
    EV_WAIT(&parked, 1);
    CHECK_EQ(px_fd_notify_closing(P[0]), 0);
    return NULL;
}

static void *waits_for_the_thread(void *arg)
{
    (void)arg;
    /* Told it parks by the yield that precedes the park: the thread's notify
    ** finds the wait either way, it is recorded before the latch opens. */
    px_fiber *f = px_spawn(waits_readable, arg);
    CHECK_EQ(px_yield(), 0);
    ev_set(&parked);
    CHECK_EQ(px_join(f, NULL), 0);
    return NULL;
}

SPEC(notify_closing_from_another_thread_wakes_the_waiter)
{
    pipe_open();
    ev_init(&parked);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, notifies_from_a_thread, NULL), 0);
    int r = 1;
    CHECK_EQ(px_run(waits_for_the_thread, &r, NULL), 0);
    CHECK_EQ(r, PX_ECLOSED);
    CHECK_EQ(pthread_join(t, NULL), 0);
    ev_destroy(&parked);
    pipe_close();
}

/* The waiter of an fd notified and closed is woken with PX_ECLOSED; the fd
** number, reused at once by another pipe, serves a new waiter, which only
** that pipe's data wakes. */
static void *reused(void *arg)
{
    (void)arg;
    int r1 = 1, r2 = 1;
    px_fiber *a = px_spawn(waits_readable, &r1);
    CHECK_EQ(px_yield(), 0);
    put_byte(P[1]);                    /* ready: but notified before it runs */
    int old = P[0], old_w = P[1];
    CHECK_EQ(px_fd_notify_closing(old), 0);
    close(old);
    int q[2];
    CHECK_EQ(pipe2(q, O_NONBLOCK | O_CLOEXEC), 0);
    CHECK_EQ(q[0], old);               /* the lowest free number */
    P[0] = q[0];
    P[1] = q[1];
    px_fiber *b = px_spawn(waits_readable, &r2);
    CHECK_EQ(px_join(a, NULL), 0);
    CHECK_EQ(r1, PX_ECLOSED);
    CHECK_EQ(px_sleep(PX_MSEC(20)), 0);
    CHECK_EQ(r2, 1);                   /* still waits: the old pipe's byte is not its */
    put_byte(P[1]);
    CHECK_EQ(px_join(b, NULL), 0);
    CHECK_EQ(r2, 0);
    close(old_w);
    return NULL;
}

SPEC(a_reused_fd_number_gets_no_stale_wake)
{
    pipe_open();
    CHECK_EQ(px_run(reused, NULL, NULL), 0);
    pipe_close();
}

/* -- the wait is a park like any other ------------------------------------- */

static void *stray(void *arg)
{
    (void)arg;
    int r = 1;
    px_fiber *f = px_spawn(waits_readable, &r);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_wake(px_fiber_id(f)), 1);      /* a wake that is not the fd's */
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(r, 1);                            /* parked again */
    put_byte(P[1]);
    CHECK_EQ(px_join(f, NULL), 0);
    CHECK_EQ(r, 0);
    get_byte(P[0]);
    return NULL;
}

SPEC(a_stray_wake_does_not_end_an_fd_wait)
{
    pipe_open();
    CHECK_EQ(px_run(stray, NULL, NULL), 0);
    pipe_close();
}

static void *writes_later(void *arg)
{
    (void)arg;
    EV_WAIT(&parked, 1);
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    put_byte(P[1]);
    return NULL;
}

static void *waits_alone(void *arg)
{
    (void)arg;
    ev_set(&parked);
    CHECK_EQ(px_wait_fd(P[0], PX_READABLE), 0);
    get_byte(P[0]);
    return NULL;
}

SPEC(an_fd_waiter_is_not_a_deadlock)
{
    pipe_open();
    ev_init(&parked);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, writes_later, NULL), 0);
    CHECK_EQ(px_run(waits_alone, NULL, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    ev_destroy(&parked);
    pipe_close();
}

/* A fiber that only yields keeps the run busy; a thread's byte still wakes
** the reader, which then stops it. */
static atomic_int stop;

static void *spinner(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        CHECK_EQ(px_yield(), 0);
    return NULL;
}

static void *busy(void *arg)
{
    (void)arg;
    px_fiber *s = px_spawn(spinner, NULL);
    CHECK_EQ(px_yield(), 0);
    ev_set(&parked);
    CHECK_EQ(px_wait_fd(P[0], PX_READABLE), 0);
    atomic_store(&stop, 1);
    get_byte(P[0]);
    CHECK_EQ(px_join(s, NULL), 0);
    return NULL;
}

SPEC(a_busy_run_does_not_starve_io)
{
    pipe_open();
    ev_init(&parked);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, writes_later, NULL), 0);
    CHECK_EQ(px_run(busy, NULL, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    ev_destroy(&parked);
    pipe_close();
}

/* -- a hosted fiber whose host cannot switch inside C ---------------------- */

typedef struct machine {
    int step;
    int done;
} machine;

static int resume(void *ctx)
{
    machine *m = ctx;
    switch (m->step++) {
    case 0:
        CHECK_EQ(px_wait_fd(P[0], PX_READABLE), PX_EYIELD);
        return 0;
    case 1:   /* resumed by the byte: the same call collects */
        CHECK_EQ(px_wait_fd(P[0], PX_READABLE), 0);
        get_byte(P[0]);
        CHECK_EQ(px_scope_push_timeout(PX_MSEC(10)), 0);
        CHECK_EQ(px_wait_fd(P[0], PX_READABLE), PX_EYIELD);
        return 0;
    case 2:   /* the scope ended it: dereg ran, the call says so */
        CHECK_EQ(px_wait_fd(P[0], PX_READABLE), PX_ETIMEDOUT);
        CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
        /* and a wait whose fiber ends before it comes back leaves nothing */
        CHECK_EQ(px_wait_fd(P[0], PX_READABLE), PX_EYIELD);
        m->done = 1;
        return PX_HOST_DONE;
    }
    return PX_HOST_DONE;
}

static void release(void *ctx)
{
    (void)ctx;
}

static void *after_host(void *arg)
{
    (void)arg;
    CHECK_EQ(px_yield(), 0);
    put_byte(P[1]);
    return NULL;
}

static void *after_end(void *arg)
{
    int r = 1;
    px_fiber *f = px_spawn(waits_readable, &r);   /* the direction is free again */
    CHECK_EQ(px_yield(), 0);
    put_byte(P[1]);
    CHECK_EQ(px_join(f, NULL), 0);
    CHECK_EQ(r, 0);
    get_byte(P[0]);
    *(int *)arg = 1;
    return NULL;
}

SPEC(a_hosted_fiber_waits_through_eyield_and_a_recall)
{
    pipe_open();
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    machine m = { 0, 0 };
    px_host_ops ops = { resume, NULL, release };
    CHECK(px_spawn_hosted(s, &ops, &m) != NULL);
    CHECK_EQ(px_sched_post(s, after_host, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(m.done, 1);
    int ok = 0;
    CHECK_EQ(px_sched_post(s, after_end, &ok), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(ok, 1);
    px_sched_free(s);
    pipe_close();
}

/* -- fork ------------------------------------------------------------------ */

static void *forks(void *arg)
{
    (void)arg;
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* The child: no fiber, and the parent's set is left alone. */
        int bad = px_wait_fd(P[0], PX_READABLE) != PX_ENOFIBER;
        bad |= px_fd_notify_closing(P[0]) != 0;
        _exit(bad);
    }
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    put_byte(P[1]);
    return NULL;
}

static void *fork_parent(void *arg)
{
    int r = 1;
    px_fiber *f = px_spawn(waits_readable, &r);
    CHECK_EQ(px_yield(), 0);
    px_fiber *k = px_spawn(forks, arg);
    CHECK_EQ(px_join(k, NULL), 0);
    CHECK_EQ(px_join(f, NULL), 0);
    CHECK_EQ(r, 0);                    /* woken by the byte, not closed by the child */
    get_byte(P[0]);
    return NULL;
}

SPEC(notify_closing_in_a_fork_child_leaves_the_parent_alone)
{
    pipe_open();
    CHECK_EQ(px_run(fork_parent, NULL, NULL), 0);
    pipe_close();
}

SPECS(wait_fd_wakes_a_reader_when_data_comes,
      wait_fd_wakes_a_writer_when_there_is_room,
      a_wait_on_both_directions_ends_with_either,
      a_second_waiter_in_the_same_direction_is_ebusy,
      a_scope_ends_a_wait_and_leaves_nothing_registered,
      a_regular_file_is_enotsup_and_a_bad_fd_einval,
      a_pipes_hangup_wakes_its_reader,
      notify_closing_wakes_every_waiter_with_eclosed,
      notify_closing_from_another_thread_wakes_the_waiter,
      a_reused_fd_number_gets_no_stale_wake,
      a_stray_wake_does_not_end_an_fd_wait,
      an_fd_waiter_is_not_a_deadlock,
      a_busy_run_does_not_starve_io,
      a_hosted_fiber_waits_through_eyield_and_a_recall,
      notify_closing_in_a_fork_child_leaves_the_parent_alone)
