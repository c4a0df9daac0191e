/* Pool reuse, the guarded budget, and many stacks (100,000 x 16 KiB, or
 * argv[1]) without running out of mappings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fiber/ctx/context.h"
#include "fiber/stack.h"
#include "ctx_check.h"

static px__context main_ctx, f_ctx;
static int ran;

static void touch(void *arg)
{
    ran += (int)(long)arg;
    px__context_switch_final(&f_ctx, &main_ctx);
}

static long maps_count(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    long n = 0;
    int c;
    if (!f)
        return -1;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

static void reuse(px__stack_pool *pool)
{
    px__stack a, b;
    void *lo;
    CHECK(px__stack_get(pool, 0, &a) == 0);
    lo = a.lo;
    CHECK(a.size >= 16 * 1024 && a.guarded);
    px__stack_put(pool, &a);
    CHECK(px__stack_get(pool, 0, &b) == 0 && b.lo == lo); /* most recent first */
    px__stack_put(pool, &b);
    CHECK(px__stack_get(pool, 100 * 1024, &a) == 0 && a.size >= 100 * 1024); /* odd size */
    memset(a.lo, 1, a.size);
    px__stack_put(pool, &a);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000, guarded = 0, maps;
    px__stack_pool *pool = px__stack_pool_new(16 * 1024);
    px__stack *all = calloc((size_t)n, sizeof *all);
    CHECK(pool && all);
    px__context_init_thread(&main_ctx);
    reuse(pool);
    for (long i = 0; i < n; i++) {
        CHECK(px__stack_get(pool, 0, &all[i]) == 0);
        guarded += all[i].guarded;
        /* every stack runs a little code, so each has its top page touched */
        CHECK(px__context_make(&f_ctx, all[i].lo, all[i].size, touch, (void *)1L) == 0);
        px__context_switch(&main_ctx, &f_ctx);
        px__context_destroy(&f_ctx);
    }
    CHECK(ran == n);
    maps = maps_count();
    printf("%ld stacks (%ld guarded): %ld mappings, RSS %ld MiB\n", n, guarded, maps,
           rss_kib() / 1024);
    CHECK(guarded == (n < 10000 ? n : 10000));
    CHECK(maps > 0 && maps < 60000);
    for (long i = 0; i < n; i++)
        CHECK(px__stack_intact(&all[i]));
    for (long i = 0; i < n; i++)
        px__stack_put(pool, &all[i]);
    for (long i = 0; i < n; i++) /* the second round comes from the pool */
        CHECK(px__stack_get(pool, 0, &all[i]) == 0);
    for (long i = 0; i < n; i++)
        px__stack_put(pool, &all[i]);
    px__stack_pool_free(pool);
    free(all);
    return 0;
}
