/* Callee-saved registers and FP control state survive switches, per context:
 * a rounding mode set in a fiber stays there, the thread keeps its own. */
#include <fenv.h>

#include "fiber/ctx/context.h"
#include "fiber/stack.h"
#include "ctx_check.h"

static px__context main_ctx, f_ctx;
static volatile int fiber_mode_ok;
static volatile double one = 1.0, three = 3.0; /* SSE / NEON division */

/* Many values live across the switch: the compiler must keep them in
 * callee-saved registers (or spill them to the stack we preserve). */
static long juggle(px__context *self, px__context *other, long seed)
{
    long a = seed * 3, b = seed ^ 0x55, c = seed + 7, d = seed * seed, e = ~seed, f = seed << 3,
         g = seed - 11, h = seed * 13;
    px__context_switch(self, other);
    return a + 2 * b + 3 * c + 5 * d + 7 * e + 11 * f + 13 * g + 17 * h;
}

static long expect(long seed)
{
    return seed * 3 + 2 * (seed ^ 0x55) + 3 * (seed + 7) + 5 * seed * seed + 7 * ~seed
           + 11 * (seed << 3) + 13 * (seed - 11) + 17 * (seed * 13);
}

static void fiber(void *arg)
{
    (void)arg;
    CHECK(fegetround() == FE_TONEAREST); /* inherited from the creator */
    CHECK(fesetround(FE_UPWARD) == 0);
    for (long i = 0;; i++) {
        long r = juggle(&f_ctx, &main_ctx, 1000 + i);
        CHECK(r == expect(1000 + i));
        fiber_mode_ok = fegetround() == FE_UPWARD && one / three > 0.333333333333333314829616256247;
        CHECK(fiber_mode_ok);
    }
}

int main(void)
{
    px__stack_pool *pool = px__stack_pool_new(0);
    px__stack s;
    CHECK(pool && px__stack_get(pool, 0, &s) == 0);
    px__context_init_thread(&main_ctx);
    CHECK(fegetround() == FE_TONEAREST);
    CHECK(px__context_make(&f_ctx, s.lo, s.size, fiber, NULL) == 0);
    px__context_switch(&main_ctx, &f_ctx); /* fiber sets FE_UPWARD, switches back */
    CHECK(fegetround() == FE_TONEAREST);
    CHECK(fesetround(FE_DOWNWARD) == 0);
    double down = one / three;
    for (long i = 0; i < 1000; i++) {
        long r = juggle(&main_ctx, &f_ctx, i);
        CHECK(r == expect(i));
        CHECK(fegetround() == FE_DOWNWARD);
        CHECK(one / three == down); /* MXCSR / FPCR rounding, not just x87 */
        CHECK(i == 0 || fiber_mode_ok);
    }
    fesetround(FE_TONEAREST);
    px__context_destroy(&f_ctx);
    px__stack_put(pool, &s);
    px__stack_pool_free(pool);
    printf("ctx_regs ok (%s backend)\n", px__ctx_backend());
    return 0;
}
