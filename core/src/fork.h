/*
** fork.h -- noticing fork().  Only the forking thread survives in the child, and
** every lock another thread held stays locked, so objects that own threads mark
** themselves unusable there: each remembers the generation it was made in, and
** the child's handler bumps the generation.
*/
#ifndef PX_FORK_H
#define PX_FORK_H

/* Installs the fork handler (once per process). */
void px_fork_watch(void);

/* Returns how many forks this process descends through since it watched. */
unsigned px_fork_generation(void);

#endif /* PX_FORK_H */
