/* Fiber stacks: see stack.h for the scheme (guarded mappings up to a budget,
 * slabs with canaries beyond it, a SIGSEGV handler for guard hits). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "parataxis.h"
#include "fiber/stack.h"

#define DEFAULT_SIZE  (64 * 1024)
#define CANARY_WORDS  8                     /* 64 bytes just below a slab stack */
#define CANARY        0x7061726174617869ull /* "parataxi" */
#define KEEP_WARM     64                    /* stacks given back whose memory we keep */
#define ALTSTACK_SIZE (64 * 1024)
#define SLAB_BYTES    (16u << 20) /* ~16 MiB of stacks per slab mapping */
#define GUARD_BYTES   (64 * 1024) /* at least: a frame up to this cannot jump it */
#define SLAB_MIN      16          /* stacks per slab, however large they are */
/* Larger stacks are refused: below it, rounding, the guard and a slab of
 * SLAB_MIN stacks all fit in a size_t; no address space holds one anyway. */
#define SIZE_LIMIT (SIZE_MAX / (2 * SLAB_MIN))

/*
** The pool's stacks of its default size.  Those given back wait in `warm`,
** most recent on top, and are handed out first: their pages are resident
** already.  Past the KEEP_WARM on top, the older ones go cold (their pages
** back to the system, below index `ncold`).  New stacks come from the guard
** budget, else from slabs, whose slots are carved lowest first (`carved` of
** them so far).  A fiber claims a stack at spawn and takes it at its first
** turn.  The pool keeps a stack ready (warm, or a slot not carved yet) for
** every claim not taken, and `spare` more, so a take never fails.
*/
struct px__stack_pool {
    size_t size; /* default stack size, page multiple */
    px__stack *warm;
    size_t nwarm, ncold, warmcap;
    size_t spare;
    char **slabs;
    size_t nslabs, slabcap;
    size_t slots;  /* stacks per slab */
    size_t carved;
    size_t slab_bytes;
};

static size_t page, guard; /* guard: GUARD_BYTES rounded up to pages */
static pthread_once_t page_once = PTHREAD_ONCE_INIT;
static long guard_budget = 10000;
static atomic_long guarded_live;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct sigaction old_segv;

static _Thread_local uint64_t run_id;
static _Thread_local const void *run_guard_lo, *run_guard_hi;
static _Thread_local void *alt_mem;
static _Thread_local int alt_users;

static size_t round_page(size_t n)
{
    return (n + page - 1) & ~(page - 1);
}

/* Async-signal-safe: write(2) only. */
void px__stack_overflowed(uint64_t fiber_id)
{
    char buf[80], num[24];
    size_t n = 0, k = 0;
    const char *a = "parataxis: fiber ", *b = " overflowed its stack\n";
    uint64_t fiber_number = px_fiber_number(fiber_id);
    do
        num[k++] = (char)('0' + fiber_number % 10);
    while ((fiber_number /= 10) && k < sizeof num);
    while (*a)
        buf[n++] = *a++;
    while (k)
        buf[n++] = num[--k];
    while (*b)
        buf[n++] = *b++;
    ssize_t w = write(2, buf, n);
    (void)w;
    abort();
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    const char *addr = si->si_addr;
    if (run_guard_lo && addr >= (const char *)run_guard_lo && addr < (const char *)run_guard_hi)
        px__stack_overflowed(run_id);
    /* Not ours: the previous handler, or the default action on return. */
    if (old_segv.sa_flags & SA_SIGINFO) {
        old_segv.sa_sigaction(sig, si, uc);
    } else if (old_segv.sa_handler == SIG_DFL || old_segv.sa_handler == SIG_IGN) {
        signal(sig, SIG_DFL); /* the fault recurs on return and kills us */
    } else {
        old_segv.sa_handler(sig);
    }
}

static void page_init(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    guard = GUARD_BYTES < page ? page : round_page(GUARD_BYTES);
}

static void init_once(void)
{
    struct sigaction sa;
    const char *env = getenv("PARATAXIS_GUARDED_STACKS");
    pthread_once(&page_once, page_init);
    if (env && *env)
        guard_budget = strtol(env, NULL, 10);
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
}

/* A guard hit runs the handler with no stack left: give the thread an
 * alternate one unless it has one already. */
