/*
** queue.c -- px_queue: a thread-safe FIFO of handlers, drained by whoever owns it.
**
** The items sit in a ring buffer that grows by doubling, so a post allocates only
** when the queue is larger than it has ever been.  An eventfd is readable exactly
** while items wait: the post that finds the queue empty writes it, the drain that
** empties the queue reads it.  So a burst of posts costs one syscall, and a drain
** that stops at its budget leaves the descriptor readable for the next round.
**
** In the child of a fork, a queue made before it refuses every call with
** PX_EFORKED: its handlers are owed to the parent (which still runs them), its
** lock may be held by a thread the child lacks, and its eventfd is shared with
** the parent, whose readiness a read in the child would steal.
**
** px_queue_wait_intr polls a second descriptor beside the queue's: the waiting
** thread's own eventfd, in a record on the queue's list of waiters.
** px_queue_interrupt marks every record on the list and writes each one's
** descriptor, under the lock; a waiter reads its own descriptor back only when
** it finds its record marked, so no interrupt is lost to another waiter and
** none is left over for the thread's next wait.  The queue's eventfd is never
** read by a wait, so an interrupt cannot cost a post its readiness.
*/
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "parataxis.h"
#include "base/clock.h"
#include "base/deadline.h"
#include "base/fork.h"
#include "base/list.h"
#include "base/names.h"

typedef struct item {
    px_handler_fn fn;
    void *arg;
    int status;
} item;

struct px_queue {
    pthread_mutex_t lock;
    item *items;             /* ring buffer of cap slots, len of them used from head */
    size_t head, len, cap;
    int efd;
    unsigned fork_gen;
    px__list waiters;        /* the px_queue_wait_intr under way: waiter.link */
};

/* One px_queue_wait_intr under way, on its thread's stack. */
typedef struct waiter {
    px__list link;
    int fd;                  /* the thread's interrupt eventfd */
    int interrupted;         /* set, and fd written, by px_queue_interrupt */
} waiter;

static int forked(const px_queue *q)
{
    return q->fork_gen != px__fork_generation();
}

/* What a call on `q` answers before it starts: PX_EINVAL for NULL, PX_EFORKED
** for a queue of the parent of a fork, 0 to go on. */
static int refusal(const px_queue *q)
{
    if (q == NULL)
        return PX_EINVAL;
    return forked(q) ? PX_EFORKED : 0;
}

#define DRAIN_CHUNK 64       /* items taken per lock round while draining */

px_queue *px_queue_new(void)
{
    px_queue *q = calloc(1, sizeof *q);
    if (q == NULL)
        return NULL;
    q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->efd < 0) {
        free(q);
        return NULL;
    }
    pthread_mutex_init(&q->lock, NULL);
    px__list_init(&q->waiters);
    px__fork_watch();
    q->fork_gen = px__fork_generation();
    return q;
}

static int grow(px_queue *q)
{
    size_t cap = q->cap ? 2 * q->cap : 64;
    item *items = malloc(cap * sizeof *items);
    if (items == NULL)
        return PX_ENOMEM;
    for (size_t i = 0; i < q->len; i++)
        items[i] = q->items[(q->head + i) % q->cap];
    free(q->items);
    q->items = items;
    q->head = 0;
    q->cap = cap;
    return 0;
}

static void signal_ready_fd(int fd)
{
    uint64_t one = 1;
    ssize_t r;
    do
        r = write(fd, &one, sizeof one);
    while (r < 0 && errno == EINTR);
}

static void clear_ready_fd(int fd)
{
    uint64_t count;
    ssize_t r;
    do
        r = read(fd, &count, sizeof count);
    while (r < 0 && errno == EINTR);
}

static void signal_ready(px_queue *q)
{
    signal_ready_fd(q->efd);
}

static void clear_ready(px_queue *q)
{
    clear_ready_fd(q->efd);
}

int px_queue_post(px_queue *q, px_handler_fn fn, void *arg, int status)
{
    int rc = fn == NULL ? PX_EINVAL : refusal(q);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&q->lock);
    rc = q->len == q->cap ? grow(q) : 0;
    if (rc == 0) {
        q->items[(q->head + q->len++) % q->cap] = (item){ fn, arg, status };
        if (q->len == 1)
            signal_ready(q);
    }
    pthread_mutex_unlock(&q->lock);
    return rc;
}

