/* Deep recursion within the stack size works, on guarded and slab stacks,
 * and leaves the canary intact. */
#include <stdint.h>
#include <stdlib.h>

#include "context.h"
#include "stack.h"
#include "ctx_check.h"
#include "ctx_recurse.h"

static px_context main_ctx, f_ctx;
static px_stack cur;
static long depth;

static void deep(void *arg) {
  (void)arg;
  /* use all but 4 KiB of the stack */
  depth = recurse_until((uintptr_t)cur.lo + 4096);
  px_context_switch_final(&f_ctx, &main_ctx);
}

static void run_on(px_stack_pool *pool, int want_guarded) {
  CHECK(px_stack_get(pool, 0, &cur) == 0);
  CHECK(cur.guarded == (unsigned)want_guarded);
  depth = 0;
  CHECK(px_context_make(&f_ctx, cur.lo, cur.size, deep, NULL) == 0);
  px_context_switch(&main_ctx, &f_ctx);
  CHECK(depth > 100);   /* 64 KiB / ~300 bytes a frame */
  CHECK(px_stack_intact(&cur));
  px_context_destroy(&f_ctx);
  px_stack_put(pool, &cur);
}

int main(void) {
  px_stack_pool *pool;
  setenv("PARATAXIS_GUARDED_STACKS", "1", 1);   /* one guarded, then slabs */
  pool = px_stack_pool_new(64 * 1024);
  CHECK(pool);
  px_context_init_thread(&main_ctx);
  px_stack hold;
  run_on(pool, 1);
  CHECK(px_stack_get(pool, 0, &hold) == 0 && hold.guarded);   /* uses the budget */
  run_on(pool, 0);
  px_stack_put(pool, &hold);
  px_stack_pool_free(pool);
  return 0;
}
