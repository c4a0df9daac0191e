/*
** wait_fd_hostile.c -- px_wait_fd and px_fd_notify_closing used as a hostile
** user would, within what the header allows: fd numbers no table should grow
** for, the hooks, a hosted fiber that never calls again, px_sched_wake, several
** schedulers and threads, fork.  One SPEC (one ctest io.<name>) each.
*/
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
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

/* -- fd numbers no process can hold --------------------------------------- */

/* A closed fd is PX_EINVAL however large its number: the answer does not
** depend on growing a table to that number first (INT_MAX would ask for tens
** of GiB, and PX_ENOMEM is the wrong answer). */
static void *huge_fds(void *arg)
{
    (void)arg;
    struct rlimit rl;
    CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
    CHECK_EQ(px_wait_fd(INT_MAX, PX_READABLE), PX_EINVAL);
    CHECK_EQ(px_wait_fd(INT_MAX - 1, PX_WRITABLE), PX_EINVAL);
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < INT_MAX)
        CHECK_EQ(px_wait_fd((int)rl.rlim_cur, PX_READABLE), PX_EINVAL);
    CHECK_EQ(px_fd_notify_closing(INT_MAX), 0);
    /* and the fds that are open still wait as before */
    CHECK_EQ(write(P[1], "x", 1), 1);
    CHECK_EQ(px_wait_fd(P[0], PX_READABLE), 0);
    char c;
    CHECK_EQ(read(P[0], &c, 1), 1);
    return NULL;
}

SPEC(a_closed_fd_of_any_number_is_einval)
{
    pipe_open();
    CHECK_EQ(px_run(huge_fds, NULL, NULL), 0);
    pipe_close();
}

/* -- notify_closing from the on_wait hook --------------------------------- */

/* The hook may post and wake (the header says so): a notify_closing it makes
** on the scheduler's own thread wakes the waiter at once, instead of the run
** sleeping in the kernel with that fiber ready. */
typedef struct hook {
    int fd;
    int armed;
    int fired;
} hook;

static void on_wait(void *ctx, int entering)
{
    hook *h = ctx;
    if (entering && h->armed && !h->fired) {
        h->fired = 1;
        CHECK_EQ(px_fd_notify_closing(h->fd), 0);
    }
}

static void *waits_closed(void *arg)
{
    hook *h = arg;
    h->armed = 1;
    /* Bounded, so that the defect shows as a late PX_ECLOSED-less timeout
    ** rather than a hang. */
    CHECK_EQ(px_scope_push_timeout(PX_SEC(10)), 0);
    int64_t t0 = px_now();
    int r = px_wait_fd(h->fd, PX_READABLE);
    int64_t took = px_now() - t0;
    px_scope_pop();
    CHECK_EQ(r, PX_ECLOSED);
    CHECK(took < PX_SEC(5));
    return NULL;
}

SPEC(notify_closing_from_the_on_wait_hook_wakes_the_waiter_at_once)
{
    pipe_open();
    hook h = { P[0], 0, 0 };
    px_sched_opts o = { 0 };
    o.on_wait = on_wait;
    o.on_wait_ctx = &h;
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, waits_closed, &h), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(h.fired, 1);
    px_sched_free(s);
    pipe_close();
}

/* -- a hosted fiber that leaves its recorded wait for another -------------- */

/* A host that cannot switch inside C gets PX_EYIELD from px_wait_fd; a stray
** px_wake resumes it, and (an exception thrown into it, say) it never calls
** again: it waits for a mutex instead, then ends.  Its fd wait must not
** outlive it: the direction is free for the next reader, and the next event
** wakes nobody that is gone. */
typedef struct leaver {
    int step;
    px_mutex *mu;      /* what it waits for instead */
    px_fiber *self;
} leaver;

static int leaver_resume(void *ctx)
{
    leaver *m = ctx;
    switch (m->step++) {
    case 0:
        CHECK_EQ(px_wait_fd(P[0], PX_READABLE), PX_EYIELD);
        return 0;
    case 1:   /* the stray wake: it waits for the mutex instead of calling again */
        CHECK_EQ(px_mutex_lock(m->mu), PX_EYIELD);
        return 0;
    case 2:
        CHECK_EQ(px_mutex_lock(m->mu), 0);
        CHECK_EQ(px_mutex_unlock(m->mu), 0);
        return PX_HOST_DONE;
    }
    return PX_HOST_DONE;
}

static void leaver_release(void *ctx)
{
    (void)ctx;
}

