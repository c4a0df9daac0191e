/*
** fib_shared_million.c -- one million fibers parked at once on shared stacks
** (px_sched_opts.shared_stacks = 4), and what each costs: its record and the
** bytes of stack it parked with, copied off the shared stack, not a page of
** its own.  Fails if a spawn fails, if a woken fiber finds its stack changed,
** or if the resident memory per parked fiber exceeds the bound.  The target
** is 512 bytes; the figure is about 500 on x86-64 (docs/performance.md) and
** the bound leaves room for allocator noise.  AArch64's frames are larger,
** and the ucontext backend parks a fiber with a ucontext_t and swapcontext's
** frames on its stack: looser bounds there.  A fiber with a page of its own
** costs over 4 KiB.  Argument: how many (default 1e6).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = atol(line + 6);
    if (f)
        fclose(f);
    return kib;
}

#if defined(PX_CONTEXT_UCONTEXT)
#define BOUND 4096.0
#elif defined(__x86_64__)
#define BOUND 544.0
#else
#define BOUND 1024.0
#endif

static size_t n_fibers = 1000000;
static size_t parked, ended;

static void *parker(void *arg)
{
    size_t mine = (size_t)(uintptr_t)arg;   /* on its stack: must come back */
    parked++;
    CHECK_EQ(px_park("parked by the million", NULL, NULL), 0);
    CHECK_EQ(mine, (size_t)(uintptr_t)arg);
    ended++;
    return NULL;
}

static void *main_fiber(void *arg)
{
    (void)arg;
    uint64_t *ids = malloc(n_fibers * sizeof *ids);
    CHECK(ids != NULL);
    memset(ids, 0, n_fibers * sizeof *ids);   /* resident before, not counted */
    long before = rss_kib();
    for (size_t i = 0; i < n_fibers; i++) {
        px_fiber *f = px_spawn(parker, (void *)(uintptr_t)i);
        CHECK(f != NULL);
        ids[i] = px_fiber_id(f);
        px_fiber_release(f);
    }
    CHECK_EQ(px_yield(), 0);            /* FIFO: every parker runs and parks first */
    CHECK_EQ(parked, n_fibers);
    CHECK_EQ(ended, 0);
    double per = (double)(rss_kib() - before) * 1024.0 / (double)n_fibers;
    printf("%zu parked fibers on shared stacks: %.0f bytes resident each\n", n_fibers, per);
    CHECK(per <= BOUND);
    for (size_t i = 0; i < n_fibers; i++)
        CHECK_EQ(px_wake(ids[i]), 1);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(ended, n_fibers);
    free(ids);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        n_fibers = (size_t)strtoull(argv[1], NULL, 10);
    px_sched_opts o;
    memset(&o, 0, sizeof o);
    o.shared_stacks = 4;
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, main_fiber, NULL), 0);
    CHECK_EQ(px_sched_run(s), 0);
    px_sched_free(s);
    return 0;
}
