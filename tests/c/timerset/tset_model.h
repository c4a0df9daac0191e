/*
** tset_model.h -- drives the internal ordered set (core/src/timerset.h) with an
** operation sequence decoded from bytes, on a virtual clock, and checks it against
** a reference model: a plain array of the nodes in the set.  Shared by the
** randomized unit test, the libFuzzer target and its replay driver.
**
** Checked: expire never returns a node early nor one not in the set, returns
** all due nodes for max 0, and for a cap at most min(max, due), saying through
** px__tset_next() that more are due when it stopped short, px__tset_next() <= the earliest
** deadline (INT64_MAX when empty), counts match, take_all returns every node.
*/
#ifndef PX_TSET_MODEL_H
#define PX_TSET_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timerset.h"

#define MODEL_NODES 256

#define MODEL_CHECK(c) do { \
    if (!(c)) { \
        fprintf(stderr, "%s:%d: model check failed: %s\n", __FILE__, __LINE__, #c); \
        abort(); \
    } \
} while (0)

typedef struct model {
    px__tset set;
    px__tnode node[MODEL_NODES];
    int live[MODEL_NODES];       /* the model: 1 while node i is in the set */
    size_t nlive;
    int64_t now;
    const uint8_t *p, *end;      /* the undecoded input */
} model;

