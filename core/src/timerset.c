/*
** timerset.c -- the ordered set of deadlines: a timing wheel over a near heap.
**
** Invariant.  `cursor` is the last tick whose level-0 slot has been emptied.  A
** node due in a tick <= cursor is in the heap.  Any other node sits in the wheel
** at the level of the highest 6-bit digit in which its tick differs from the
** cursor, in the slot named by that digit of its tick; that digit is then larger
** than the cursor's, so the cursor's own slots are always empty and a slot is
** reached (and emptied) exactly when the cursor enters its range.
*/
#include <stdlib.h>

#include "base/bits.h"
#include "base/list.h"
#include "timerset.h"

#define TICK(t)        ((t) >> PX__TSET_TICK_SHIFT)
#define DIGIT(tick, l) ((unsigned)((tick) >> ((l) * PX__TSET_SLOT_BITS)) & (PX__TSET_SLOTS - 1))
#define PULL_MAX       8   /* a slot this small may enter the heap early */

/* -- lists ---------------------------------------------------------------- */

/* Appends `n` to the NULL-terminated list ending at *tail. */
static void out_append(px__list ***tail, px__tnode *n)
{
    n->where = PX__TSET_OUT;
    n->link.next = NULL;
    **tail = &n->link;
    *tail = &n->link.next;
}

/* -- the heap ------------------------------------------------------------- */

static void heap_place(px__tset *s, size_t i, px__tnode *n)
{
    s->heap[i] = n;
    n->where = PX__TSET_IN_HEAP | (uint32_t)i;
}

static void heap_sift_up(px__tset *s, size_t i, px__tnode *n)
{
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (s->heap[parent]->deadline <= n->deadline)
            break;
        heap_place(s, i, s->heap[parent]);
        i = parent;
    }
    heap_place(s, i, n);
}

static void heap_sift_down(px__tset *s, size_t i, px__tnode *n)
{
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= s->heap_len)
            break;
        if (child + 1 < s->heap_len && s->heap[child + 1]->deadline < s->heap[child]->deadline)
            child++;
        if (n->deadline <= s->heap[child]->deadline)
            break;
        heap_place(s, i, s->heap[child]);
        i = child;
    }
    heap_place(s, i, n);
}

/* Returns 0, or -1 when the heap array cannot grow. */
static int heap_push(px__tset *s, px__tnode *n)
{
    if (s->heap_len == s->heap_cap) {
        size_t cap = s->heap_cap ? 2 * s->heap_cap : 64;
        px__tnode **heap = cap < PX__TSET_IN_HEAP ? realloc(s->heap, cap * sizeof *heap) : NULL;
        if (heap == NULL)
            return -1;
        s->heap = heap;
        s->heap_cap = cap;
    }
    heap_sift_up(s, s->heap_len++, n);
    return 0;
}

static void heap_delete(px__tset *s, size_t i)
{
    px__tnode *last = s->heap[--s->heap_len];
    if (i == s->heap_len)
        return;
    if (i > 0 && last->deadline < s->heap[(i - 1) / 2]->deadline)
        heap_sift_up(s, i, last);
    else
        heap_sift_down(s, i, last);
}

/* -- the wheel ------------------------------------------------------------ */

static int level_of(int64_t tick, int64_t cursor)
{
    return px__bits_high((uint64_t)(tick ^ cursor)) / PX__TSET_SLOT_BITS;
}

/* Links `n` into the wheel as if it were due in `tick`, which is > cursor. */
static void wheel_link(px__tset *s, px__tnode *n, int64_t tick)
{
    int level = level_of(tick, s->cursor);
    unsigned slot = DIGIT(tick, level);
    px__list_push(&s->slot[level][slot], &n->link);
    n->where = (uint32_t)(level * PX__TSET_SLOTS + slot);
    s->occupied[level] |= UINT64_C(1) << slot;
}

/* Places a node whose tick has been reached: in the heap, or failing that (no
** memory) in the next tick's slot, to be looked at again then. */
static void place_near(px__tset *s, px__tnode *n)
{
    if (heap_push(s, n) != 0)
        wheel_link(s, n, s->cursor + 1);
}

