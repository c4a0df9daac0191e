/*
** rwlock.c -- a writer-preferring read/write lock (see parataxis.h).
**
** Readers and writers wait in one FIFO queue.  A new reader enters only when
** there is no writer and nobody waits: once a writer queues, the readers that
** come after it queue behind it, so a stream of readers cannot starve it.
** admit() is the one place that lets waiters in: a writer at the head of the
** queue when the lock is free, or every reader at the head up to the next
** writer when no writer holds it.  It runs after every release, and after an
** interrupted wait (a writer that gives up may unblock the readers behind it).
**
** Read holds are counted per fiber, so the read side is reentrant.  Each
** reading fiber has one record (an rdhold): on the lock's list of readers,
** so deadlock reports can name them, and on the fiber's list of holds, so a
** fiber that ends lets its read holds go.  The caller's record is found on
** its own list of holds, which is as long as what that one fiber holds.
** Records are kept for reuse; a reader that must wait reserves its record
** before it parks, so admitting it cannot fail for want of memory.
**
** A writer that ends holding the lock sets `dead`.  The next writer gets
** PX_EOWNERDEAD and clears it; until then every read hold taken returns
** PX_EOWNERDEAD too (readers cannot repair the state, but they must know
** that it may be torn).  A reader that ends just lets its holds go.
*/
#include <stdlib.h>

#include "sync/sync.h"

enum rwlock_op { RWLOCK_READ, RWLOCK_WRITE };

typedef struct rdhold rdhold;
struct rdhold {
    px__hold hold;            /* on the reading fiber's list of holds */
    px_rwlock *l;
    size_t count;            /* its read holds */
    px__list link;            /* in l->readers while held, else in l->spare */
    rdhold *all;             /* every record the lock made, for px_rwlock_free */
};

struct px_rwlock {
    px__hold wr_hold;         /* the writer, if any; on its list of holds */
    px__list readers;         /* one record per fiber holding read holds, newest last */
    size_t nreaders;
    px__list spare;           /* records free for reuse, the last put back last */
    rdhold *all;             /* all records */
    px__waitq waiters;        /* readers (RWLOCK_READ) and writers (RWLOCK_WRITE), FIFO */
    unsigned char dead;      /* a writer ended holding it; no writer since */
};

#define rd_of(h) PX__CONTAINER_OF(h, rdhold, hold)
#define rd_of_link(n) PX__CONTAINER_OF(n, rdhold, link)
#define lock_of_wr(h) PX__CONTAINER_OF(h, px_rwlock, wr_hold)

static void rd_ended(px__hold *h, uint64_t id, int discarding);
static void wr_ended(px__hold *h, uint64_t id, int discarding);

/* A writer holds l (while nobody does, the write hold's owner is NULL, as
** px__waitq_hold_drop leaves it). */
static int has_writer(const px_rwlock *l)
{
    return px__waitq_holder(&l->wr_hold) != NULL;
}

/* -- read-hold records ---------------------------------------------------- */

/* The caller's record, NULL when it holds no read hold on l. */
static rdhold *find(const px_rwlock *l, const px_fiber *f)
{
    if (l->nreaders == 0)
        return NULL;
    for (px__hold *h = px__waitq_holds(f); h; h = h->next)
        if (h->ended == rd_ended && rd_of(h)->l == l)
            return rd_of(h);
    return NULL;
}

/* The record put back last, or a new one. */
static rdhold *record_get(px_rwlock *l)
{
    rdhold *r;
    if (!px__list_empty(&l->spare)) {
        r = rd_of_link(l->spare.prev);
        px__list_unlink(&r->link);
        return r;
    }
    if ((r = calloc(1, sizeof *r)) == NULL)
        return NULL;
    r->all = l->all;
    l->all = r;
    return r;
}

static void record_put(px_rwlock *l, rdhold *r)
{
    px__list_push(&l->spare, &r->link);
}

/* Fiber f now holds one read hold, through record r. */
static void attach(px_rwlock *l, rdhold *r, px_fiber *f)
{
    r->l = l;
    r->count = 1;
    px__list_push(&l->readers, &r->link);
    l->nreaders++;
    px__waitq_hold_take(&r->hold, f, rd_ended);
}

static void detach(px_rwlock *l, rdhold *r)
{
    px__list_unlink(&r->link);
    l->nreaders--;
    px__waitq_hold_drop(&r->hold);   /* a no-op when the fiber's end dropped it */
    record_put(l, r);
}

/* -- admission ------------------------------------------------------------ */

static int read_code(const px_rwlock *l)
{
    return l->dead ? PX_EOWNERDEAD : 0;
}

/* Makes fiber f the writer; returns what its wrlock returns. */
static int take_write(px_rwlock *l, px_fiber *f)
{
    int code = l->dead ? PX_EOWNERDEAD : 0;
    l->dead = 0;
    px__waitq_hold_take(&l->wr_hold, f, wr_ended);
    return code;
}