static uint64_t model_take(model *m, int nbytes)
{
    uint64_t v = 0;
    for (int i = 0; i < nbytes && m->p < m->end; i++)
        v = v << 8 | *m->p++;
    return v;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    return b > 0 && a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* A deadline relative to now: past, due, near, far, hours away, or huge. */
static int64_t model_deadline(model *m)
{
    unsigned cls = (unsigned)model_take(m, 1) % 9;
    int64_t x = (int64_t)(model_take(m, 3) & 0xffffff);
    int64_t tick = (int64_t)1 << PX__TSET_TICK_SHIFT;
    switch (cls) {
    case 0: return m->now - x * 1000 < 0 ? 0 : m->now - x * 1000;
    case 1: return m->now;
    case 2: return sat_add(m->now, x % tick);
    case 3: return sat_add(m->now, x % (64 * tick));
    case 4: return sat_add(m->now, x * 97);
    case 5: return sat_add(m->now, x * 1000000);              /* up to ~4.6 hours */
    case 6: return sat_add(m->now, (x % 24 + 1) * 3600000000000LL);
    case 7: return INT64_MAX / 2 + x;
    default: return INT64_MAX - x;
    }
}

static int64_t model_earliest(const model *m)
{
    int64_t e = INT64_MAX;
    for (int i = 0; i < MODEL_NODES; i++)
        if (m->live[i] && m->node[i].deadline < e)
            e = m->node[i].deadline;
    return e;
}

static size_t model_due(const model *m)
{
    size_t n = 0;
    for (int i = 0; i < MODEL_NODES; i++)
        n += m->live[i] && m->node[i].deadline <= m->now;
    return n;
}

static void model_check_counts(model *m)
{
    MODEL_CHECK(m->set.count == m->nlive);
    int64_t next = px__tset_next(&m->set);
    MODEL_CHECK(next <= model_earliest(m));
    if (m->nlive == 0)
        MODEL_CHECK(next == INT64_MAX);
}

/* Takes a list returned by the set out of the model, checking each node. */
static size_t model_collect(model *m, px__tnode *list, int due_only)
{
    size_t n = 0;
    for (px__tnode *x = list; x != NULL; x = px__tset_after(x)) {
        ptrdiff_t i = x - m->node;
        MODEL_CHECK(i >= 0 && i < MODEL_NODES);
        MODEL_CHECK(m->live[i]);                       /* once, and only if inside */
        MODEL_CHECK(!px__tset_contains(x));
        if (due_only)
            MODEL_CHECK(x->deadline <= m->now);        /* never early */
        m->live[i] = 0;
        m->nlive--;
        n++;
    }
    return n;
}

static void model_insert(model *m)
{
    int64_t d = model_deadline(m);
    unsigned start = (unsigned)model_take(m, 1) % MODEL_NODES;
    for (unsigned k = 0; k < MODEL_NODES; k++) {
        unsigned i = (start + k) % MODEL_NODES;
        if (!m->live[i]) {
            m->node[i].deadline = d;
            px__tset_insert(&m->set, &m->node[i]);
            MODEL_CHECK(px__tset_contains(&m->node[i]));
            m->live[i] = 1;
            m->nlive++;
            return;
        }
    }
}

static void model_remove(model *m)
{
    unsigned start = (unsigned)model_take(m, 1) % MODEL_NODES;
    for (unsigned k = 0; k < MODEL_NODES; k++) {
        unsigned i = (start + k) % MODEL_NODES;
        if (m->live[i]) {
            px__tset_remove(&m->set, &m->node[i]);
            MODEL_CHECK(!px__tset_contains(&m->node[i]));
            m->live[i] = 0;
            m->nlive--;
            return;
        }
    }
}

static void model_advance(model *m)
{
    unsigned cls = (unsigned)model_take(m, 1) % 4;
    int64_t x = (int64_t)(model_take(m, 2) & 0xffff);
    if (cls == 0)
        m->now = sat_add(m->now, x);
    else if (cls == 1)
        m->now = sat_add(m->now, x << 10);
    else if (cls == 2)
        m->now = sat_add(m->now, x * 1000000);
    else {
        int64_t next = px__tset_next(&m->set);   /* the worker's own way to sleep */
        if (next != INT64_MAX && next > m->now)
            m->now = next;
    }
}

static void model_expire(model *m)
{
    size_t max = (size_t)(model_take(m, 1) % 5);
    size_t due = model_due(m);
    size_t want = max == 0 || due < max ? due : max;
    size_t got = model_collect(m, px__tset_expire(&m->set, m->now, max), 1);
    if (max == 0)
        MODEL_CHECK(got == due && model_due(m) == 0);
    /* A capped call may stop early after looking at its share of nodes; then
    ** the set says at once that it has more, and repeated calls get there. */
    for (int calls = 1; got < want; calls++) {
        MODEL_CHECK(calls <= MODEL_NODES);
        MODEL_CHECK(px__tset_next(&m->set) <= m->now);
        got += model_collect(m, px__tset_expire(&m->set, m->now, want - got), 1);
    }
    MODEL_CHECK(got == want);
}

static void model_take_all(model *m)
{
    size_t n = m->nlive;
    MODEL_CHECK(model_collect(m, px__tset_take_all(&m->set), 0) == n);
    MODEL_CHECK(m->nlive == 0 && m->set.count == 0);
}

/* Runs the clock forward as the worker would, until every node came out once. */
static void model_drain(model *m)
{
    for (long steps = 0; m->nlive > 0; steps++) {
        MODEL_CHECK(steps < 1000000);
        int64_t next = px__tset_next(&m->set);
        MODEL_CHECK(next <= model_earliest(m));
        if (next > m->now)
            m->now = next;
        size_t due = model_due(m);
        MODEL_CHECK(model_collect(m, px__tset_expire(&m->set, m->now, 0), 1) == due);
    }
    model_check_counts(m);
}

static void model_run(const uint8_t *data, size_t len)
{
    static model m;   /* 256 nodes and a 8x64 wheel: too big for a fuzzer's stack */
    memset(&m, 0, sizeof m);
    m.p = data;
    m.end = data + len;
    m.now = (int64_t)(model_take(&m, 5) & 0xffffffffffLL);   /* up to ~18 minutes */
    px__tset_init(&m.set, m.now);
    while (m.p < m.end) {
        unsigned op = (unsigned)model_take(&m, 1) % 16;
        if (op < 6)
            model_insert(&m);
        else if (op < 8)
            model_remove(&m);
        else if (op < 11)
            model_advance(&m);
        else if (op < 15)
            model_expire(&m);
        else if (model_take(&m, 1) % 4 == 0)
            model_take_all(&m);
        model_check_counts(&m);
    }
    model_drain(&m);
    px__tset_destroy(&m.set);
}

#endif /* PX_TSET_MODEL_H */
