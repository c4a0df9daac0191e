/*
** deadlock.c -- the report px_sched_run writes when fibers remain parked and
** nothing can ever wake them.  It names every parked fiber (in id order), its
** wait reason, the object it waits on and that object's holders, then looks for
** a wait-for cycle: from each fiber it follows the first holder that is itself
** parked, and a walk that comes back onto itself is a cycle.  Every fiber is
** stamped by one walk only, and a step finds a fiber's stamp by a binary search
** on its id, so the search takes O(n log n) steps for n parked fibers.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fiber/fiber.h"

#define LIST_MAX    1000   /* fibers listed one per line; the rest are counted */
#define HOLDERS_MAX 8

typedef struct buf {
    char *p;
    size_t len, cap;
    int failed;
} buf;

static void put(buf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 1024) + (size_t)n;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

static size_t holders_of(const px_fiber *f, uint64_t *out)
{
    if (f->park.holders == NULL || f->park.object == NULL)
        return 0;
    size_t n = f->park.holders(f->park.object, out, HOLDERS_MAX);
    return n > HOLDERS_MAX ? HOLDERS_MAX : n;
}

static void put_object(buf *b, const px_fiber *f)
{
    char name[PX_NAME_MAX];
    put(b, "%s", f->park.kind ? f->park.kind : "object");
    if (px_object_name(f->park.object, name, sizeof name))
        put(b, " \"%s\"", name);
    put(b, "@%p", f->park.object);
}

/* "fiber <number>", and its name when it has one: fiber `id` of s. */
static void put_fiber(buf *b, px_sched *s, uint64_t id)
{
    const char *name = px__extra_name_of(s, id);
    put(b, "fiber %llu", (unsigned long long)px__fiber_number(id));
    if (name)
        put(b, " \"%s\"", name);
}

static void put_fiber_line(buf *b, px_sched *s, const px_fiber *f)
{
    put(b, "  ");
    put_fiber(b, s, f->id);
    put(b, ": parked on \"%s\"", f->park.reason ? f->park.reason : "?");
    if (f->park.object == NULL) {
        put(b, "\n");
        return;
    }
    put(b, ", waits on ");
    put_object(b, f);
    uint64_t h[HOLDERS_MAX];
    size_t n = holders_of(f, h);
    if (n == 0)
        put(b, f->park.holders ? ", held by nobody" : "");
    for (size_t i = 0; i < n; i++) {
        put(b, "%s ", i ? "," : " held by");
        put_fiber(b, s, h[i]);
    }
    put(b, "\n");
}

/* The first holder of f's object that is a parked fiber of s, or NULL. */
static px_fiber *blocker(px_sched *s, const px_fiber *f)
{
    uint64_t h[HOLDERS_MAX];
    size_t n = holders_of(f, h);
    for (size_t i = 0; i < n; i++) {
        px_fiber *g = px__sched_lookup(s, h[i]);
        if (g && g->state == PX__FIBER_PARKED)
            return g;
    }
    return NULL;
}

/* Walk stamps live in a table beside the records: index i is the i-th parked
** fiber, found again by binary search on the id (the list is in id order). */
static size_t index_of(px_fiber **v, size_t n, const px_fiber *f)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid]->id < f->id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void put_cycle(buf *b, px_sched *s, px_fiber **v, size_t n)
{
    size_t *stamp = calloc(n, sizeof *stamp);
    if (stamp == NULL)
        return;
    for (size_t start = 0; start < n; start++) {
        if (stamp[start])
            continue;
        px_fiber *f = v[start];
        while (f && stamp[index_of(v, n, f)] == 0) {
            stamp[index_of(v, n, f)] = start + 1;
            f = blocker(s, f);
        }
        if (f == NULL || stamp[index_of(v, n, f)] != start + 1)
            continue;   /* ended, or ran into an earlier walk */
        put(b, "wait-for cycle: ");
        put_fiber(b, s, f->id);
        px_fiber *g = f;
        do {
            px_fiber *h = blocker(s, g);
            put(b, " -> ");
            put_object(b, g);
            put(b, " (\"%s\") held by ", g->park.reason ? g->park.reason : "?");
            put_fiber(b, s, h->id);
            g = h;
        } while (g != f);
        put(b, "\n");
        free(stamp);
        return;
    }
    put(b, "no wait-for cycle is known (the primitives did not name the holders)\n");
    free(stamp);
}

int px__deadlock_report(px_sched *s)
{
    size_t n = 0;
    for (px__list *l = s->all.next; l != &s->all; l = l->next)
        n += px__fiber_of_all(l)->state == PX__FIBER_PARKED;
    px_fiber **v = malloc((n ? n : 1) * sizeof *v);
    buf b = { 0 };
    put(&b, "parataxis: deadlock detected: no fiber can run, no sleep or timeout is "
            "pending and nothing outside holds the scheduler, yet %zu fiber(s) are "
            "parked:\n", n);
    size_t i = 0;
    for (px__list *l = s->all.next; l != &s->all; l = l->next) {
        px_fiber *f = px__fiber_of_all(l);
        if (f->state != PX__FIBER_PARKED)
            continue;
        if (i < LIST_MAX)
            put_fiber_line(&b, s, f);
        if (v)
            v[i] = f;
        i++;
    }
    if (n > LIST_MAX)
        put(&b, "  ... and %zu more\n", n - LIST_MAX);
    if (v)
        put_cycle(&b, s, v, n);
    free(v);
    const char *text =
        b.failed || b.p == NULL ? "parataxis: deadlock detected (no memory for the report)\n" : b.p;
    if (s->opts.on_deadlock) {
        s->in_hook = 1;   /* px_sched_next refuses to pull from here */
        s->opts.on_deadlock(s->opts.on_deadlock_ctx, text);
        s->in_hook = 0;
    } else {
        fputs(text, stderr);
    }
    free(b.p);
    return PX_EDEADLK;
}
