/* Switching: ping-pong passing values, fiber-to-fiber, final switch, reuse. */
#include <stdint.h>

#include "fiber/ctx/context.h"
#include "fiber/stack.h"
#include "../spec.h"

static px__context main_ctx, a_ctx, b_ctx;
static long mailbox;

/* Doubles every value it is handed, forever. */
static void doubler(void *arg)
{
    long *seen = arg;
    for (;;) {
        ++*seen;
        mailbox *= 2;
        px__context_switch(&a_ctx, &main_ctx);
    }
}

static void ping_pong(px__stack_pool *pool)
{
    px__stack s;
    long seen = 0;
    CHECK(px__stack_get(pool, 0, &s) == 0);
    CHECK(px__context_make(&a_ctx, s.lo, s.size, doubler, &seen) == 0);
    for (long i = 1; i <= 100000; i++) {
        mailbox = i;
        px__context_switch(&main_ctx, &a_ctx);
        CHECK(mailbox == 2 * i);
        CHECK(seen == i);
    }
    px__context_destroy(&a_ctx);
    px__stack_put(pool, &s);
}

/* a and b hand a counter to each other directly; b returns to main at 1000. */
static void player_a(void *arg)
{
    (void)arg;
    for (;;) {
        mailbox++;
        px__context_switch(&a_ctx, &b_ctx);
    }
}

static void player_b(void *arg)
{
    (void)arg;
    for (;;) {
        mailbox++;
        if (mailbox >= 1000)
            px__context_switch(&b_ctx, &main_ctx);
        else
            px__context_switch(&b_ctx, &a_ctx);
    }
}

static void fiber_to_fiber(px__stack_pool *pool)
{
    px__stack sa, sb;
    CHECK(px__stack_get(pool, 0, &sa) == 0);
    CHECK(px__stack_get(pool, 0, &sb) == 0);
    CHECK(px__context_make(&a_ctx, sa.lo, sa.size, player_a, NULL) == 0);
    CHECK(px__context_make(&b_ctx, sb.lo, sb.size, player_b, NULL) == 0);
    mailbox = 0;
    px__context_switch(&main_ctx, &a_ctx);
    CHECK(mailbox == 1000);
    px__context_destroy(&a_ctx);
    px__context_destroy(&b_ctx);
    px__stack_put(pool, &sa);
    px__stack_put(pool, &sb);
}

/* A fiber that finishes: its last switch is final; its stack is reused. */
static void one_shot(void *arg)
{
    mailbox = (long)(intptr_t)arg;
    px__context_switch_final(&a_ctx, &main_ctx);
}

static void finish_and_reuse(px__stack_pool *pool)
{
    px__stack s;
    CHECK(px__stack_get(pool, 0, &s) == 0);
    for (int i = 1; i <= 1000; i++) {
        CHECK(px__context_make(&a_ctx, s.lo, s.size, one_shot, (void *)(intptr_t)i) == 0);
        px__context_switch(&main_ctx, &a_ctx);
        CHECK(mailbox == i);
        px__context_destroy(&a_ctx);
    }
    px__stack_put(pool, &s);
}

static px__stack_pool *pool;

static void setup(void)
{
    pool = px__stack_pool_new(0);
    CHECK(pool);
    px__context_init_thread(&main_ctx);
}

static void teardown(void)
{
    px__stack_pool_free(pool);
    printf("ctx_switch ok (%s backend)\n", px__ctx_backend());
}

SPEC(ping_pong)
{
    ping_pong(pool);
}

SPEC(fiber_to_fiber)
{
    fiber_to_fiber(pool);
}

SPEC(finish_and_reuse)
{
    finish_and_reuse(pool);
}

SPECS_AROUND(setup, teardown, ping_pong, fiber_to_fiber, finish_and_reuse)
