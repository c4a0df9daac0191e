/* Fiber stacks: mmap'd, lazily touched, recycled through a per-thread pool.
 *
 * Up to a process-wide budget (default 10,000; env PARATAXIS_GUARDED_STACKS)
 * each stack has its own mapping with a PROT_NONE guard (64 KiB, or a page if
 * larger) below it.  Each guard splits a mapping and vm.max_map_count is 65,530
 * by default, so beyond the budget default-size stacks are carved from slabs
 * (one mapping, many stacks, one guard at the slab's low end) and guarded
 * between each other only by a canary just below lo, which the scheduler
 * checks at every switch (px__stack_intact); odd-sized stacks past the budget
 * get a mapping with a canary and no guard.  A SIGSEGV handler on a
 * sigaltstack reports a fault in the running fiber's guard -- its own, or its
 * slab's, which a runaway slab fiber reaches through the slots below it -- as
 * "parataxis: fiber N overflowed its stack" and aborts. */
#ifndef PX__FIBER_STACK_H
#define PX__FIBER_STACK_H

#include <stddef.h>
#include <stdint.h>

typedef struct px__stack {
    void *lo; /* usable stack: [lo, lo + size) */
    size_t size;
    unsigned guarded : 1; /* own mapping with a guard page below lo */
    unsigned slab : 1;    /* carved from a slab: canary only */
    void *map;            /* private: its mapping (from map to lo + size), or its slab's */
} px__stack;

typedef struct px__stack_pool px__stack_pool; /* one per thread; not thread-safe */

/* default_size 0 = 64 KiB; rounded up to pages.  NULL when out of memory or
 * when default_size is absurd (beyond SIZE_MAX / 32: see px__stack_mappable).
 * Also installs the SIGSEGV handler (once) and this thread's sigaltstack. */
px__stack_pool *px__stack_pool_new(size_t default_size);
/* A claim on a stack of at least size bytes (0 = the pool's default) for a
 * fiber that has not run yet: 0 or PX_ENOMEM (also for a size that cannot be
 * mapped, however large).  A claim of the pool's size holds no stack (out->lo
 * is NULL): the pool only keeps one ready -- a slab slot not carved yet, address
 * space and no memory -- so a million fibers spawned before any runs touch no
 * stack memory (they still reserve ~4,000 slabs).  Another size is mapped now,
 * untouched. */
int px__stack_claim(px__stack_pool *p, size_t size, px__stack *out);
/* Makes claim s a stack, at its fiber's first turn: the one given back last
 * (its pages are resident), else a new one.  Cannot fail. */
void px__stack_take(px__stack_pool *p, px__stack *s);
/* A stack now: px__stack_claim and px__stack_take. */
int px__stack_get(px__stack_pool *p, size_t size, px__stack *out);
/* A stack of the pool's default size in a mapping of its own with a guard
 * below it, whatever the budget: a shared stack (a few per scheduler, each
 * the stack of many fibers in turn).  0 or PX_ENOMEM; px__stack_put takes it
 * back like any. */
int px__stack_get_shared(px__stack_pool *p, px__stack *out);
/* Give a stack back, or a claim never taken.  A pooled stack waits warm for
 * reuse; past a cap of warm ones, the oldest give their memory back. */
void px__stack_put(px__stack_pool *p, px__stack *s);
void px__stack_pool_free(px__stack_pool *p);
/* Could a stack of size bytes be mapped at all (a trial reservation of its
 * address space)?  For checking a default size before any pool exists. */
int px__stack_mappable(size_t size);

/* Is the canary below a slab stack intact?  Always 1 for guarded stacks. */
int px__stack_intact(const px__stack *s);
/* Which fiber runs on which stack (thread-local), for the overflow message;
 * (0, NULL) while the scheduler itself runs. */
void px__stack_running(uint64_t fiber_id, const px__stack *s);
/* Print "parataxis: fiber N overflowed its stack" (N its number, as
 * px_fiber_number) and abort. */
void px__stack_overflowed(uint64_t fiber_id);

#endif