/* Step 4 of waitq.h: lets in whom the head of the queue allows: one writer,
** or the run of readers before the next writer.  Owners are recorded before
** the wakes. */
static void admit(px_rwlock *l)
{
    px__waiter *w = px__waitq_first(&l->waiters);
    if (w == NULL || has_writer(l))
        return;
    if (w->op == RWLOCK_WRITE) {
        if (l->nreaders == 0)
            px__waitq_grant(w, take_write(l, px__waitq_fiber(w)));
        return;
    }
    for (; w && w->op == RWLOCK_READ; w = px__waitq_first(&l->waiters)) {
        rdhold *r = w->value;      /* reserved when it queued */
        w->value = NULL;
        attach(l, r, px__waitq_fiber(w));
        px__waitq_grant(w, read_code(l));
    }
}

/* -- holders that end, grants that raced an interrupt ---------------------- */

static void wr_ended(px__hold *h, uint64_t id, int discarding)
{
    px_rwlock *l = lock_of_wr(h);
    (void)id;                       /* the hold is dropped: no writer */
    if (discarding)
        return;   /* every waiter is being discarded too: wake nobody */
    l->dead = 1;
    admit(l);
}

static void rd_ended(px__hold *h, uint64_t id, int discarding)
{
    rdhold *r = rd_of(h);
    px_rwlock *l = r->l;
    (void)id;
    detach(l, r);
    if (!discarding && l->nreaders == 0)
        admit(l);
}

/* A reader admitted while a scope interrupted it: it will not read, so its
** only hold goes (a waiting reader held none before). */
static void rd_pass_on(px__waiter *w)
{
    px_rwlock *l = (px_rwlock *)w->obj;
    rdhold *r = find(l, px__waitq_fiber(w));
    if (r)
        detach(l, r);
    admit(l);
}

/* A writer granted the lock while a scope interrupted it: the lock goes on,
** and a PX_EOWNERDEAD it carried goes on with it. */
static void wr_pass_on(px__waiter *w)
{
    px_rwlock *l = (px_rwlock *)w->obj;
    px__waitq_hold_drop(&l->wr_hold);
    if (w->result == PX_EOWNERDEAD)
        l->dead = 1;
    admit(l);
}

/* -- waiting -------------------------------------------------------------- */

static size_t rwlock_holders(const void *object, uint64_t *out, size_t max)
{
    const px_rwlock *l = object;
    px_fiber *writer = px__waitq_holder(&l->wr_hold);
    size_t n = 0;
    if (writer != NULL && n < max)
        out[n++] = px__waitq_hold_id(&l->wr_hold);
    /* Newest reader first. */
    for (const px__list *k = l->readers.prev; k != &l->readers && n < max; k = k->prev) {
        const rdhold *r = rd_of_link(k);
        if (px__waitq_holder(&r->hold) != writer)
            out[n++] = px__waitq_hold_id(&r->hold);
    }
    return n;
}

/* The lock is held by fibers of another scheduler than f's (a misuse):
** every holder is of one scheduler (the rule keeps it so), so one says whose. */
static int foreign(const px_rwlock *l, const px_fiber *f)
{
    px_fiber *writer = px__waitq_holder(&l->wr_hold);
    if (writer != NULL)
        return px__waitq_foreign(writer, f);
    return !px__list_empty(&l->readers)
           && px__waitq_foreign(px__waitq_holder(&rd_of_link(l->readers.prev)->hold), f);
}

/* The wait of w ended with r: give back a record it did not use, and after
** an interrupt let in whom the leaver was holding up. */
static int after_wait(px_rwlock *l, px__waiter *w, int r)
{
    if (r == PX_EYIELD)
        return r;                   /* still waiting (a hosted fiber's re-call) */
    if (w->value) {
        record_put(l, w->value);
        w->value = NULL;
    }
    if (r == PX_ETIMEDOUT || r == PX_ECANCELED)
        admit(l);
    return r;
}

/* Step 3 of waitq.h: queue and park last (a reader first reserves the record
** admit() will give it), then after_wait. */
static int park(px_rwlock *l, px_fiber *f, int op)
{
    if (foreign(l, f))
        return PX_ETHREAD;
    rdhold *rec = NULL;
    if (op == RWLOCK_READ && (rec = record_get(l)) == NULL)
        return PX_ENOMEM;
    px__waiter *w = px__waitq_begin(f, l, op, op == RWLOCK_READ ? rd_pass_on : wr_pass_on);
    w->value = rec;
    static const px_park_info rd = { .reason = "RwLock read lock", .kind = "rwlock",
                                     .holders = rwlock_holders };
    static const px_park_info wr = { .reason = "RwLock write lock", .kind = "rwlock",
                                     .holders = rwlock_holders };
    int r = px__waitq_wait(&l->waiters, w, op == RWLOCK_READ ? &rd : &wr);
    return after_wait(l, w, r);
}

