/*
** fork_child -- in the child of a fork() the parent's objects refuse work: on
** the timer queue add returns 0, cancel PX_EFORKED, cancel_all 0; every call on
** a deadline timer of that queue returns PX_EFORKED -- one the child made, and
** one the parent made with a wait pending (whose wait the child must not join);
** a px_queue of the parent refuses post, drain, wait and fd with PX_EFORKED and
** runs none of the parent's handlers; each free returns without hanging.  A
** px_queue made in the child works.  The parent's objects keep working.
*/
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"

static status_latch fired;

static void on_timer(void *arg, int status)
{
    (void)arg;
    status_latch_set(&fired, status);
}

static void on_never(void *arg, int status)
{
    (void)arg; (void)status;
    _exit(3);   /* a child must never run a parent's handler */
}

static int child_ran;

static void on_child(void *arg, int status)
{
    (void)arg;
    child_ran = status == 7 ? child_ran + 1 : -100;
}

static status_latch waited;

static void on_wait(void *arg, int status)
{
    (void)arg;
    status_latch_set(&waited, status);
}

static int parent_ran;

static void on_parent(void *arg, int status)
{
    (void)arg;
    parent_ran += status == 5;
}

/* The parent's px_queue and deadline timer in the child (exit codes 10..). */
static void child_queue_timer(px_queue *hq, px_timer *pt)
{
    if (px_timer_async_wait(pt, on_never, NULL) != PX_EFORKED)
        _exit(10);
    if (px_timer_expires_after(pt, PX_MSEC(1)) != PX_EFORKED)
        _exit(11);
    if (px_timer_expires_at(pt, 0) != PX_EFORKED)
        _exit(12);
    if (px_timer_cancel(pt) != PX_EFORKED)
        _exit(13);
    if (px_timer_expiry(pt) != PX_EFORKED)
        _exit(14);
    px_timer_free(pt);

    if (px_queue_drain(hq, 0) != PX_EFORKED || px_queue_drain(hq, 1) != PX_EFORKED)
        _exit(15);
    if (px_queue_post(hq, on_never, NULL, 0) != PX_EFORKED)
        _exit(16);
    if (px_queue_wait(hq, 0) != PX_EFORKED || px_queue_wait(hq, -1) != PX_EFORKED)
        _exit(17);
    if (px_queue_fd(hq) != PX_EFORKED || px_queue_size(hq) != 0)
        _exit(18);
    px_queue_free(hq);

    px_queue *mine = px_queue_new();
    if (mine == NULL || px_queue_post(mine, on_child, NULL, 7) != 0)
        _exit(19);
    if (px_queue_wait(mine, 0) != 1 || px_queue_drain(mine, 0) != 1 || child_ran != 1)
        _exit(20);
    px_queue_free(mine);
}

/* Exit codes tell the parent which promise broke. */
static void child(px_timerq *q, uint64_t far, px_queue *hq, px_timer *pt)
{
    alarm(20);   /* a hang in the child becomes SIGALRM, not a stuck test */
    child_queue_timer(hq, pt);
    if (px_timerq_add(q, 0, on_never, NULL) != 0)
        _exit(4);
    if (px_timerq_add_periodic(q, 0, PX_MSEC(1), on_never, NULL) != 0)
        _exit(5);
    if (px_timerq_cancel(q, far) != PX_EFORKED)
        _exit(6);
    if (px_timerq_cancel_all(q) != 0)
        _exit(7);
    px_timer *t = px_timer_new(q);           /* a deadline timer on it is refused too */
    if (t == NULL || px_timer_async_wait(t, on_never, NULL) != PX_EFORKED)
        _exit(8);
    px_timer_free(t);
    px_timerq_free(q);
    _exit(0);
}

int main(void)
{
    status_latch_init(&fired);
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    uint64_t far = px_timerq_add(q, PX_SEC(10), on_timer, NULL);
    CHECK(far != 0);
    status_latch_init(&waited);
    px_timer *pt = px_timer_new(q);
    CHECK(pt != NULL);
    CHECK_EQ(px_timer_expires_after(pt, PX_SEC(10)), 0);
    CHECK_EQ(px_timer_async_wait(pt, on_wait, NULL), 0);   /* a batch is pending */
    px_queue *hq = px_queue_new();
    CHECK(hq != NULL);
    CHECK_EQ(px_queue_post(hq, on_parent, NULL, 5), 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        child(q, far, hq, pt);
    int ws = 0;
    CHECK(waitpid(pid, &ws, 0) == pid);
    if (!WIFEXITED(ws))
        fprintf(stderr, "child died of signal %d\n", WIFSIGNALED(ws) ? WTERMSIG(ws) : -1);
    CHECK(WIFEXITED(ws));
    CHECK_EQ(WEXITSTATUS(ws), 0);

    CHECK(px_timerq_add(q, 0, on_timer, NULL) != 0);
    EV_WAIT(&fired.latch, 1);
    CHECK_EQ(fired.status, 0);
    CHECK_EQ(px_timerq_cancel(q, far), 1);
    EV_WAIT(&fired.latch, 2);
    CHECK_EQ(fired.status, PX_ECANCELED);

    CHECK_EQ(px_queue_size(hq), 1);          /* the parent's handler is still owed here */
    CHECK_EQ(px_queue_drain(hq, 0), 1);
    CHECK_EQ(parent_ran, 1);
    px_queue_free(hq);
    CHECK_EQ(px_timer_cancel(pt), 1);        /* and so is the parent's wait */
    EV_WAIT(&waited.latch, 1);
    CHECK_EQ(waited.status, PX_ECANCELED);
    px_timer_free(pt);
    px_timerq_free(q);
    puts("ok");
    return 0;
}
