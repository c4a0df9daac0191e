/* Pool reuse, the guarded budget, and many stacks (100,000 x 16 KiB, or
 * argv[1]) without running out of mappings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "stack.h"
#include "ctx_check.h"

static px_context main_ctx, f_ctx;
static int ran;

static void touch(void *arg) {
  ran += (int)(long)arg;
  px_context_switch_final(&f_ctx, &main_ctx);
}

static long maps_count(void) {
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

static long rss_kib(void) {
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

static void reuse(px_stack_pool *pool) {
  px_stack a, b;
  void *lo;
  CHECK(px_stack_get(pool, 0, &a) == 0);
  lo = a.lo;
  CHECK(a.size >= 16 * 1024 && a.guarded);
  px_stack_put(pool, &a);
  CHECK(px_stack_get(pool, 0, &b) == 0 && b.lo == lo);   /* most recent first */
  px_stack_put(pool, &b);
  CHECK(px_stack_get(pool, 100 * 1024, &a) == 0 && a.size >= 100 * 1024);   /* odd size */
  memset(a.lo, 1, a.size);
  px_stack_put(pool, &a);
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000, guarded = 0, maps;
  px_stack_pool *pool = px_stack_pool_new(16 * 1024);
  px_stack *all = calloc((size_t)n, sizeof *all);
  CHECK(pool && all);
  px_context_init_thread(&main_ctx);
  reuse(pool);
  for (long i = 0; i < n; i++) {
    CHECK(px_stack_get(pool, 0, &all[i]) == 0);
    guarded += all[i].guarded;
    /* every stack runs a little code, so each has its top page touched */
    CHECK(px_context_make(&f_ctx, all[i].lo, all[i].size, touch, (void *)1L) == 0);
    px_context_switch(&main_ctx, &f_ctx);
    px_context_destroy(&f_ctx);
  }
  CHECK(ran == n);
  maps = maps_count();
  printf("%ld stacks (%ld guarded): %ld mappings, RSS %ld MiB\n", n, guarded, maps,
         rss_kib() / 1024);
  CHECK(guarded == (n < 10000 ? n : 10000));
  CHECK(maps > 0 && maps < 60000);
  for (long i = 0; i < n; i++)
    CHECK(px_stack_intact(&all[i]));
  for (long i = 0; i < n; i++)
    px_stack_put(pool, &all[i]);
  for (long i = 0; i < n; i++)   /* the second round comes from the pool */
    CHECK(px_stack_get(pool, 0, &all[i]) == 0);
  for (long i = 0; i < n; i++)
    px_stack_put(pool, &all[i]);
  px_stack_pool_free(pool);
  free(all);
  return 0;
}
