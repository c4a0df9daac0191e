/*
** heap_dary.h -- a d-ary min-heap on deadline, instantiated by heap_bin.c
** (ARITY 2, prefix hb_) and heap_quad.c (ARITY 4, prefix hq_).  Defining the
** arity at compile time lets the compiler turn the index arithmetic into shifts,
** as a hand-written heap would.
*/
#include <stdlib.h>

#include "bench_heap.h"

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define FN(name) CAT(PREFIX, name)

static void FN(place)(bh_heap *h, size_t i, bh_node *n)
{
    h->a[i] = n;
    n->index = i;
}

static void FN(sift_up)(bh_heap *h, size_t i, bh_node *n)
{
    while (i > 0) {
        size_t parent = (i - 1) / ARITY;
        if (h->a[parent]->deadline <= n->deadline)
            break;
        FN(place)(h, i, h->a[parent]);
        i = parent;
    }
    FN(place)(h, i, n);
}

static void FN(sift_down)(bh_heap *h, size_t i, bh_node *n)
{
    for (;;) {
        size_t first = ARITY * i + 1, best = first;
        if (first >= h->len)
            break;
        size_t end = first + ARITY < h->len ? first + ARITY : h->len;
        for (size_t c = first + 1; c < end; c++)
            if (h->a[c]->deadline < h->a[best]->deadline)
                best = c;
        if (n->deadline <= h->a[best]->deadline)
            break;
        FN(place)(h, i, h->a[best]);
        i = best;
    }
    FN(place)(h, i, n);
}

int FN(insert)(bh_heap *h, bh_node *n)
{
    if (h->len == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        bh_node **a = realloc(h->a, cap * sizeof *a);
        if (a == NULL)
            return -1;
        h->a = a;
        h->cap = cap;
    }
    FN(sift_up)(h, h->len++, n);
    return 0;
}

void FN(remove)(bh_heap *h, bh_node *n)
{
    size_t i = n->index;
    bh_node *last = h->a[--h->len];
    if (last == n)
        return;
    /* The last node fills the hole and moves whichever way it must. */
    if (i > 0 && last->deadline < h->a[(i - 1) / ARITY]->deadline)
        FN(sift_up)(h, i, last);
    else
        FN(sift_down)(h, i, last);
}

bh_node *FN(pop_due)(bh_heap *h, int64_t now)
{
    if (h->len == 0 || h->a[0]->deadline > now)
        return NULL;
    bh_node *top = h->a[0];
    FN(remove)(h, top);
    return top;
}
