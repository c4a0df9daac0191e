/*
** wait_fd_hostile.c -- px_wait_fd and px_fd_notify_closing used as a hostile
** user would, within what the header allows: fd numbers no table should grow
** for, a notify from the on_wait hook.  One SPEC (one ctest io.<name>) each.
*/
#include <fcntl.h>
#include <limits.h>
#include <sys/resource.h>
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

SPECS(a_closed_fd_of_any_number_is_einval,
      notify_closing_from_the_on_wait_hook_wakes_the_waiter_at_once)
