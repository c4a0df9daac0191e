/*
** list.h -- the library's one list: intrusive, circular, doubly linked, around
** a sentinel node.
**
** A record that goes on a list embeds a px__list and is found again from it with
** PX__CONTAINER_OF.  The list owns no memory, so moving a record between lists
** never allocates, and unlinking is O(1) from the node alone.  A sentinel (the
** list's head) is a px__list of its own that belongs to no record; an empty list
** is a sentinel that points at itself.  An unlinked node points at itself too,
** so unlinking it a second time does nothing.
*/
#ifndef PX__BASE_LIST_H
#define PX__BASE_LIST_H

#include <stddef.h>

typedef struct px__list px__list;

struct px__list {
    px__list *next, *prev;
};

/* The record of type `type` whose member `member` is the node `ptr`. */
#define PX__CONTAINER_OF(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* Makes `l` an empty list (or a node that is on none). */
static inline void px__list_init(px__list *l)
{
    l->next = l->prev = l;
}

static inline int px__list_empty(const px__list *l)
{
    return l->next == l;
}

/* Appends `n` at the tail of the list `head`. */
static inline void px__list_push(px__list *head, px__list *n)
{
    n->prev = head->prev;
    n->next = head;
    head->prev->next = n;
    head->prev = n;
}

/* Takes `n` off its list; it is then on none. */
static inline void px__list_unlink(px__list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->next = n->prev = n;
}

/* Makes `to` the list of the nodes of `from`, in their order, and `from` an
** empty one.  What `to` held before is forgotten: it need not even be a list. */
static inline void px__list_move_all(px__list *to, px__list *from)
{
    px__list_init(to);
    if (!px__list_empty(from)) {
        to->next = from->next;
        to->prev = from->prev;
        to->next->prev = to;
        to->prev->next = to;
        px__list_init(from);
    }
}

#endif /* PX__BASE_LIST_H */