/* A read hold at once, if one may be had: 1 with *code set, else 0. */
static int read_now(px_rwlock *l, px_fiber *f, int *code)
{
    rdhold *r = find(l, f);
    if (r) {
        r->count++;                 /* reentrant, even with a writer waiting */
        *code = read_code(l);
        return 1;
    }
    if (!px__waitq_held_by(&l->wr_hold, f) && (has_writer(l) || l->waiters.len != 0))
        return 0;
    /* No writer but f: the newest reader says whose readers they are. */
    if (l->nreaders != 0
        && px__waitq_foreign(px__waitq_holder(&rd_of_link(l->readers.prev)->hold), f)) {
        *code = PX_ETHREAD;
        return 1;
    }
    if ((r = record_get(l)) == NULL) {
        *code = PX_ENOMEM;
        return 1;
    }
    attach(l, r, f);
    *code = read_code(l);
    return 1;
}

/* -- the API -------------------------------------------------------------- */

px_rwlock *px_rwlock_new(void)
{
    px_rwlock *l = calloc(1, sizeof *l);   /* errno is ENOMEM on failure */
    if (l) {
        px__list_init(&l->readers);
        px__list_init(&l->spare);
        px__waitq_init(&l->waiters);
    }
    return l;
}

int px_rwlock_rdlock(px_rwlock *l)
{
    px_fiber *f;
    int r;
    if (px__sync_enter(l, RWLOCK_READ, &f, &r))   /* NULL, off-fiber, a hosted re-call */
        return f ? after_wait(l, px__waitq_own(f), r) : r;
    if (read_now(l, f, &r))
        return r;
    return park(l, f, RWLOCK_READ);
}

int px_rwlock_tryrdlock(px_rwlock *l)
{
    px_fiber *f;
    int r = px__sync_caller(l, &f);
    if (r != 0)
        return r;
    return read_now(l, f, &r) ? r : PX_EBUSY;
}

/* PX_EDEADLK when f holds l already, in either mode; else 0. */
static int upgrade(const px_rwlock *l, const px_fiber *f)
{
    return px__waitq_held_by(&l->wr_hold, f) || find(l, f) ? PX_EDEADLK : 0;
}

static int write_free(const px_rwlock *l)
{
    return !has_writer(l) && l->nreaders == 0 && l->waiters.len == 0;
}

int px_rwlock_wrlock(px_rwlock *l)
{
    px_fiber *f;
    int r;
    if (px__sync_enter(l, RWLOCK_WRITE, &f, &r))   /* NULL, off-fiber, a hosted re-call */
        return f ? after_wait(l, px__waitq_own(f), r) : r;
    if ((r = upgrade(l, f)) != 0)
        return r;
    if (write_free(l))
        return take_write(l, f);
    return park(l, f, RWLOCK_WRITE);
}

int px_rwlock_trywrlock(px_rwlock *l)
{
    px_fiber *f;
    int r = px__sync_caller(l, &f);
    if (r != 0)
        return r;
    if ((r = upgrade(l, f)) != 0)
        return r;
    return write_free(l) ? take_write(l, f) : PX_EBUSY;
}

int px_rwlock_rdunlock(px_rwlock *l)
{
    px_fiber *f;
    int e = px__sync_caller(l, &f);
    if (e != 0)
        return e;
    rdhold *r = find(l, f);
    if (r == NULL)
        return PX_EPERM;
    if (--r->count == 0) {
        detach(l, r);
        if (l->nreaders == 0)
            admit(l);
    }
    return 0;
}

int px_rwlock_wrunlock(px_rwlock *l)
{
    px_fiber *f;
    int r = px__sync_caller(l, &f);
    if (r != 0)
        return r;
    if (!px__waitq_held_by(&l->wr_hold, f))
        return PX_EPERM;
    px__waitq_hold_drop(&l->wr_hold);   /* its read holds stay: a downgrade */
    admit(l);
    return 0;
}

size_t px_rwlock_readers(const px_rwlock *l)
{
    return l ? l->nreaders : 0;
}

uint64_t px_rwlock_writer(const px_rwlock *l)
{
    return l ? px__waitq_hold_id(&l->wr_hold) : 0;
}

size_t px_rwlock_waiters(const px_rwlock *l)
{
    return l ? l->waiters.len : 0;
}

int px_rwlock_free(px_rwlock *l)
{
    if (l == NULL)
        return 0;
    if (has_writer(l) || l->nreaders != 0 || l->waiters.len != 0)
        return PX_EBUSY;
    while (l->all) {
        rdhold *r = l->all;
        l->all = r->all;
        free(r);
    }
    px__names_forget(l);
    free(l);
    return 0;
}
