/*
** poll.h -- a scheduler's waits on file descriptors (poll.c): its epoll set and
** the table of the fibers that wait on each fd.  sched.c owns a px__poll in
** every scheduler and calls these from its loop; nothing else needs them.
*/
#ifndef PX__FIBER_POLL_H
#define PX__FIBER_POLL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef struct px_sched px_sched;
typedef struct px_fiber px_fiber;
typedef struct px__waiter px__waiter;

/* The waits on one fd: at most one reader and one writer, each a fiber's own
** waiter or a case of its select (waitq.h: choices). */
typedef struct px__pollfd {
    px__waiter *rd, *wr;
    uint32_t tag;            /* of its latest arming; an event with another is stale */
} px__pollfd;

typedef struct px__poll {
    int epfd;                /* -1 until the scheduler's first fd wait */
    atomic_size_t waiting;   /* fibers with an fd wait recorded: the loop reads
                             ** it unlocked, notify_closing lowers it anywhere */
    uint32_t next_tag;
    /* The table, and the fd waits of its fibers (their wait.granted and
    ** wait.result), are read by px_fd_notify_closing from any thread: under
    ** `lock`, which only those calls and this scheduler's thread take. */
    pthread_mutex_t lock;
    px__pollfd *fds;
    size_t cap;
} px__poll;

/* A fiber's waiter op while it waits on an fd (fiber.c's join is -1; the
** primitives' ops are never negative). */
#define PX__POLL_OP (-2)
/* An fd wait's waiter keeps its key in n: the events over the fd. */
#define PX__POLL_KEY(fd, events) ((uint64_t)(events) << 32 | (uint32_t)(fd))

void px__poll_init(px__poll *p);
/* Closes the epoll set and frees the table (the fibers are gone already). */
void px__poll_destroy(px__poll *p);
/* Takes in the events that are ready now, without waiting: the loop's look
** between two batches while fibers wait on fds.  It leaves the eventfd
** readable: a px_sched_wake is owed to the next kernel wait. */
void px__poll_now(px_sched *s);
/*
** Waits in the kernel for an fd event, a post (the scheduler's eventfd) or
** until `ts` (NULL: no deadline), then takes in what came.  Only once the
** scheduler has its epoll set (p->epfd >= 0).  Returns -1 with errno when
** the wait failed (EINTR), else 0.
*/
int px__poll_wait(px_sched *s, const struct timespec *ts);
/* Fiber f ends, or a hosted f begins another wait (a primitive's, a join),
** with an fd wait recorded that it never came back for: drops it, so that the
** table keeps no fiber that no longer waits there. */
void px__poll_fiber_ended(px_fiber *f);

/* A select's fd case (waitq.c): arms fd for `events` with case waiter w of
** fiber f (the caller), without parking: 0, or the code px_wait_fd would
** return for it (PX_EBUSY, PX_EINVAL, PX_ENOTSUP, PX_ENOMEM).  An event or
** px_fd_notify_closing grants w (w->granted, w->result) and wakes f. */
int px__poll_case_arm(px_fiber *f, px__waiter *w, int fd, unsigned events);
/* 1 when case w was granted (its outcome in w->result), read under the lock. */
int px__poll_case_granted(px_fiber *f, px__waiter *w);
/* Case w is over: out of the table and disarmed unless it was granted. */
void px__poll_case_end(px_fiber *f, px__waiter *w);

#endif /* PX__FIBER_POLL_H */
