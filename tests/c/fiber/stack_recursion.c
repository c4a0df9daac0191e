/* Deep recursion within the stack size works, on guarded and slab stacks,
 * and leaves the canary intact. */
#include <stdint.h>
#include <stdlib.h>

#include "fiber/ctx/context.h"
#include "fiber/stack.h"
#include "ctx_check.h"
#include "ctx_recurse.h"

static px__context main_ctx, f_ctx;
static px__stack cur;
static long depth;

static void deep(void *arg)
{
    (void)arg;
    /* use all but 4 KiB of the stack */
    depth = recurse_until((uintptr_t)cur.lo + 4096);
    px__context_switch_final(&f_ctx, &main_ctx);
}

static void run_on(px__stack_pool *pool, int want_guarded)
{
    CHECK(px__stack_get(pool, 0, &cur) == 0);
    CHECK(cur.guarded == (unsigned)want_guarded);
    depth = 0;
    CHECK(px__context_make(&f_ctx, cur.lo, cur.size, deep, NULL) == 0);
    px__context_switch(&main_ctx, &f_ctx);
    CHECK(depth > 100); /* 64 KiB / ~300 bytes a frame */
    CHECK(px__stack_intact(&cur));
    px__context_destroy(&f_ctx);
    px__stack_put(pool, &cur);
}

int main(void)
{
    px__stack_pool *pool;
    setenv("PARATAXIS_GUARDED_STACKS", "1", 1); /* one guarded, then slabs */
    pool = px__stack_pool_new(64 * 1024);
    CHECK(pool);
    px__context_init_thread(&main_ctx);
    px__stack hold;
    run_on(pool, 1);
    CHECK(px__stack_get(pool, 0, &hold) == 0 && hold.guarded); /* uses the budget */
    run_on(pool, 0);
    px__stack_put(pool, &hold);
    px__stack_pool_free(pool);
    return 0;
}
