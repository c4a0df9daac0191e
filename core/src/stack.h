/* Fiber stacks: mmap'd, lazily touched, recycled through a per-thread pool.
 *
 * Up to a process-wide budget (default 10,000; env PARATAXIS_GUARDED_STACKS)
 * each stack has its own mapping with a PROT_NONE guard page below it, and a
 * SIGSEGV handler on a sigaltstack reports a fault in the running fiber's
 * guard as "parataxis: fiber N overflowed its stack" and aborts.  Each guard
 * splits a mapping and vm.max_map_count is 65,530 by default, so beyond the
 * budget stacks are carved from slabs (one mapping, many stacks) and guarded
 * only by a canary just below lo, which the scheduler checks at every switch
 * (px_stack_intact). */
#ifndef PX_STACK_H
#define PX_STACK_H

#include <stddef.h>
#include <stdint.h>

typedef struct px_stack {
  void *lo;                 /* usable stack: [lo, lo + size) */
  size_t size;
  unsigned guarded : 1;     /* own mapping with a guard page below lo */
  unsigned slab : 1;        /* carved from a slab: canary only */
  void *map;                /* private: the mapping (guarded / odd-sized) */
  size_t map_size;
} px_stack;

typedef struct px_stack_pool px_stack_pool;   /* one per thread; not thread-safe */

/* default_size 0 = 64 KiB; rounded up to pages.  NULL when out of memory.
 * Also installs the SIGSEGV handler (once) and this thread's sigaltstack. */
px_stack_pool *px_stack_pool_new(size_t default_size);
/* A stack of at least size bytes (0 = the pool's default): 0 or PX_ENOMEM. */
int px_stack_get(px_stack_pool *p, size_t size, px_stack *out);
/* Give a stack back: kept for reuse (its memory released beyond a cap). */
void px_stack_put(px_stack_pool *p, px_stack *s);
void px_stack_pool_free(px_stack_pool *p);

/* Is the canary below a slab stack intact?  Always 1 for guarded stacks. */
int px_stack_intact(const px_stack *s);
/* Which fiber runs on which stack (thread-local), for the overflow message;
 * (0, NULL) while the scheduler itself runs. */
void px_stack_running(uint64_t fiber_id, const px_stack *s);
/* Print "parataxis: fiber N overflowed its stack" and abort. */
void px_stack_overflowed(uint64_t fiber_id);

#endif
