/*
** fork_child -- in the child of a fork() the parent's queue refuses work: add
** returns 0, cancel PX_EFORKED, cancel_all 0, a deadline timer's wait PX_ECLOSED,
** and free returns without hanging;
** the parent's queue keeps working.
*/
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static px_latch fired;
static int status_seen = 1;

static void on_timer(void *arg, int status)
{
    (void)arg;
    status_seen = status;
    ev_set(&fired);
}

static void on_never(void *arg, int status)
{
    (void)arg; (void)status;
    _exit(3);   /* a child must never run a parent's handler */
}

/* Exit codes tell the parent which promise broke. */
static void child(px_timerq *q, uint64_t far)
{
    alarm(20);   /* a hang in the child becomes SIGALRM, not a stuck test */
    if (px_timerq_add(q, 0, on_never, NULL) != 0)
        _exit(4);
    if (px_timerq_add_periodic(q, 0, PX_MSEC(1), on_never, NULL) != 0)
        _exit(5);
    if (px_timerq_cancel(q, far) != PX_EFORKED)
        _exit(6);
    if (px_timerq_cancel_all(q) != 0)
        _exit(7);
    px_timer *t = px_timer_new(q);           /* a deadline timer on it is refused too */
    if (t == NULL || px_timer_async_wait(t, on_never, NULL) != PX_ECLOSED)
        _exit(8);
    px_timer_free(t);
    px_timerq_free(q);
    _exit(0);
}

int main(void)
{
    ev_init(&fired);
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    uint64_t far = px_timerq_add(q, PX_SEC(10), on_timer, NULL);
    CHECK(far != 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        child(q, far);
    int ws = 0;
    CHECK(waitpid(pid, &ws, 0) == pid);
    if (!WIFEXITED(ws))
        fprintf(stderr, "child died of signal %d\n", WIFSIGNALED(ws) ? WTERMSIG(ws) : -1);
    CHECK(WIFEXITED(ws));
    CHECK_EQ(WEXITSTATUS(ws), 0);

    CHECK(px_timerq_add(q, 0, on_timer, NULL) != 0);
    EV_WAIT(&fired, 1);
    CHECK_EQ(status_seen, 0);
    CHECK_EQ(px_timerq_cancel(q, far), 1);
    EV_WAIT(&fired, 2);
    CHECK_EQ(status_seen, PX_ECANCELED);
    px_timerq_free(q);
    puts("ok");
    return 0;
}
