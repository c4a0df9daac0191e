/*
** pool.h -- what the other files of io/ need of the blocking pool (pool.c)
** beyond px_run_blocking: finding the job a hosted fiber recorded, so that a
** call built on the pool (px_getaddrinfo) can collect its outcome when the
** fiber calls again after PX_EYIELD, and the idle time of its threads (a test
** shortens it).
*/
#ifndef PX__IO_POOL_H
#define PX__IO_POOL_H

#include <stddef.h>
#include <stdint.h>

/* The `arg` of the job with function `fn` that the calling fiber recorded (a
** hosted fiber that got PX_EYIELD from px_run_blocking), or NULL: none, or
** off-fiber.  Thread: scheduler. */
void *px__pool_recorded(void *(*fn)(void *arg));

/* How long a pool thread waits idle for a job before it exits, in ns (5 s).
** Read by each thread as it goes idle. */
extern int64_t px__pool_idle_ns;

/* The pool's threads now (started and not exited), for tests. */
size_t px__pool_threads(void);

#endif /* PX__IO_POOL_H */
