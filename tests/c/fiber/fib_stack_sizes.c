/*
** fib_stack_sizes.c -- any stack size, through px_spawn_sized and through
** px_sched_opts.stack_size, gives a working fiber or a clear refusal: NULL
** from px_spawn_sized / px_sched_new, never a crash.  Sizes: 0, 1, page-1, a
** page, a large but mappable one (1 GiB: stacks are touched lazily), one that
** no address space can hold (2^50), and the ones whose rounding wraps
** (SIZE_MAX, SIZE_MAX/2, SIZE_MAX - page + 2).
*/
#include <stdint.h>
#include <unistd.h>

#include "../spec.h"

#define GIB ((size_t)1 << 30)

static size_t page;
static int ran;

static void *body(void *arg)
{
    ran++;
    CHECK(px_self() != 0);          /* on a fiber, not run outside one */
    return arg;
}

static size_t fits[8], nfits;
static size_t absurd[8], nabsurd;

SPEC(stack_sizes)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    nfits = nabsurd = 0;
    fits[nfits++] = 1;
    fits[nfits++] = page - 1;
    fits[nfits++] = page;
    fits[nfits++] = 3 * page + 1;
    if (sizeof(size_t) >= 8)
        fits[nfits++] = GIB;
    absurd[nabsurd++] = SIZE_MAX;
    absurd[nabsurd++] = SIZE_MAX / 2;
    absurd[nabsurd++] = SIZE_MAX - page + 2;
    absurd[nabsurd++] = SIZE_MAX - page;
    if (sizeof(size_t) >= 8)
        absurd[nabsurd++] = (size_t)1 << 50;   /* beyond any user address space */
}

static void *spawn_all(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < nabsurd; i++) {
        CHECK(px_spawn_sized(body, NULL, absurd[i]) == NULL);
        /* the refusal left the scheduler whole: the default still works */
        px_fiber *f = px_spawn_sized(body, (void *)absurd, 0);
        void *r = NULL;
        CHECK(f != NULL);
        CHECK_EQ(px_join(f, &r), 0);
        CHECK(r == (void *)absurd);
        px_fiber_release(f);
    }
    for (size_t i = 0; i < nfits; i++) {
        px_fiber *f = px_spawn_sized(body, (void *)&fits[i], fits[i]);
        void *r = NULL;
        CHECK(f != NULL);
        CHECK_EQ(px_join(f, &r), 0);
        CHECK(r == (void *)&fits[i]);
        px_fiber_release(f);
    }
    return NULL;
}

SPEC(spawn_sized)
{
    ran = 0;
    CHECK_EQ(px_run(spawn_all, NULL, NULL), 0);
    CHECK_EQ(ran, (int)(nabsurd + nfits));
}

static void run_with_default(size_t size)
{
    px_sched_opts o = { 0 };
    o.stack_size = size;
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    ran = 0;
    for (int i = 0; i < 3; i++)   /* the second and third reuse a pooled stack */
        CHECK_EQ(px_sched_post(s, body, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    CHECK_EQ(ran, 3);
    px_sched_free(s);
}

SPEC(sched_opts)
{
    for (size_t i = 0; i < nabsurd; i++) {
        px_sched_opts o = { 0 };
        o.stack_size = absurd[i];
        CHECK(px_sched_new(&o) == NULL);
    }
    run_with_default(0);
    for (size_t i = 0; i < nfits; i++)
        run_with_default(fits[i]);
}

SPECS(stack_sizes, spawn_sized, sched_opts)
