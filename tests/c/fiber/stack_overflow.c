/* A fiber that overflows a guarded stack dies with SIGABRT and the message
 * "fiber N overflowed its stack"; the test runs it in a forked child. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fiber/ctx/context.h"
#include "fiber/stack.h"
#include "ctx_check.h"
#include "ctx_recurse.h"

static px__context main_ctx, f_ctx;

static void runaway(void *arg)
{
    (void)arg;
    recurse_until(0);
    px__context_switch_final(&f_ctx, &main_ctx);
}

static void child(void)
{
    px__stack_pool *pool = px__stack_pool_new(32 * 1024);
    px__stack s;
    CHECK(pool && px__stack_get(pool, 0, &s) == 0 && s.guarded);
    CHECK(px__context_make(&f_ctx, s.lo, s.size, runaway, NULL) == 0);
    px__context_init_thread(&main_ctx);
    px__stack_running(42, &s);
    px__context_switch(&main_ctx, &f_ctx);
    _exit(3); /* not reached */
}

int main(void)
{
    int fds[2], status;
    char out[4096];
    size_t n = 0;
    ssize_t r;
    pid_t pid;
    CHECK(pipe(fds) == 0);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        child();
    }
    close(fds[1]);
    while (n < sizeof out - 1 && (r = read(fds[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    fprintf(stderr, "child said: %s", out);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    CHECK(strstr(out, "parataxis: fiber 42 overflowed its stack"));
    return 0;
}
