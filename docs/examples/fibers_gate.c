/*
** fibers_gate.c -- a synchronization primitive written against the park/wake
** contract of parataxis.h alone: a gate that one fiber holds at a time, handed
** over in FIFO order.
**
**   cc fibers_gate.c -lparataxis && ./a.out
**
** The four steps of the contract, as they appear below:
**   1. resolve the fiber (px_self), 2. complete at once if possible,
**   3. queue the id and park last, 4. the releaser hands over, then wakes.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parataxis.h"

typedef struct gate {
    uint64_t owner;          /* 0 while the gate is open */
    uint64_t *waiters;       /* fiber ids parked in gate_take, FIFO */
    size_t len, cap;
} gate;

int gate_take(gate *g);                  /* parks until the caller holds it */
int gate_give(gate *g);                  /* hands it to the next waiter, or opens it */
size_t gate_waiters(const gate *g);      /* how many fibers wait in gate_take */

static void gate_remove(gate *g, uint64_t id)
{
    for (size_t i = 0; i < g->len; i++)
        if (g->waiters[i] == id) {
            memmove(&g->waiters[i], &g->waiters[i + 1], (g->len - i - 1) * sizeof *g->waiters);
            g->len--;
            return;
        }
}

/* Runs when a scope interrupts a take: leave the queue, and if a give handed
** us the gate just before the interrupt, pass it on -- we will not use it. */
static void gate_dereg(void *ctx)
{
    gate *g = ctx;
    uint64_t me = px_self();
    gate_remove(g, me);
    if (g->owner == me)
        gate_give(g);
}

static size_t gate_holders(const void *object, uint64_t *out, size_t max)
{
    const gate *g = object;
    if (g->owner == 0 || max == 0)
        return 0;
    out[0] = g->owner;
    return 1;
}

/* 0 once the caller holds the gate; PX_ETIMEDOUT / PX_ECANCELED, PX_ENOFIBER,
** PX_ENOMEM. */
int gate_take(gate *g)
{
    uint64_t me = px_self();                       /* 1 */
    if (me == 0)
        return PX_ENOFIBER;
    if (g->owner == 0) {                           /* 2 */
        g->owner = me;
        return 0;
    }
    if (g->len == g->cap) {                        /* 3 */
        size_t cap = g->cap ? g->cap * 2 : 4;
        uint64_t *w = realloc(g->waiters, cap * sizeof *w);
        if (w == NULL)
            return PX_ENOMEM;
        g->waiters = w;
        g->cap = cap;
    }
    g->waiters[g->len++] = me;
    px_park_info pi = { .reason = "gate take", .dereg = gate_dereg, .ctx = g,
                        .object = g, .kind = "gate", .holders = gate_holders };
    int r;
    do   /* any code may px_wake any id: only a hand-over ends the wait */
        r = px_park_with(&pi);
    while (r == 0 && g->owner != me);
    return r;
}

/* Hands the gate to the next waiter (1) or opens it (0). */
int gate_give(gate *g)
{
    if (g->len == 0) {
        g->owner = 0;
        return 0;
    }
    uint64_t next = g->waiters[0];
    gate_remove(g, next);
    g->owner = next;                               /* 4: hand over ... */
    px_wake(next);                                 /* ... then wake */
    return 1;
}

size_t gate_waiters(const gate *g) { return g->len; }

#ifndef FIBERS_GATE_NO_MAIN
static gate the_gate;

static void *second(void *arg)
{
    (void)arg;
    gate_take(&the_gate);
    printf("the second fiber got it\n");
    gate_give(&the_gate);
    return NULL;
}

static void *first(void *arg)
{
    (void)arg;
    gate_take(&the_gate);
    px_fiber *f = px_spawn(second, NULL);
    px_sleep(PX_MSEC(1));
    printf("the gate is held, with %zu waiter(s) queued\n", gate_waiters(&the_gate));
    gate_give(&the_gate);
    px_sleep(PX_MSEC(1));
    printf("once handed over: %zu waiter(s) queued\n", gate_waiters(&the_gate));
    px_join(f, NULL);
    px_fiber_release(f);
    return NULL;
}

int main(void)
{
    int r = px_run(first, NULL, NULL);
    printf("off a fiber, take fails: %s\n", gate_take(&the_gate) == PX_ENOFIBER ? "yes" : "no");
    free(the_gate.waiters);
    return r == 0 ? 0 : 1;
}
#endif