/*
** Finds the first tick after the cursor at which a slot is reached.  Returns 0
** when the wheel is empty; else sets *tick, *level and *slot.  The lowest level
** holding a slot beyond the cursor's digit holds the earliest one.
*/
static int next_event(const px__tset *s, int64_t *tick, int *level, unsigned *slot)
{
    for (int l = 0; l < PX__TSET_LEVELS; l++) {
        unsigned digit = DIGIT(s->cursor, l);
        uint64_t later =
            digit == PX__TSET_SLOTS - 1 ? 0 : s->occupied[l] & (~UINT64_C(0) << (digit + 1));
        if (later) {
            int shift = (l + 1) * PX__TSET_SLOT_BITS;
            unsigned j = (unsigned)px__bits_low(later);
            *tick = (s->cursor >> shift << shift) | ((int64_t)j << (l * PX__TSET_SLOT_BITS));
            *level = l;
            *slot = j;
            return 1;
        }
    }
    return 0;
}

/* Moves the nodes of slot (level, slot) onto the list `ring` and returns the
** first of them (`ring` itself when the slot was empty). */
static px__list *slot_detach(px__tset *s, int level, unsigned slot, px__list *ring)
{
    s->occupied[level] &= ~(UINT64_C(1) << slot);
    px__list_move_all(ring, &s->slot[level][slot]);
    return ring->next;
}

/* -- the set -------------------------------------------------------------- */

void px__tset_init(px__tset *s, int64_t now)
{
    for (int l = 0; l < PX__TSET_LEVELS; l++) {
        for (int j = 0; j < PX__TSET_SLOTS; j++)
            px__list_init(&s->slot[l][j]);
        s->occupied[l] = 0;
    }
    s->cursor = TICK(now > 0 ? now : 0);
    px__list_init(&s->rest);
    s->heap = NULL;
    s->heap_len = s->heap_cap = 0;
    s->count = 0;
}

void px__tset_destroy(px__tset *s)
{
    free(s->heap);
    s->heap = NULL;
    s->heap_len = s->heap_cap = 0;
}

void px__tset_insert(px__tset *s, px__tnode *n)
{
    int64_t tick = TICK(n->deadline > 0 ? n->deadline : 0);
    s->count++;
    if (tick <= s->cursor)
        place_near(s, n);
    else
        wheel_link(s, n, tick);
}

void px__tset_remove(px__tset *s, px__tnode *n)
{
    s->count--;
    if (n->where & PX__TSET_IN_HEAP) {
        heap_delete(s, n->where & ~PX__TSET_IN_HEAP);
    } else {
        unsigned level = n->where / PX__TSET_SLOTS, slot = n->where % PX__TSET_SLOTS;
        px__list *head = &s->slot[level][slot];
        px__list_unlink(&n->link);
        if (px__list_empty(head))
            s->occupied[level] &= ~(UINT64_C(1) << slot);
    }
    n->where = PX__TSET_OUT;
}

/* When the heap is empty and the next slot holds only a few nodes, moving them
** into the heap now lets the owner sleep until the exact deadline instead of
** waking at the slot's start to look. */
static void pull_small_slot(px__tset *s)
{
    int64_t tick;
    int level;
    unsigned slot;
    if (!next_event(s, &tick, &level, &slot))
        return;
    px__list *head = &s->slot[level][slot], *l = head->next;
    for (int seen = 0; l != head; l = l->next)
        if (++seen > PULL_MAX)
            return;
    px__list ring, *next;
    for (l = slot_detach(s, level, slot, &ring); l != &ring; l = next) {
        next = l->next;
        if (heap_push(s, px__tset_node(l)) != 0) {
            /* No memory: put the rest back where they were; nothing is lost. */
            for (; l != &ring; l = next) {
                next = l->next;
                wheel_link(s, px__tset_node(l), tick);
            }
            return;
        }
    }
}

