/*
** arena_prefault -- the record arena asks for the pages of its first arena to be
** faulted in ahead of the adds, and nothing else: not while a queue fits its
** first chunk (a small queue costs what it did), not for the huge-page arenas
** after the first; what it asks for is resident afterwards and still zero; and a
** queue that grows through its first arena while its worker faults pages in
** keeps the exactly-once contract, also when it is freed meanwhile.
*/
#define _DEFAULT_SOURCE   /* mincore, MADV_POPULATE_WRITE */
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../check.h"
#include "timerq/arena.h"

#define CHUNK_RECS ((uint32_t)PX__ARENA_CHUNK_RECS - 1)   /* records a chunk hands out */
#define MAP_CHUNKS 8                                        /* chunks in a 2 MiB arena */

static const size_t CHUNK = PX__ARENA_CHUNK_BYTES;

static int owner;

/* Hands out fresh records until the arena has `nchunks` chunks, all full. */
static void fill_to(px__arena *a, uint32_t nchunks)
{
    while (a->nchunks != nchunks || a->bump != PX__ARENA_CHUNK_RECS)
        CHECK(px__arena_fresh(a, &owner) != NULL);
}

/* 1 if the kernel has MADV_POPULATE_WRITE (Linux 5.14): else nothing is faulted
** in ahead, and the residency checks are skipped. */
static int kernel_populates(void)
{
#ifdef MADV_POPULATE_WRITE
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    int ok = madvise(m, 4096, MADV_POPULATE_WRITE) == 0;
    munmap(m, 4096);
    return ok;
#else
    return 0;
#endif
}

/* How many of the 4 KiB pages of [from, from + bytes) are resident. */
static size_t resident_pages(const char *from, size_t bytes)
{
    size_t pages = bytes / 4096, n = 0;
    unsigned char *v = malloc(pages);
    CHECK(v != NULL);
    CHECK(mincore((void *)from, bytes, v) == 0);
    for (size_t i = 0; i < pages; i++)
        n += v[i] & 1;
    free(v);
    return n;
}

static int resident(const char *from, size_t bytes)
{
    return resident_pages(from, bytes) == bytes / 4096;
}

static void arena_asks_for_its_first_arena_only(int populates)
{
    px__arena a;
    px__arena_prefault pf;
    px__arena_init(&a);

    /* Ten records: one page of the first arena is resident, nothing asked. */
    for (int i = 0; i < 10; i++)
        CHECK(px__arena_fresh(&a, &owner) != NULL);
    CHECK_EQ(px__arena_prefault_take(&a, &pf), 0);
    CHECK_EQ(resident_pages((char *)a.chunks[0], MAP_CHUNKS * CHUNK), 1);

    /* The whole first chunk: nothing asked. */
    fill_to(&a, 1);
    CHECK_EQ(px__arena_prefault_take(&a, &pf), 0);

    /* Chunk 1 is carved: it and chunk 2. */
    fill_to(&a, 2);
    CHECK(px__arena_prefault_take(&a, &pf));
    CHECK(pf.from == (char *)a.chunks[1]);
    CHECK_EQ(pf.bytes, 2 * CHUNK);
    CHECK_EQ(px__arena_prefault_take(&a, &pf), 0);   /* taken once */
    px__arena_prefault_run(&pf);
    if (populates)
        CHECK(resident(pf.from, pf.bytes));

    /* Chunks 2 and 3 carved before the worker took anything: one range from
    ** chunk 2 to the end of chunk 4. */
    fill_to(&a, 4);
    CHECK(px__arena_prefault_take(&a, &pf));
    CHECK(pf.from == (char *)a.chunks[2]);
    CHECK_EQ(pf.bytes, 3 * CHUNK);
    px__arena_prefault_run(&pf);
    if (populates)
        CHECK(resident(pf.from, pf.bytes));

    /* A record handed out from faulted-in memory (chunk 4) is still zero. */
    px__arena_slot *rec = px__arena_fresh(&a, &owner);
    CHECK(rec != NULL);
    CHECK(px__arena_index(rec) >> PX__ARENA_CHUNK_SHIFT == 4);
    for (unsigned w = 0; w < sizeof rec->word / sizeof rec->word[0]; w++)
        CHECK_EQ(rec->word[w], 0);

    /* The last chunk of the first arena asks for itself alone. */
    fill_to(&a, MAP_CHUNKS - 1);
    (void)px__arena_prefault_take(&a, &pf);
    fill_to(&a, MAP_CHUNKS);
    CHECK(px__arena_prefault_take(&a, &pf));
    CHECK(pf.from == (char *)a.chunks[MAP_CHUNKS - 1]);
    CHECK_EQ(pf.bytes, CHUNK);

    /* The huge-page arenas after it ask nothing. */
    fill_to(&a, 3 * MAP_CHUNKS);
    CHECK_EQ(px__arena_prefault_take(&a, &pf), 0);
    px__arena_destroy(&a);
}