static int post_to_queue(void *ctx, px_handler_fn fn, void *arg, int status)
{
    return px_queue_post(ctx, fn, arg, status);
}

px_executor px_queue_executor(px_queue *q)
{
    return (px_executor){ post_to_queue, q, NULL };
}

/* Pops up to `max` items into `out`, clearing readiness if the queue empties. */
static size_t pop(px_queue *q, item *out, size_t max)
{
    pthread_mutex_lock(&q->lock);
    size_t n = q->len < max ? q->len : max;
    for (size_t i = 0; i < n; i++)
        out[i] = q->items[(q->head + i) % q->cap];
    if (n) {
        q->head = (q->head + n) % q->cap;
        q->len -= n;
        if (q->len == 0)
            clear_ready(q);
    }
    pthread_mutex_unlock(&q->lock);
    return n;
}

int px_queue_drain(px_queue *q, size_t max)
{
    int rc = refusal(q);
    if (rc != 0)
        return rc;
    size_t budget = max ? max : px_queue_size(q);
    size_t done = 0;
    while (done < budget) {
        item chunk[DRAIN_CHUNK];
        size_t want = budget - done < DRAIN_CHUNK ? budget - done : DRAIN_CHUNK;
        size_t n = pop(q, chunk, want);
        for (size_t i = 0; i < n; i++)
            chunk[i].fn(chunk[i].arg, chunk[i].status);
        done += n;
        if (n < want)
            break;
    }
    return done > (size_t)INT32_MAX ? INT32_MAX : (int)done;
}

int px_queue_fd(px_queue *q)
{
    int rc = refusal(q);
    return rc != 0 ? rc : q->efd;
}

int px_queue_wait(px_queue *q, int64_t timeout_ns)
{
    int rc = refusal(q);
    if (rc != 0)
        return rc;
    struct pollfd pfd = { .fd = q->efd, .events = POLLIN };
    int64_t deadline =
        timeout_ns < 0 ? INT64_MAX : px__deadline_after(px__clock_real(), timeout_ns);
    for (;;) {
        struct timespec ts, *tsp = NULL;
        if (deadline != INT64_MAX) {
            ts = px__deadline_timespec(deadline, px__clock_real());
            tsp = &ts;
        }
        int r = ppoll(&pfd, 1, tsp, NULL);
        if (r > 0)
            return 1;
        if (r == 0 || errno != EINTR)
            return 0;
    }
}

/*
** The calling thread's interrupt descriptor: an eventfd made at its first
** interruptible wait, closed by the key's destructor when the thread exits
** (while the library is loaded: forget_intr_key).
** The child of a fork makes its own: the one it inherited is shared with the
** parent's thread, whose interrupts it would otherwise see and steal.
*/
static pthread_key_t intr_key;
static pthread_once_t intr_once = PTHREAD_ONCE_INIT;
static int intr_key_ok;
static _Thread_local int intr_fd = -1;
static _Thread_local unsigned intr_gen;

/* On the exiting thread: its descriptor is forgotten as it is closed, so that
** a wait from a destructor that runs after this one makes a new one (which a
** further round of destructors closes) instead of polling a closed number. */
static void close_intr(void *p)
{
    close((int)(intptr_t)p - 1);
    intr_fd = -1;
}

static void make_intr_key(void)
{
    intr_key_ok = pthread_key_create(&intr_key, close_intr) == 0;
}

/* When the library is unloaded (dlclose: a Lua module goes with its state),
** the key goes first: a thread that outlives the library must not run
** close_intr, which is no longer mapped, as it exits.  Its descriptor stays
** open then -- one per such thread, never a crash. */
__attribute__((destructor)) static void forget_intr_key(void)
{
    if (intr_key_ok)
        (void)pthread_key_delete(intr_key);
}