int64_t px__tset_next(px__tset *s)
{
    if (s->count == 0)
        return INT64_MAX;
    if (s->heap_len == 0 && px__list_empty(&s->rest))
        pull_small_slot(s);
    int64_t best = s->heap_len ? s->heap[0]->deadline : INT64_MAX;
    int64_t reached = s->cursor << PX__TSET_TICK_SHIFT;
    if (!px__list_empty(&s->rest))        /* a capped expire stopped in a slot */
        return reached < best ? reached : best;
    int64_t tick;
    int level;
    unsigned slot;
    if (next_event(s, &tick, &level, &slot) && (tick << PX__TSET_TICK_SHIFT) < best)
        best = tick << PX__TSET_TICK_SHIFT;
    return best;
}

/* Takes one node out of the set and onto the result list. */
static void take(px__tset *s, px__tnode *n, px__list ***tail, size_t *room)
{
    px__list_unlink(&n->link);
    s->count--;
    (*room)--;
    out_append(tail, n);
}

/*
** Goes on through `rest`, the nodes of the slot whose range the cursor entered:
** a due node goes out, the others move down the wheel or into the heap.  Stops
** when the result is full (*room) or the call has looked at enough (*look), and
** returns 1 once `rest` is empty.  The nodes left in `rest` keep `where` of their
** old slot: px__tset_remove unlinks them from `rest` just as well, and the slot's
** occupied bit, which it then tests, is already clear or true of the slot's new
** nodes.  Due nodes go out as they come, not through the heap: a slot may hold
** tens of thousands, and a list gives each back in O(1) where a large heap would
** pay an O(log n) delete.
*/
static int reach_rest(px__tset *s, int64_t now, px__list ***tail, size_t *room, size_t *look)
{
    while (!px__list_empty(&s->rest)) {
        px__tnode *n = px__tset_node(s->rest.next);
        if (*look == 0 || (n->deadline <= now && *room == 0))
            return 0;
        (*look)--;
        if (n->deadline <= now) {
            take(s, n, tail, room);
            continue;
        }
        px__list_unlink(&n->link);
        if (TICK(n->deadline) <= s->cursor)
            place_near(s, n);
        else
            wheel_link(s, n, TICK(n->deadline));
    }
    return 1;
}

px__tnode *px__tset_expire(px__tset *s, int64_t now, size_t max)
{
    px__list *out = NULL, **tail = &out;
    size_t room = max ? max : SIZE_MAX;
    size_t look =
        max && max < SIZE_MAX / PX__TSET_LOOK_PER_NODE ? max * PX__TSET_LOOK_PER_NODE : SIZE_MAX;
    int64_t target = TICK(now > 0 ? now : 0);

    while (reach_rest(s, now, &tail, &room, &look)) {
        while (s->heap_len && s->heap[0]->deadline <= now && room > 0) {
            px__tnode *n = s->heap[0];
            heap_delete(s, 0);
            s->count--;
            room--;
            out_append(&tail, n);
        }
        if (room == 0 || s->cursor >= target)
            break;
        int64_t tick;
        int level;
        unsigned slot;
        if (!next_event(s, &tick, &level, &slot) || tick > target) {
            s->cursor = target;
            break;
        }
        s->cursor = tick;
        slot_detach(s, level, slot, &s->rest);
    }
    return px__tset_node(out);
}

px__tnode *px__tset_take_all(px__tset *s)
{
    px__list *out = NULL, **tail = &out;
    while (!px__list_empty(&s->rest)) {
        px__tnode *n = px__tset_node(s->rest.next);
        px__list_unlink(&n->link);
        out_append(&tail, n);
    }
    for (size_t i = 0; i < s->heap_len; i++)
        out_append(&tail, s->heap[i]);
    s->heap_len = 0;
    for (int l = 0; l < PX__TSET_LEVELS; l++) {
        while (s->occupied[l]) {
            unsigned slot = (unsigned)px__bits_low(s->occupied[l]);
            px__list ring, *n, *next;
            for (n = slot_detach(s, l, slot, &ring); n != &ring; n = next) {
                next = n->next;
                out_append(&tail, px__tset_node(n));
            }
        }
    }
    s->count = 0;
    return px__tset_node(out);
}