static void *drives_the_leaver(void *arg)
{
    leaver *m = arg;
    CHECK_EQ(px_mutex_lock(m->mu), 0);
    CHECK_EQ(px_yield(), 0);                    /* the leaver parked in its fd wait */
    CHECK_EQ(px_wake(px_fiber_id(m->self)), 1); /* a stray wake */
    CHECK_EQ(px_yield(), 0);                    /* it queues on the mutex */
    CHECK_EQ(px_mutex_waiters(m->mu), 1);
    CHECK_EQ(px_mutex_unlock(m->mu), 0);
    return NULL;
}

static void *reads_after(void *arg)
{
    *(int *)arg = px_wait_fd(P[0], PX_READABLE);
    return NULL;
}

static void *after_the_leaver(void *arg)
{
    (void)arg;
    int r = 1;
    px_fiber *f = px_spawn(reads_after, &r);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(r, 1);                        /* parked, not PX_EBUSY: the direction is free */
    CHECK_EQ(write(P[1], "x", 1), 1);
    CHECK_EQ(px_join(f, NULL), 0);
    CHECK_EQ(r, 0);
    char c;
    CHECK_EQ(read(P[0], &c, 1), 1);
    return NULL;
}

SPEC(a_hosted_fiber_that_waits_elsewhere_instead_of_recalling_leaves_no_fd_wait)
{
    pipe_open();
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    leaver m = { 0, px_mutex_new(), NULL };
    CHECK(m.mu != NULL);
    px_host_ops ops = { leaver_resume, NULL, leaver_release };
    m.self = px_spawn_hosted(s, &ops, &m);
    CHECK(m.self != NULL);
    CHECK_EQ(px_sched_post(s, drives_the_leaver, &m), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(m.step, 3);
    CHECK_EQ(px_sched_post(s, after_the_leaver, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    px_sched_free(s);
    CHECK_EQ(px_mutex_free(m.mu), 0);
    pipe_close();
}

/* The other way round: a hosted fiber gets PX_EYIELD from px_mutex_lock, a
** stray wake resumes it, and it waits on an fd instead of calling again.  The
** mutex's hand-over must not land in the fd wait (which would then say
** "ready" with nothing to read, and leave the fiber owning the mutex and in
** the fd table): its queued lock is given up, as a scope would, and the
** mutex goes to nobody. */
typedef struct switcher {
    int step;
    px_mutex *mu;
    px_fiber *self;
    int fd_result;
} switcher;

static int switcher_resume(void *ctx)
{
    switcher *m = ctx;
    switch (m->step++) {
    case 0:   /* a yield: the driver takes the mutex first */
        return 0;
    case 1:
        CHECK_EQ(px_mutex_lock(m->mu), PX_EYIELD);
        return 0;
    case 2:   /* the stray wake: it waits on the fd instead of calling again */
        CHECK_EQ(px_wait_fd(P[0], PX_READABLE), PX_EYIELD);
        return 0;
    case 3:   /* resumed by the byte */
        m->fd_result = px_wait_fd(P[0], PX_READABLE);
        return PX_HOST_DONE;
    }
    return PX_HOST_DONE;
}

static void *drives_the_switcher(void *arg)
{
    switcher *m = arg;
    CHECK_EQ(px_mutex_lock(m->mu), 0);
    CHECK_EQ(px_yield(), 0);                     /* it queues on the mutex */
    CHECK_EQ(px_wake(px_fiber_id(m->self)), 1);  /* a stray wake */
    CHECK_EQ(px_yield(), 0);                     /* it waits on the fd instead */
    CHECK_EQ(px_mutex_unlock(m->mu), 0);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(m->step, 3);                        /* the unlock did not end its fd wait */
    CHECK_EQ(px_mutex_owner(m->mu), 0);
    CHECK_EQ(write(P[1], "x", 1), 1);
    return NULL;
}

SPEC(a_hosted_fiber_that_waits_on_an_fd_instead_of_recalling_gives_up_its_queued_lock)
{
    pipe_open();
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    switcher m = { 0, px_mutex_new(), NULL, 1 };
    CHECK(m.mu != NULL);
    CHECK_EQ(px_sched_post(s, drives_the_switcher, &m), 0);
    px_host_ops ops = { switcher_resume, NULL, leaver_release };
    m.self = px_spawn_hosted(s, &ops, &m);
    CHECK(m.self != NULL);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(m.step, 4);
    CHECK_EQ(m.fd_result, 0);
    char c;
    CHECK_EQ(read(P[0], &c, 1), 1);
    px_sched_free(s);
    CHECK_EQ(px_mutex_free(m.mu), 0);
    pipe_close();
}

/* -- px_sched_wake while the run is busy ---------------------------------- */

/* px_sched_wake ends "the wait under way, or else the next one": a wake made
** while fibers run must survive the per-batch look at the fds (which sees the
** scheduler's eventfd readable too), so the next kernel wait returns at once
** and the hook that follows it sees what the waker recorded. */
typedef struct waker {
    px_sched *s;
    int fd;
    int armed;      /* the waker called px_sched_wake: the next wait must end */
    int closed;
} waker;

static void wake_hook(void *ctx, int entering)
{
    waker *w = ctx;
    if (!entering && w->armed && !w->closed) {
        w->closed = 1;
        CHECK_EQ(px_fd_notify_closing(w->fd), 0);
    }
}

static void *waits_for_the_hook(void *arg)
{
    waker *w = arg;
    CHECK_EQ(px_scope_push_timeout(PX_SEC(10)), 0);
    int64_t t0 = px_now();
    int r = px_wait_fd(w->fd, PX_READABLE);
    int64_t took = px_now() - t0;
    px_scope_pop();
    CHECK_EQ(r, PX_ECLOSED);
    CHECK(took < PX_SEC(5));
    return NULL;
}

static void *wakes_while_busy(void *arg)
{
    waker *w = arg;
    CHECK_EQ(px_yield(), 0);              /* the other fiber waits on its fd */
    CHECK_EQ(px_sched_wake(w->s), 0);     /* as a signal handler would */
    w->armed = 1;
    CHECK_EQ(px_yield(), 0);              /* a batch ends: the loop looks at the fds */
    CHECK_EQ(px_yield(), 0);
    return NULL;
}

SPEC(px_sched_wake_while_busy_survives_the_look_at_the_fds)
{
    pipe_open();
    waker w = { NULL, P[0], 0, 0 };
    px_sched_opts o = { 0 };
    o.on_wait = wake_hook;
    o.on_wait_ctx = &w;
    w.s = px_sched_new(&o);
    CHECK(w.s != NULL);
    CHECK_EQ(px_sched_post(w.s, waits_for_the_hook, &w), 0);
    CHECK_EQ(px_sched_post(w.s, wakes_while_busy, &w), 0);
    CHECK_EQ(px_sched_run(w.s), 0);
    CHECK_EQ(w.closed, 1);
    px_sched_free(w.s);
    pipe_close();
}

/* -- a reader parked on another thread's scheduler ------------------------ */

/* runs_a_reader runs a scheduler whose reader waits on P[0]; `parked` opens
** once it waits (the fork test below). */
static px_latch parked;

static void *waits_readable(void *arg)
{
    *(int *)arg = px_wait_fd(P[0], PX_READABLE);
    return NULL;
}

static void *parks_then_tells(void *arg)
{
    px_fiber *f = px_spawn(waits_readable, arg);
    CHECK_EQ(px_yield(), 0);               /* f recorded its wait and parked */
    ev_set(&parked);
    CHECK_EQ(px_join(f, NULL), 0);
    return NULL;
}

static void *runs_a_reader(void *arg)
{
    CHECK_EQ(px_run(parks_then_tells, arg, NULL), 0);
    return NULL;
}

/* -- notify_closing against waits that scopes end, and px_sched_free ------ */

/* A thread notifies in a loop while schedulers are made, arm and disarm the
** fd under short scopes, and are freed: every wait ends with the scope's code
** or PX_ECLOSED (never ready: no byte comes), and nothing races (TSan). */
static atomic_int stop;

static void *notifies_in_a_loop(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        CHECK_EQ(px_fd_notify_closing(P[0]), 0);
    return NULL;
}

static void *short_waits(void *arg)
{
    int *closed = arg;
    for (int i = 0; i < 20; i++) {
        CHECK_EQ(px_scope_push_timeout(PX_MSEC(1)), 0);
        int r = px_wait_fd(P[0], PX_READABLE);
        px_scope_pop();
        CHECK(r == PX_ETIMEDOUT || r == PX_ECLOSED);
        *closed += r == PX_ECLOSED;
    }
    return NULL;
}

SPEC(notify_closing_races_scopes_and_px_sched_free_safely)
{
    pipe_open();
    atomic_store(&stop, 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, notifies_in_a_loop, NULL), 0);
    int closed = 0;
    for (int i = 0; i < 30; i++) {
        px_sched *s = px_sched_new(NULL);
        CHECK(s != NULL);
        CHECK_EQ(px_sched_post(s, short_waits, &closed), 0);
        CHECK_EQ(px_sched_run(s), 0);
        px_sched_free(s);
    }
    atomic_store(&stop, 1);
    CHECK_EQ(pthread_join(t, NULL), 0);
    pipe_close();
}

/* -- fork: a child's new scheduler ---------------------------------------- */

/* The parent's scheduler (on another thread) has a reader parked on P[0];
** a child of a fork made meanwhile runs a new scheduler that waits on the same
** fd through its own set.  The parent's set is not touched: its reader is
** still woken by the byte written after the child exited. */
static void *child_waits(void *arg)
{
    (void)arg;
    int q[2];
    CHECK_EQ(pipe2(q, O_NONBLOCK | O_CLOEXEC), 0);
    CHECK_EQ(px_scope_push_timeout(PX_MSEC(50)), 0);
    int r = px_wait_fd(P[0], PX_READABLE);           /* nothing comes */
    px_scope_pop();
    CHECK_EQ(write(q[1], "x", 1), 1);
    int r2 = px_wait_fd(q[0], PX_READABLE);
    CHECK_EQ(px_fd_notify_closing(q[0]), 0);
    CHECK_EQ(px_fd_notify_closing(P[0]), 0);         /* the child's own only */
    return (void *)(intptr_t)(r == PX_ETIMEDOUT && r2 == 0);
}

SPEC(a_fork_childs_new_scheduler_waits_on_fds_and_leaves_the_parents_set_alone)
{
    pipe_open();
    ev_init(&parked);
    int r = 1;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, runs_a_reader, &r), 0);
    EV_WAIT(&parked, 1);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        void *ok = NULL;
        int rr = px_run(child_waits, NULL, &ok);
        _exit(rr == 0 && ok != NULL ? 0 : 1);
    }
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ(write(P[1], "x", 1), 1);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(r, 0);
    ev_destroy(&parked);
    pipe_close();
}