static atomic_long calls, cancelled;

static void on_timer(void *arg, int status)
{
    (void)arg;
    atomic_fetch_add(&calls, 1);
    if (status == PX_ECANCELED)
        atomic_fetch_add(&cancelled, 1);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static long rss_kib(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    CHECK(f != NULL);
    CHECK(fscanf(f, "%ld %ld", &pages, &rss) == 2);
    fclose(f);
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}
#endif

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static px_latch ran;

static void on_ran(void *arg, int status)
{
    (void)arg;
    (void)status;
    ev_set(&ran);
}
#endif

/* A queue of ten timers grows by what it did before this change: its worker's
** stack and the malloc arena a new thread may get, about 200 KiB of the process
** here, but not a 256 KiB chunk faulted in on top (that would pass 450).  Not
** under a sanitizer, whose shadow memory and thread set-up grow by more. */
static void small_queue_stays_small(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    fprintf(stderr, "under a sanitizer: the queue's RSS is not checked\n");
#else
    px_timerq_free(px_timerq_new(NULL));   /* the process's first thread, once */
    long before = rss_kib();
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    for (int i = 0; i < 9; i++)
        CHECK(px_timerq_add(q, PX_SEC(30), on_timer, NULL) != 0);
    ev_init(&ran);
    CHECK(px_timerq_add(q, 0, on_ran, NULL) != 0);   /* the worker has run since the adds */
    EV_WAIT(&ran, 1);
    long grew = rss_kib() - before;
    fprintf(stderr, "a queue of 10 timers: +%ld KiB resident\n", grew);
    CHECK(grew < 384);
    px_timerq_free(q);
#endif
}

/* Grows through the first arena (its worker faulting pages in as the adds go)
** and beyond, then every timer is cancelled: one PX_ECANCELED call each. */
static void growth_keeps_exactly_once(uint32_t n, int free_at_once)
{
    atomic_store(&calls, 0);
    atomic_store(&cancelled, 0);
    px_timerq *q = px_timerq_new(NULL);
    CHECK(q != NULL);
    uint64_t *ids = malloc(n * sizeof *ids);
    CHECK(ids != NULL);
    for (uint32_t i = 0; i < n; i++) {
        ids[i] = px_timerq_add(q, PX_SEC(30), on_timer, NULL);
        CHECK(ids[i] != 0);
    }
    if (!free_at_once) {
        for (uint32_t i = 0; i < n; i++)
            CHECK_EQ(px_timerq_cancel(q, ids[i]), 1);
        for (uint32_t i = 0; i < n; i += 97)
            CHECK_EQ(px_timerq_cancel(q, ids[i]), 0);
    }
    px_timerq_free(q);   /* owed calls are made before it returns */
    CHECK_EQ(atomic_load(&calls), n);
    CHECK_EQ(atomic_load(&cancelled), n);
    free(ids);
}

int main(void)
{
    int populates = kernel_populates();
    if (!populates)
        fprintf(stderr, "no MADV_POPULATE_WRITE: residency not checked\n");
    arena_asks_for_its_first_arena_only(populates);
    small_queue_stays_small();
    growth_keeps_exactly_once(3 * CHUNK_RECS + 17, 0);
    growth_keeps_exactly_once(MAP_CHUNKS * CHUNK_RECS + 1000, 0);
    /* Freed right after the adds that asked the worker for pages. */
    for (int i = 0; i < 20; i++)
        growth_keeps_exactly_once(CHUNK_RECS + 1 + (uint32_t)i * 500, 1);
    return 0;
}
