/*
** reap.h -- waiting for a forked child, for the fork tests.
*/
#ifndef PX_TEST_REAP_H
#define PX_TEST_REAP_H

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "../check.h"

/* Waits at most bound_ns for the child (`who` in the messages): kills it and
** fails on a hang, and fails unless it exited with status 0. */
static inline void reap_child(pid_t pid, int64_t bound_ns, const char *who)
{
    int64_t until = px_now() + bound_ns;
    int ws = 0;
    pid_t r;
    while ((r = waitpid(pid, &ws, WNOHANG)) == 0 && px_now() < until)
        sleep_ns(PX_MSEC(1));
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &ws, 0);
        fprintf(stderr, "%s hung (killed after %lld s)\n", who,
                (long long)(bound_ns / PX_SEC(1)));
        exit(1);
    }
    CHECK_EQ(r, pid);
    if (!WIFEXITED(ws))
        fprintf(stderr, "%s died of signal %d\n", who, WIFSIGNALED(ws) ? WTERMSIG(ws) : -1);
    CHECK(WIFEXITED(ws));
    CHECK_EQ(WEXITSTATUS(ws), 0);
}

#endif /* PX_TEST_REAP_H */