/* -- a signal ends a pulled run's epoll wait ------------------------------ */

/* A pulled run whose only fiber waits on an fd sleeps in epoll_pwait2; a
** signal handled on its thread ends that wait: px_sched_next returns
** PX_EINTR, and the next pull goes on with the wait still registered (the
** byte written meanwhile wakes the reader). */
static atomic_int interrupted;
static atomic_int signals;

static void on_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&signals, 1);
}

static void *signals_until_interrupted(void *arg)
{
    pthread_t target = *(pthread_t *)arg;
    while (!atomic_load(&interrupted)) {
        pthread_kill(target, SIGUSR1);   /* again until a wait took one */
        sleep_ns(PX_MSEC(5));
    }
    return NULL;
}

SPEC(a_signal_ends_a_pulled_runs_fd_wait_with_eintr_and_the_wait_goes_on)
{
    pipe_open();
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;   /* no SA_RESTART */
    sigemptyset(&sa.sa_mask);
    CHECK_EQ(sigaction(SIGUSR1, &sa, &old), 0);
    atomic_store(&interrupted, 0);
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    int r = 1;
    CHECK_EQ(px_sched_post(s, waits_readable, &r), 0);
    pthread_t self = pthread_self(), t;
    CHECK_EQ(pthread_create(&t, NULL, signals_until_interrupted, &self), 0);
    void *ctx;
    CHECK_EQ(px_sched_next(s, 0, &ctx), PX_EINTR);
    atomic_store(&interrupted, 1);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK(atomic_load(&signals) >= 1);
    CHECK_EQ(r, 1);                          /* still waiting */
    CHECK_EQ(write(P[1], "x", 1), 1);
    int n;
    while ((n = px_sched_next(s, 0, &ctx)) == PX_EINTR)
        ;                                    /* a late signal of the loop above */
    CHECK_EQ(n, 0);
    CHECK_EQ(r, 0);
    px_sched_free(s);
    CHECK_EQ(sigaction(SIGUSR1, &old, NULL), 0);
    pipe_close();
}

SPECS(a_closed_fd_of_any_number_is_einval,
      notify_closing_from_the_on_wait_hook_wakes_the_waiter_at_once,
      a_hosted_fiber_that_waits_elsewhere_instead_of_recalling_leaves_no_fd_wait,
      a_hosted_fiber_that_waits_on_an_fd_instead_of_recalling_gives_up_its_queued_lock,
      px_sched_wake_while_busy_survives_the_look_at_the_fds,
      notify_closing_races_scopes_and_px_sched_free_safely,
      a_fork_childs_new_scheduler_waits_on_fds_and_leaves_the_parents_set_alone,
      a_signal_ends_a_pulled_runs_fd_wait_with_eintr_and_the_wait_goes_on)
