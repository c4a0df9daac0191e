/*
** arena.c -- where the record arena's chunks come from (arena.h has the rest).
**
** Chunks are carved from 2 MiB arenas aligned to 2 MiB.  From the second arena on
** (past 43,680 records) the arena asks for a transparent huge page: at a million
** timers the records span 64 MiB, and with 4 KiB pages nearly every cancel and
** expiry of a record in random order is a TLB miss, which under a hypervisor's
** nested page tables costs more than the cache miss itself.  The first arena keeps
** small pages so that a small queue stays small (untouched pages cost nothing).
**
** Those small pages cost the adds that first touch them a fault each, ~2 us
** here, ~20 ns a record: half of what the first 1e5 adds into a new queue cost
** more than later ones (docs/performance.md, "Cold adds").  So once a queue
** outgrows its first chunk, each chunk carved in the first arena asks for itself
** and the next to be faulted in by the queue's worker, in one
** madvise(MADV_POPULATE_WRITE) (Linux 5.14; older kernels: nothing is asked).
** Faulting in bulk costs as much as faulting page by page: what this buys is
** that the adding thread does not wait for it.  The worker keeps a chunk ahead
** of the adds, so a growing queue holds at most one chunk (256 KiB) it does not
** use yet, and a queue within its first chunk (5,460 timers) nothing more than
** before.  The huge pages after the first arena are not faulted ahead: the fault
** is one per arena (0.4 ms, 9 ns a record, when its memory was freed recently;
** 2.7 ms or more once the VM has handed it back to its host), and faulting the
** next arena ahead would hold up to 2 MiB more than the records need (measured:
** 3 ns an add saved at 1e6, for +2.1 B a timer).
*/
#include <stdlib.h>
#include <sys/mman.h>

#include "parataxis.h"
#include "timerq/arena.h"

#define MAP_BYTES  ((size_t)2 << 20)                  /* one huge page */
#define MAP_CHUNKS (MAP_BYTES / PX__ARENA_CHUNK_BYTES)

void px__arena_init(px__arena *a)
{
    *a = (px__arena){ 0 };
    atomic_init(&a->dir, NULL);
}

void px__arena_destroy(px__arena *a)
{
    for (uint32_t i = 0; i < a->nchunks; i += MAP_CHUNKS)
        munmap(a->chunks[i], MAP_BYTES);
    px__arena_dir *d = atomic_load_explicit(&a->dir, memory_order_relaxed), *older;
    for (; d != NULL; d = older) {
        older = d->older;
        free(d);
    }
    free(a->chunks);
    free(a->cfree);
    free(a->has_free);
}

void px__arena_prefault_run(const px__arena_prefault *p)
{
#ifdef MADV_POPULATE_WRITE
    /* Fails harmlessly (EINVAL) on a kernel without it: the adds fault the
    ** pages in themselves.  Not a write per page instead: the adds write
    ** records into these pages meanwhile. */
    madvise(p->from, p->bytes, MADV_POPULATE_WRITE);
#else
    (void)p;
#endif
}

/* Asks for chunk c (the one being carved, c >= 1, in the first arena) and the
** next to be faulted in ahead. */
static void prefault_ask(px__arena *a, px__arena_slot *chunk)
{
#ifdef MADV_POPULATE_WRITE
    uint32_t c = a->nchunks;
    if (c == 0 || c >= MAP_CHUNKS)
        return;
    size_t bytes = (c + 1 < MAP_CHUNKS ? 2 : 1) * PX__ARENA_CHUNK_BYTES;
    if (a->prefault_bytes != 0)   /* not taken yet: it starts lower, keep that */
        bytes = (size_t)((char *)chunk + bytes - a->prefault);
    else
        a->prefault = (char *)chunk;
    a->prefault_bytes = bytes;
#else
    (void)a;
    (void)chunk;
#endif
}

