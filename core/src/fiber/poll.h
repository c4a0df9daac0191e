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

/* The waits on one fd: at most one reader and one writer. */
typedef struct px__pollfd {
    px_fiber *rd, *wr;
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

void px__poll_init(px__poll *p);
/* Closes the epoll set and frees the table (the fibers are gone already). */
void px__poll_destroy(px__poll *p);
/* Takes in the events that are ready now, without waiting: the loop's look
** between two batches while fibers wait on fds. */
void px__poll_now(px_sched *s);
/*
** Waits in the kernel for an fd event, a post (the scheduler's eventfd) or
** until `ts` (NULL: no deadline), then takes in what came.  Only once the
** scheduler has its epoll set (p->epfd >= 0).  Returns -1 with errno when
** the wait failed (EINTR), else 0.
*/
int px__poll_wait(px_sched *s, const struct timespec *ts);
/* Fiber f ends with an fd wait recorded (woken, but it never came back for
** the outcome): drops it. */
void px__poll_fiber_ended(px_fiber *f);

#endif /* PX__FIBER_POLL_H */
