/*
** names.h -- the names of objects (px_object_set_name): a process-wide table
** from an object's address to a copy of its name, read by deadlock reports
** and dumps.  Empty in a program that names nothing, and then a free costs one
** relaxed load.
*/
#ifndef PX__BASE_NAMES_H
#define PX__BASE_NAMES_H

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "parataxis.h"

/* How much of `name` a copy keeps: its first PX_NAME_MAX - 1 bytes, for an
** object's name (names.c) as for a fiber's (fiber/extra.c). */
static inline size_t px__names_length(const char *name)
{
    return strnlen(name, PX_NAME_MAX - 1);
}

/* How many objects have a name (names.c); read unlocked. */
extern atomic_size_t px__names_count;

void px__names_forget_slow(const void *object);

/* An object is freed: its name, if any, goes with it. */
static inline void px__names_forget(const void *object)
{
    if (atomic_load_explicit(&px__names_count, memory_order_relaxed) != 0)
        px__names_forget_slow(object);
}

#endif /* PX__BASE_NAMES_H */