/* The room of the next chunk: the rest of the last 2 MiB mapping, or a new one. */
static px__arena_slot *chunk_map(px__arena *a)
{
    if (a->nchunks % MAP_CHUNKS == 0) {
        size_t span = 2 * MAP_BYTES;
        char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        char *m = (char *)(((uintptr_t)p + MAP_BYTES - 1) & ~(uintptr_t)(MAP_BYTES - 1));
        if (m > p)
            munmap(p, (size_t)(m - p));
        munmap(m + MAP_BYTES, (size_t)(p + span - (m + MAP_BYTES)));
#ifdef MADV_HUGEPAGE
        if (a->nchunks > 0)
            madvise(m, MAP_BYTES, MADV_HUGEPAGE);
#endif
        return (px__arena_slot *)(void *)m;
    }
    return (px__arena_slot *)(void *)((char *)a->chunks[a->nchunks - 1] + PX__ARENA_CHUNK_BYTES);
}

/* Replaces the directory by one of `cap` entries (see px__arena_dir); 0 or
** PX_ENOMEM. */
static int dir_grow(px__arena *a, uint32_t cap)
{
    px__arena_dir *old = atomic_load_explicit(&a->dir, memory_order_relaxed);
    px__arena_dir *d = malloc(sizeof *d + cap * sizeof d->chunk[0]);
    if (d == NULL)
        return PX_ENOMEM;
    d->older = old;
    d->cap = cap;
    for (uint32_t i = 0; i < cap; i++)
        atomic_init(&d->chunk[i], i < a->nchunks ? a->chunks[i] : NULL);
    atomic_store_explicit(&a->dir, d, memory_order_release);
    return 0;
}

/* Makes room for `cap` chunks in the arena's tables; 0 or PX_ENOMEM. */
static int tables_grow(px__arena *a, uint32_t cap)
{
    if (dir_grow(a, cap) != 0)
        return PX_ENOMEM;
    px__arena_slot **chunks = realloc(a->chunks, cap * sizeof *chunks);
    if (chunks == NULL)
        return PX_ENOMEM;
    a->chunks = chunks;
    px__arena_free *cfree = realloc(a->cfree, cap * sizeof *cfree);
    if (cfree == NULL)
        return PX_ENOMEM;
    a->cfree = cfree;
    uint64_t *has_free = realloc(a->has_free, cap / 64 * sizeof *has_free + sizeof *has_free);
    if (has_free == NULL)
        return PX_ENOMEM;
    for (uint32_t w = a->chunks_cap / 64 + (a->chunks_cap ? 1 : 0); w <= cap / 64; w++)
        has_free[w] = 0;
    a->has_free = has_free;
    a->chunks_cap = cap;
    return 0;
}

int px__arena_grow(px__arena *a, void *owner)
{
    if (a->nchunks == a->chunks_cap) {
        uint32_t cap = a->chunks_cap ? 2 * a->chunks_cap : 8;
        if (cap > (UINT32_MAX >> PX__ARENA_CHUNK_SHIFT) || tables_grow(a, cap) != 0)
            return PX_ENOMEM;
    }
    px__arena_slot *c = chunk_map(a);
    if (c == NULL)
        return PX_ENOMEM;
    prefault_ask(a, c);
    px__arena_head *h = (px__arena_head *)(void *)c;
    h->owner = owner;
    h->first_index = a->nchunks << PX__ARENA_CHUNK_SHIFT;
    px__arena_free *f = &a->cfree[a->nchunks];
    f->summary[0] = f->summary[1] = 0;
    for (unsigned w = 0; w < PX__ARENA_FREE_WORDS; w++)
        f->word[w] = 0;
    a->chunks[a->nchunks] = c;
    px__arena_dir *d = atomic_load_explicit(&a->dir, memory_order_relaxed);
    atomic_store_explicit(&d->chunk[a->nchunks], c, memory_order_release);
    a->nchunks++;
    a->bump = 1;
    return 0;
}