static void altstack_acquire(void)
{
    stack_t ss, old;
    if (alt_users++ > 0 || sigaltstack(NULL, &old) != 0 || !(old.ss_flags & SS_DISABLE))
        return;
    alt_mem = mmap(NULL, ALTSTACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (alt_mem == MAP_FAILED) {
        alt_mem = NULL;
        return;
    }
    ss.ss_sp = alt_mem;
    ss.ss_size = ALTSTACK_SIZE;
    ss.ss_flags = 0;
    sigaltstack(&ss, NULL);
}

static void altstack_release(void)
{
    stack_t ss;
    if (--alt_users > 0 || !alt_mem)
        return;
    memset(&ss, 0, sizeof ss);
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
    munmap(alt_mem, ALTSTACK_SIZE);
    alt_mem = NULL;
}

px__stack_pool *px__stack_pool_new(size_t default_size)
{
    px__stack_pool *p;
    pthread_once(&once, init_once);
    if (default_size > SIZE_LIMIT)
        return NULL;
    p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->size = round_page(default_size ? default_size : DEFAULT_SIZE);
    p->slots = SLAB_BYTES / p->size < SLAB_MIN ? SLAB_MIN : SLAB_BYTES / p->size;
    p->slab_bytes = p->slots * p->size;
    altstack_acquire();
    return p;
}

static void *map(size_t n)
{
    void *m = mmap(NULL, n, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

int px__stack_mappable(size_t size)
{
    void *m;
    pthread_once(&page_once, page_init);
    if (size > SIZE_LIMIT)
        return 0;
    size = round_page(size) + guard;
    m = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return 0;
    munmap(m, size);
    return 1;
}

static void canary_set(px__stack *s)
{
    uint64_t *c = (uint64_t *)s->lo - CANARY_WORDS;
    for (int i = 0; i < CANARY_WORDS; i++)
        c[i] = CANARY;
}

int px__stack_intact(const px__stack *s)
{
    const uint64_t *c = (const uint64_t *)s->lo - CANARY_WORDS;
    if (s->guarded)
        return 1;
    for (int i = 0; i < CANARY_WORDS; i++)
        if (c[i] != CANARY)
            return 0;
    return 1;
}

/* Own mapping, guard below: within the budget, and while the kernel still
 * lets mprotect split mappings. */
static int get_single(size_t size, px__stack *out);

static int get_guarded(size_t size, px__stack *out)
{
    char *m;
    if (atomic_fetch_add(&guarded_live, 1) >= guard_budget)
        goto over;
    m = map(size + guard);
    if (!m)
        goto over;
    if (mprotect(m, guard, PROT_NONE) != 0) {
        munmap(m, size + guard);
        goto over;
    }
    memset(out, 0, sizeof *out);
    out->lo = m + guard;
    out->size = size;
    out->guarded = 1;
    out->map = m;
    return 0;
over:
    atomic_fetch_sub(&guarded_live, 1);
    return PX_ENOMEM;
}

int px__stack_get_shared(px__stack_pool *p, px__stack *out)
{
    char *m = map(p->size + guard);
    if (!m)
        return PX_ENOMEM;
    if (mprotect(m, guard, PROT_NONE) != 0) {   /* out of mappings: a canary instead */
        munmap(m, p->size + guard);
        return get_single(p->size, out);
    }
    atomic_fetch_add(&guarded_live, 1);   /* release() counts it out */
    memset(out, 0, sizeof *out);
    out->lo = m + guard;
    out->size = p->size;
    out->guarded = 1;
    out->map = m;
    return 0;
}

/* Odd-sized stack past the budget: its own mapping, a canary page below. */
static int get_single(size_t size, px__stack *out)
{
    char *m = map(size + page);
    if (!m)
        return PX_ENOMEM;
    memset(out, 0, sizeof *out);
    out->lo = m + page;
    out->size = size;
    out->map = m;
    canary_set(out);
    return 0;
}

/* A slab: [guard][canary page][slot 0]...[slot n-1].  Slot i's canary is the
 * top of slot i-1, a page that slot's fiber touches anyway, so a stack costs
 * no page of its own for its canary.  A runaway fiber runs down through the
 * slots below its own into the guard, which the SIGSEGV handler knows as its
 * (every slab stack's map is its slab).  One guard per slab, not per stack:
 * each would cost a mapping, and a million stacks would need two million. */
static size_t slab_total(const px__stack_pool *p)
{
    return guard + page + p->slab_bytes;
}

static int add_slab(px__stack_pool *p)
{
    char *m;
    if (p->nslabs == p->slabcap) {
        size_t cap = p->slabcap ? 2 * p->slabcap : 16;
        char **s = realloc(p->slabs, cap * sizeof *s);
        if (!s)
            return PX_ENOMEM;
        p->slabs = s;
        p->slabcap = cap;
    }
    m = map(slab_total(p));
    if (!m)
        return PX_ENOMEM;
    mprotect(m, guard, PROT_NONE); /* best effort: a slab is one split */
    p->slabs[p->nslabs++] = m;
    p->spare += p->slots;
    return 0;
}

/* The next slot of the slabs, lowest first; the caller checked there is one. */
static void carve(px__stack_pool *p, px__stack *out)
{
    size_t k = p->carved++, i = k / p->slots;
    memset(out, 0, sizeof *out);
    out->lo = p->slabs[i] + guard + page + k % p->slots * p->size;
    out->size = p->size - CANARY_WORDS * sizeof(uint64_t);
    out->slab = 1;
    out->map = p->slabs[i];
}

int px__stack_claim(px__stack_pool *p, size_t size, px__stack *out)
{
    if (size != 0 && size != p->size) {
        if (size > SIZE_LIMIT)
            return PX_ENOMEM; /* would wrap below; no address space holds it */
        size = round_page(size);
        if (size != p->size)
            return get_guarded(size, out) == 0 ? 0 : get_single(size, out);
    }
    if (p->spare == 0 && add_slab(p) != 0)
        return PX_ENOMEM;
    p->spare--;
    out->lo = NULL;
    return 0;
}

void px__stack_take(px__stack_pool *p, px__stack *s)
{
    if (s->lo != NULL)
        return; /* a size of its own, mapped at the claim */
    if (p->nwarm > 0) {
        *s = p->warm[--p->nwarm];
        if (p->ncold > p->nwarm)
            p->ncold = p->nwarm;
    } else if (get_guarded(p->size, s) == 0) {
        p->spare++; /* the stack kept ready for this claim stays ready */
    } else {
        carve(p, s);
    }
    if (s->slab)
        canary_set(s);
}

int px__stack_get(px__stack_pool *p, size_t size, px__stack *out)
{
    int r = px__stack_claim(p, size, out);
    if (r == 0)
        px__stack_take(p, out);
    return r;
}

static void release(px__stack *s)
{
    /* its mapping: a guard or a canary page below it (see get_guarded, get_single) */
    munmap(s->map, s->size + (size_t)((char *)s->lo - (char *)s->map));
    if (s->guarded)
        atomic_fetch_sub(&guarded_live, 1);
}

/* Gives the pages of [lo, hi) back, keeping the mapping. */
static void cool(char *lo, char *hi)
{
    if (hi > lo)
        madvise(lo, (size_t)(hi - lo), MADV_DONTNEED);
}

/* Cools the warm stacks below the KEEP_WARM on top.  Slab stacks next to each
** other go in one call (a million fibers that end in spawn order give their
** slots back in order), less the top page of each run of them: it holds the
** canary of the slot above, whose fiber may be running. */
static void cool_old(px__stack_pool *p)
{
    size_t i = p->ncold, end = p->nwarm - KEEP_WARM;
    while (i < end) {
        const px__stack *s = &p->warm[i++];
        char *lo = s->lo, *hi = lo + (s->slab ? p->size : s->size);
        for (; s->slab && i < end && p->warm[i].slab; i++) {
            char *next = p->warm[i].lo;
            if (next == hi)
                hi += p->size;
            else if (next + p->size == lo)
                lo = next;
            else
                break;
        }
        cool(lo, s->slab ? hi - page : hi);
    }
    p->ncold = end;
}

void px__stack_put(px__stack_pool *p, px__stack *s)
{
    if (s->lo == NULL) {
        p->spare++; /* a claim never taken: its fiber never ran */
        return;
    }
    if (!s->slab && !(s->guarded && s->size == p->size)) {
        release(s);
        return;
    }
    if (p->nwarm == p->warmcap) {
        size_t cap = p->warmcap ? 2 * p->warmcap : 64;
        px__stack *w = realloc(p->warm, cap * sizeof *w);
        if (!w) {
            if (!s->slab)
                release(s); /* a slab slot is lost until px__stack_pool_free: harmless */
            return;
        }
        p->warm = w;
        p->warmcap = cap;
    }
    p->warm[p->nwarm++] = *s;
    p->spare++;
    if (p->nwarm - p->ncold >= 2 * KEEP_WARM)
        cool_old(p);   /* in batches of KEEP_WARM, oldest first */
}

void px__stack_pool_free(px__stack_pool *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nwarm; i++)
        if (!p->warm[i].slab)
            release(&p->warm[i]);
    for (size_t i = 0; i < p->nslabs; i++)
        munmap(p->slabs[i], slab_total(p));
    free(p->warm);
    free(p->slabs);
    free(p);
    altstack_release();
}

void px__stack_running(uint64_t fiber_id, const px__stack *s)
{
    run_id = fiber_id;

    if (s && (s->guarded || s->slab)) { /* its own guard, or its slab's */
        run_guard_lo = s->map;
        run_guard_hi = (const char *)s->map + guard;
    } else {
        run_guard_lo = run_guard_hi = NULL;
    }
}