static int thread_intr_fd(void)
{
    unsigned gen = px__fork_generation();
    if (intr_fd >= 0 && intr_gen == gen)
        return intr_fd;
    (void)pthread_once(&intr_once, make_intr_key);
    if (!intr_key_ok)
        return PX_ENOMEM;
    if (intr_fd >= 0)
        close(intr_fd);
    intr_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    intr_gen = gen;
    void *v = (void *)(intptr_t)(intr_fd + 1);
    if (intr_fd < 0 || pthread_setspecific(intr_key, v) != 0) {
        if (intr_fd >= 0)
            close(intr_fd);
        intr_fd = -1;
        (void)pthread_setspecific(intr_key, NULL);
        return PX_ENOMEM;
    }
    return intr_fd;
}

/* ppoll on the queue and the interrupt descriptor until one is readable, a
** signal, or the deadline: 1, PX_EINTR (either cause), 0. */
static int poll_both(int efd, int ifd, int64_t deadline)
{
    struct pollfd pfd[2] = { { .fd = efd, .events = POLLIN }, { .fd = ifd, .events = POLLIN } };
    for (;;) {
        struct timespec ts, *tsp = NULL;
        if (deadline != INT64_MAX) {
            ts = px__deadline_timespec(deadline, px__clock_real());
            tsp = &ts;
        }
        int r = ppoll(pfd, 2, tsp, NULL);
        if (r > 0)
            return pfd[1].revents != 0 ? PX_EINTR : 1;
        if (r < 0)   /* besides EINTR, ppoll fails only for want of kernel memory */
            return errno == EINTR ? PX_EINTR : PX_ENOMEM;
        if (px__clock_real() >= deadline)
            return 0;
        /* woken before the deadline (the clocks' rounding): never early */
    }
}

int px_queue_wait_intr(px_queue *q, int64_t timeout_ns)
{
    int rc = refusal(q);
    if (rc != 0)
        return rc;
    int fd = thread_intr_fd();
    if (fd < 0)
        return fd;
    int64_t deadline =
        timeout_ns < 0 ? INT64_MAX : px__deadline_after(px__clock_real(), timeout_ns);
    waiter w = { .fd = fd };
    pthread_mutex_lock(&q->lock);
    px__list_push(&q->waiters, &w.link);
    pthread_mutex_unlock(&q->lock);
    rc = poll_both(q->efd, fd, deadline);
    pthread_mutex_lock(&q->lock);
    px__list_unlink(&w.link);
    pthread_mutex_unlock(&q->lock);
    if (w.interrupted) {
        clear_ready_fd(fd);    /* written under the lock, before the unlink */
        rc = PX_EINTR;
    }
    return rc;
}

int px_queue_interrupt(px_queue *q)
{
    int rc = refusal(q);
    if (rc != 0)
        return rc;
    int n = 0;
    pthread_mutex_lock(&q->lock);
    for (px__list *l = q->waiters.next; l != &q->waiters; l = l->next) {
        waiter *w = PX__CONTAINER_OF(l, waiter, link);
        if (!w->interrupted) {
            w->interrupted = 1;
            signal_ready_fd(w->fd);
            n++;
        }
    }
    pthread_mutex_unlock(&q->lock);
    return n;
}

size_t px_queue_size(px_queue *q)
{
    if (q == NULL || forked(q))
        return 0;
    pthread_mutex_lock(&q->lock);
    size_t n = q->len;
    pthread_mutex_unlock(&q->lock);
    return n;
}

void px_queue_free(px_queue *q)
{
    if (q == NULL)
        return;
    px__names_forget(q);   /* given up: its name goes with it */
    if (forked(q)) {
        /* The child's copy of the descriptor is ours; the memory only when no
        ** thread of the parent was using the queue at the fork. */
        close(q->efd);
        if (pthread_mutex_trylock(&q->lock) == 0) {
            pthread_mutex_unlock(&q->lock);
            pthread_mutex_destroy(&q->lock);
            free(q->items);
            free(q);
        }
        return;
    }
    while (px_queue_drain(q, 0) > 0)
        ;
    close(q->efd);
    pthread_mutex_destroy(&q->lock);
    free(q->items);
    free(q);
}
