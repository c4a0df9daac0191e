/*
** arena.h -- the timer queue's record arena: fixed-size records, found by an
** index, handed out lowest index first.
**
** Records are PX__ARENA_REC_BYTES each and live in 256 KiB chunks aligned to
** their size, carved from 2 MiB arenas (arena.c).  Record 0 of a chunk is its
** header: the owner and the index of the chunk's first record, so a record finds
** both from its address alone, without spending a pointer on them.  An index is
** the chunk's number over the record's slot in it (PX__ARENA_CHUNK_SHIFT bits);
** slot 0, the header, is never handed out, so no index of a record is 0.
**
** Each chunk has a bitmap of its free records (two summary words over them) and
** the arena a bitmap of the chunks with a free record, so that the free record
** of lowest index is a few bit scans away.  Lowest first, not last-freed first:
** after cancels in random order a free list would hand back records scattered
** over the chunks, a cache and TLB miss per add and per expiry; the lowest first
** keeps a run of adds on consecutive lines.
**
** The arena is not thread-safe: its owner locks around it, with one exception,
** px__arena_find, which any thread may call at any time (a cancel finds its
** record without the lock).  Handing out and taking back are inline, since they
** are on the add and expiry paths; growing is not.
**
** A growing arena may ask its owner to fault pages in ahead of the adds, on
** another thread and without the lock (px__arena_prefault_take, arena.c says
** which pages and why): the owner checks prefault_bytes after px__arena_fresh.
*/
#ifndef PX__TIMERQ_ARENA_H
#define PX__TIMERQ_ARENA_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/bits.h"

#define PX__ARENA_REC_BYTES   48
#define PX__ARENA_CHUNK_BYTES ((size_t)256 << 10)
#define PX__ARENA_CHUNK_RECS  ((uint32_t)(PX__ARENA_CHUNK_BYTES / PX__ARENA_REC_BYTES))
#define PX__ARENA_CHUNK_SHIFT 13               /* 2^13 >= PX__ARENA_CHUNK_RECS */
#define PX__ARENA_FREE_WORDS  ((PX__ARENA_CHUNK_RECS + 63) / 64)

/* A record's room; the owner's record type has exactly its size. */
typedef struct px__arena_slot {
    uint64_t word[PX__ARENA_REC_BYTES / 8];
} px__arena_slot;

/* Record 0 of each chunk. */
typedef struct px__arena_head {
    void *owner;
    uint32_t first_index;
} px__arena_head;

/* The free records of a chunk: bit b of word[w] is record 64 * w + b; bit w % 64
** of summary[w / 64] says word[w] is not zero. */
typedef struct px__arena_free {
    uint64_t summary[2];
    uint64_t word[PX__ARENA_FREE_WORDS];
} px__arena_free;

_Static_assert(PX__ARENA_FREE_WORDS <= 128, "two summary words cover a chunk's free bitmap");
_Static_assert(PX__ARENA_CHUNK_RECS <= (1u << PX__ARENA_CHUNK_SHIFT),
               "a chunk's records fit its index bits");
_Static_assert(sizeof(px__arena_head) <= sizeof(px__arena_slot),
               "a chunk's header fits its record 0");

/*
** The chunks by number again, for px__arena_find, which reads without the
** owner's lock.  Entries are only ever added; a full table is replaced by a
** larger copy, and the tables it replaced stay (linked by `older`) until
** px__arena_destroy, since a reader may still be looking at one.
*/
typedef struct px__arena_dir {
    struct px__arena_dir *older;
    uint32_t cap;
    _Atomic(px__arena_slot *) chunk[];
} px__arena_dir;

typedef struct px__arena {
    px__arena_slot **chunks;
    uint32_t nchunks, chunks_cap;
    uint32_t bump;           /* next never-used record of the last chunk */
    px__arena_free *cfree;   /* per chunk, its free records */
    uint64_t *has_free;      /* bit c: chunk c has a free record */
    uint32_t free_low;       /* no word of has_free below it is non-zero */
    _Atomic(px__arena_dir *) dir;
    char *prefault;          /* pages to fault in ahead (prefault_bytes of them) */
    size_t prefault_bytes;   /* 0: nothing asked */
} px__arena;

/* Pages to fault in ahead of the adds, taken from the arena under its owner's
** lock and faulted in without it (px__arena_prefault_run). */
typedef struct px__arena_prefault {
    char *from;
    size_t bytes;
} px__arena_prefault;

/* Makes an empty arena. */
void px__arena_init(px__arena *a);

/* Unmaps every chunk: every record is gone. */
void px__arena_destroy(px__arena *a);

/* Adds a chunk whose records name `owner` (px__arena_owner); 0, or PX_ENOMEM
** when there is no memory or no index left. */
int px__arena_grow(px__arena *a, void *owner);

