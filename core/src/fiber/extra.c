/*
** extra.c -- what a fiber has only when it is asked for: a name
** (px_fiber_set_name) and fiber-local values (px_local_*).  They live in a
** record of their own, found from the fiber's by a slot number in
** s->extras, so a fiber that has neither carries only that number (0) and a
** spawn or an end that has nothing to do costs one test.
**
** A key is counted: its maker holds it, and so does every fiber with a value
** for it, so that px_local_free leaves the values in place and their
** destructors run when their fibers end.  Keys go between threads (any
** scheduler's fibers may use one), so the count is atomic; the values are
** their fiber's and need no lock.
*/
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/compiler.h"
#include "base/names.h"
#include "fiber/fiber.h"

struct px_local {
    atomic_long refs;
    void (*destroy)(void *value);
    void *(*inherit)(void *value);
};

typedef struct value {
    px_local *key;
    void *v;
} value;

typedef struct px__extra {
    char *name;
    value *vals;
    size_t nvals, cap;
} px__extra;

static void key_put(px_local *k)
{
    if (atomic_fetch_sub_explicit(&k->refs, 1, memory_order_acq_rel) == 1)
        free(k);
}

/* -- slots ---------------------------------------------------------------- */

static px__extra *extra_of(const px_fiber *f)
{
    return f->extra ? f->s->extras[f->extra] : NULL;
}

/* f's record, made when it has none; NULL when out of memory. */
static px__extra *extra_make(px_fiber *f)
{
    px_sched *s = f->s;
    if (f->extra)
        return s->extras[f->extra];
    if (s->extras_nfree == 0 && s->extras_len + 1 >= s->extras_cap) {
        uint32_t cap = s->extras_cap ? s->extras_cap * 2 : 16;
        if (cap <= s->extras_cap)
            return NULL;   /* 2^32 slots: out of numbers */
        px__extra **v = realloc(s->extras, cap * sizeof *v);
        if (v == NULL)
            return NULL;
        s->extras = v;
        uint32_t *fr = realloc(s->extras_free, cap * sizeof *fr);
        if (fr == NULL)
            return NULL;
        s->extras_free = fr;
        s->extras_cap = cap;
    }
    px__extra *x = calloc(1, sizeof *x);
    if (x == NULL)
        return NULL;
    uint32_t i = s->extras_nfree ? s->extras_free[--s->extras_nfree] : ++s->extras_len;
    s->extras[i] = x;
    f->extra = i;
    return x;
}

const char *px__extra_name(const px_fiber *f)
{
    px__extra *x = extra_of(f);
    return x ? x->name : NULL;
}

const char *px__extra_name_of(px_sched *s, uint64_t id)
{
    px_fiber *f = px__sched_lookup(s, id);
    return f ? px__extra_name(f) : NULL;
}

void px__extra_ended(px_fiber *f)
{
    px__extra *x = extra_of(f);
    /* A destructor may set values (of other keys, or this one again): take
    ** the table first, then run them, and whatever was set meanwhile goes too. */
    while (x->nvals) {
        value *v = x->vals;
        size_t n = x->nvals;
        x->vals = NULL;
        x->nvals = x->cap = 0;
        for (size_t i = 0; i < n; i++) {
            if (v[i].v && v[i].key->destroy)
                v[i].key->destroy(v[i].v);
            key_put(v[i].key);
        }
        free(v);
    }
    px_sched *s = f->s;
    free(x->name);
    free(x);
    s->extras[f->extra] = NULL;
    s->extras_free[s->extras_nfree++] = f->extra;
    f->extra = 0;
}

void px__extra_free_all(px_sched *s)
{
    free(s->extras);
    free(s->extras_free);
}

/* -- names ---------------------------------------------------------------- */

/* Fiber `id` of the calling thread's scheduler (0: the calling fiber). */
static px_fiber *fiber_by_id(uint64_t id)
{
    px_sched *s = px__sched_here();
    if (s == NULL)
        return NULL;
    return id == 0 ? s->cur : px__sched_lookup(s, id);
}

int px_fiber_set_name(uint64_t id, const char *name)
{
    px_fiber *f = fiber_by_id(id);
    if (f == NULL || f->state == PX__FIBER_DONE)
        return PX_ENOFIBER;
    char *copy = NULL;
    if (name != NULL) {
        size_t len = px__names_length(name);
        if ((copy = malloc(len + 1)) == NULL)
            return PX_ENOMEM;
        memcpy(copy, name, len);
        copy[len] = '\0';
    }
    px__extra *x = copy ? extra_make(f) : extra_of(f);
    if (x == NULL) {
        free(copy);
        return copy ? PX_ENOMEM : 0;
    }
    free(x->name);
    x->name = copy;
    return 0;
}

const char *px_fiber_name(uint64_t id)
{
    px_fiber *f = fiber_by_id(id);
    return f ? px__extra_name(f) : NULL;
}

uint64_t px_fiber_number(uint64_t id)
{
    return px__fiber_number(id);
}

/* -- local values --------------------------------------------------------- */

px_local *px_local_new(void (*destroy)(void *value), void *(*inherit)(void *value))
{
    px_local *k = malloc(sizeof *k);
    if (k == NULL)
        return NULL;
    atomic_init(&k->refs, 1);
    k->destroy = destroy;
    k->inherit = inherit;
    return k;
}

void px_local_free(px_local *key)
{
    if (key != NULL)
        key_put(key);
}

static value *find(px__extra *x, const px_local *key)
{
    for (size_t i = 0; i < x->nvals; i++)
        if (x->vals[i].key == key)
            return &x->vals[i];
    return NULL;
}

/* A new entry of key in x, holding the key; NULL when out of memory. */
static value *add(px__extra *x, px_local *key)
{
    if (x->nvals == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 4;
        value *v = realloc(x->vals, cap * sizeof *v);
        if (v == NULL)
            return NULL;
        x->vals = v;
        x->cap = cap;
    }
    atomic_fetch_add_explicit(&key->refs, 1, memory_order_relaxed);
    value *e = &x->vals[x->nvals++];
    *e = (value){ key, NULL };
    return e;
}

void *px_local_get(const px_local *key)
{
    px_fiber *f = px__fiber_here();
    if (f == NULL || f->extra == 0 || key == NULL)
        return NULL;
    value *e = find(extra_of(f), key);
    return e ? e->v : NULL;
}

int px_local_set(px_local *key, void *v)
{
    if (key == NULL)
        return PX_EINVAL;
    px_fiber *f = px__fiber_here();
    if (f == NULL)
        return PX_ENOFIBER;
    px__extra *x = extra_of(f);
    value *e = x ? find(x, key) : NULL;
    if (e == NULL) {
        if (v == NULL)
            return 0;   /* nothing to forget */
        if ((x = extra_make(f)) == NULL || (e = add(x, key)) == NULL)
            return PX_ENOMEM;
    }
    void *old = e->v;
    e->v = v;
    if (old != NULL && old != v && key->destroy)
        key->destroy(old);
    return 0;
}

void px__extra_spawned(px_fiber *f, px_fiber *parent)
{
    px__extra *px = extra_of(parent);
    for (size_t i = 0; i < px->nvals; i++) {
        px_local *key = px->vals[i].key;
        if (key->inherit == NULL || px->vals[i].v == NULL)
            continue;
        void *v = key->inherit(px->vals[i].v);
        if (v == NULL)
            continue;
        px__extra *x = extra_make(f);
        value *e = x ? add(x, key) : NULL;
        if (e == NULL) {
            if (key->destroy)
                key->destroy(v);   /* no room: the child starts without it */
            continue;
        }
        e->v = v;
    }
}
