/*
** fork.h -- noticing fork().  Only the forking thread survives in the child, and
** every lock another thread held stays locked, so objects that own threads or
** locks mark themselves unusable there: each remembers the generation it was
** made in, and the child's handler bumps the generation.
*/
#ifndef PX__BASE_FORK_H
#define PX__BASE_FORK_H

#include <stdatomic.h>

/* Installs the fork handler (once per process). */
void px__fork_watch(void);

/* How many forks this process descends through since it watched (fork.c). */
extern atomic_uint px__fork_gen;

/* Returns the generation: one relaxed load, inline for the add and post paths. */
static inline unsigned px__fork_generation(void)
{
    return atomic_load_explicit(&px__fork_gen, memory_order_relaxed);
}

#endif /* PX__BASE_FORK_H */