/* Takes what the arena asks to fault in ahead, if anything (1; else 0). */
static inline int px__arena_prefault_take(px__arena *a, px__arena_prefault *p)
{
    if (a->prefault_bytes == 0)
        return 0;
    *p = (px__arena_prefault){ a->prefault, a->prefault_bytes };
    a->prefault_bytes = 0;
    return 1;
}

/* Faults in the pages of `p`, without the owner's lock (it takes ~0.1 ms a
** chunk).  The arena must outlive the call. */
void px__arena_prefault_run(const px__arena_prefault *p);

static inline px__arena_head *px__arena_head_of(const void *rec)
{
    return (px__arena_head *)((uintptr_t)rec & ~(uintptr_t)(PX__ARENA_CHUNK_BYTES - 1));
}

/* The owner that px__arena_fresh named for the chunk of `rec`. */
static inline void *px__arena_owner(const void *rec)
{
    return px__arena_head_of(rec)->owner;
}

/* The index of `rec`: never 0, and never more than 32 bits. */
static inline uint32_t px__arena_index(const void *rec)
{
    const px__arena_head *h = px__arena_head_of(rec);
    const px__arena_slot *slot0 = (const px__arena_slot *)(const void *)h;
    return h->first_index + (uint32_t)((const px__arena_slot *)rec - slot0);
}

/* The record of index `index`, or NULL when its chunk is not there (yet).
** Any thread may call it at any time, without the owner's lock.  A record of
** the chunk that was never handed out is zeroed memory, and a record handed
** out and taken back is returned too: telling them from a live one is the
** owner's. */
static inline void *px__arena_find(px__arena *a, uint32_t index)
{
    uint32_t chunk = index >> PX__ARENA_CHUNK_SHIFT;
    uint32_t slot = index & ((1u << PX__ARENA_CHUNK_SHIFT) - 1);
    px__arena_dir *d = atomic_load_explicit(&a->dir, memory_order_acquire);
    if (d == NULL || chunk >= d->cap || slot == 0 || slot >= PX__ARENA_CHUNK_RECS)
        return NULL;
    px__arena_slot *c = atomic_load_explicit(&d->chunk[chunk], memory_order_acquire);
    return c == NULL ? NULL : &c[slot];
}

/* Hands out the free record of lowest index, one taken back before; NULL when
** there is none. */
static inline void *px__arena_reuse(px__arena *a)
{
    uint32_t words = (a->nchunks + 63) / 64;
    for (uint32_t w = a->free_low; w < words; w++) {
        if (a->has_free[w] == 0)
            continue;
        a->free_low = w;
        uint32_t c = w * 64 + (uint32_t)px__bits_low(a->has_free[w]);
        px__arena_free *f = &a->cfree[c];
        unsigned half = f->summary[0] == 0;
        unsigned i = half * 64 + (unsigned)px__bits_low(f->summary[half]);
        unsigned b = (unsigned)px__bits_low(f->word[i]);
        f->word[i] &= f->word[i] - 1;
        if (f->word[i] == 0) {
            f->summary[half] &= ~(UINT64_C(1) << (i % 64));
            if ((f->summary[0] | f->summary[1]) == 0)
                a->has_free[w] &= ~(UINT64_C(1) << (c % 64));
        }
        return &a->chunks[c][i * 64 + b];
    }
    a->free_low = words;
    return NULL;
}

/* Hands out a never-used record (zeroed memory, as mmap gives it), growing the
** arena when its last chunk is full (a new chunk names `owner`, the same at
** every call); NULL when it cannot grow. */
static inline void *px__arena_fresh(px__arena *a, void *owner)
{
    if ((a->nchunks == 0 || a->bump == PX__ARENA_CHUNK_RECS) && px__arena_grow(a, owner) != 0)
        return NULL;
    return &a->chunks[a->nchunks - 1][a->bump++];
}

/* Takes back `rec`, which px__arena_reuse may then hand out again. */
static inline void px__arena_put(px__arena *a, void *rec)
{
    px__arena_head *h = px__arena_head_of(rec);
    uint32_t c = h->first_index >> PX__ARENA_CHUNK_SHIFT;
    uint32_t slot = (uint32_t)((px__arena_slot *)rec - (px__arena_slot *)(void *)h);
    px__arena_free *f = &a->cfree[c];
    f->word[slot / 64] |= UINT64_C(1) << (slot % 64);
    f->summary[slot / 4096] |= UINT64_C(1) << (slot / 64 % 64);
    a->has_free[c / 64] |= UINT64_C(1) << (c % 64);
    if (c / 64 < a->free_low)
        a->free_low = c / 64;
}

#endif /* PX__TIMERQ_ARENA_H */
