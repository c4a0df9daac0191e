/*
** fib_million.c -- one million fibers parked at once, on a default kernel.
**
** A guarded stack costs kernel mappings and vm.max_map_count is about 65,000,
** so past its budget the pool must hand out slab stacks with canaries; this
** test fails if it does not (spawn returns NULL, or the process dies).  It also
** bounds the resident memory per parked fiber (the target is 5 KiB; the bound
** here leaves room for allocator noise).  Argument: how many (default 1e6).
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

static size_t n_fibers = 1000000;
static size_t parked, ended;

static void *parker(void *arg)
{
    (void)arg;
    parked++;
    CHECK_EQ(px_park("parked by the million", NULL, NULL), 0);
    ended++;
    return NULL;
}

static void *main_fiber(void *arg)
{
    (void)arg;
    uint64_t *ids = malloc(n_fibers * sizeof *ids);
    CHECK(ids != NULL);
    long before = rss_kib();
    for (size_t i = 0; i < n_fibers; i++) {
        px_fiber *f = px_spawn(parker, NULL);
        CHECK(f != NULL);
        ids[i] = px_fiber_id(f);
        px_fiber_release(f);
    }
    CHECK_EQ(px_yield(), 0);            /* FIFO: every parker runs and parks first */
    CHECK_EQ(parked, n_fibers);
    CHECK_EQ(ended, 0);
    double per = (double)(rss_kib() - before) * 1024.0 / (double)n_fibers;
    printf("%zu parked fibers: %.0f bytes resident each\n", n_fibers, per);
    CHECK(per <= 6.0 * 1024);
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
    CHECK_EQ(px_run(main_fiber, NULL, NULL), 0);
    return 0;
}
