/* Slab stacks have no guard page: an overflow smashes the canary below lo,
 * which px__stack_intact reports; px__stack_overflowed then names the fiber
 * and aborts (checked in a forked child). */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fiber/ctx/context.h"
#include "fiber/stack.h"
#include "ctx_check.h"
#include "ctx_recurse.h"

static px__context main_ctx, f_ctx;
static px__stack cur;

static void overflow_a_little(void *arg)
{
    (void)arg;
    recurse_until((uintptr_t)cur.lo - 200); /* 200 bytes past the end */
    px__context_switch_final(&f_ctx, &main_ctx);
}

int main(void)
{
    px__stack_pool *pool;
    px__stack other;
    int fds[2], status;
    char out[512];
    ssize_t n;
    pid_t pid;
    setenv("PARATAXIS_GUARDED_STACKS", "0", 1);
    pool = px__stack_pool_new(32 * 1024);
    CHECK(pool && px__stack_get(pool, 0, &other) == 0 && px__stack_get(pool, 0, &cur) == 0);
    CHECK(cur.slab && !cur.guarded && px__stack_intact(&cur) && px__stack_intact(&other));
    px__context_init_thread(&main_ctx);
    CHECK(px__context_make(&f_ctx, cur.lo, cur.size, overflow_a_little, NULL) == 0);
    px__context_switch(&main_ctx, &f_ctx);
    CHECK(!px__stack_intact(&cur));
    px__context_destroy(&f_ctx);

    CHECK(pipe(fds) == 0);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) { /* what the scheduler does on a failed check */
        dup2(fds[1], 2);
        px__stack_overflowed(7);
    }
    close(fds[1]);
    n = read(fds[0], out, sizeof out - 1);
    out[n > 0 ? n : 0] = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    CHECK(strstr(out, "fiber 7 overflowed its stack"));

    px__stack_put(pool, &cur); /* a fresh get re-arms the canary */
    CHECK(px__stack_get(pool, 0, &cur) == 0 && px__stack_intact(&cur));
    px__stack_put(pool, &cur);
    px__stack_put(pool, &other);
    px__stack_pool_free(pool);
    return 0;
}
