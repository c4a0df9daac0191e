/*
** bench_heap.h -- two heaps with back-pointers, for bench_tset only: the plain
** binary heap most event loops use (libuv, Asio) and a 4-ary heap (Go's timers).
** Each node knows its index, so removal is O(log n) with no search.
*/
#ifndef BENCH_HEAP_H
#define BENCH_HEAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct bh_node {
    int64_t deadline;
    size_t index;            /* position in the heap array: the back-pointer */
} bh_node;

typedef struct bh_heap {
    bh_node **a;
    size_t len, cap;
} bh_heap;

/* The binary heap (heap_bin.c) and the 4-ary heap (heap_quad.c). */
int hb_insert(bh_heap *h, bh_node *n);
void hb_remove(bh_heap *h, bh_node *n);
bh_node *hb_pop_due(bh_heap *h, int64_t now);   /* the earliest node if due, else NULL */
int hq_insert(bh_heap *h, bh_node *n);
void hq_remove(bh_heap *h, bh_node *n);
bh_node *hq_pop_due(bh_heap *h, int64_t now);

#endif
