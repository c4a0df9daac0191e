/*
** graves.c -- busy objects the collector reached, kept per thread until a
** run of that thread ends (the policy is in pxhost.h).
**
** Per thread, because a sync object is used by one scheduler at a time and
** the collecting thread's run is the one whose fibers most likely hold it;
** its free is only ever retried on the thread that collected it.  A thread
** that ends keeping some tries them once more as it exits (a thread-specific
** destructor): the ones still busy then stay allocated, the list does not.
*/
#include <pthread.h>
#include <stdlib.h>

#include "pxhost.h"

typedef struct grave {
    pxhost_free_fn free;
    void *p;
} grave;

static _Thread_local grave *graves;
static _Thread_local size_t ngraves, capgraves;

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int exit_key_ok;

/* As the thread exits with objects kept: the last try, and the list goes. */
static void last_sweep(void *unused)
{
    (void)unused;
    (void)pxhost_sweep();
    free(graves);
    graves = NULL;
    ngraves = capgraves = 0;
}

static void make_exit_key(void)
{
    exit_key_ok = pthread_key_create(&exit_key, last_sweep) == 0;
}

/* Unloaded with its module (dlclose): a thread that outlives the code must
** not run last_sweep as it exits; what it keeps stays allocated then. */
__attribute__((destructor)) static void forget_exit_key(void)
{
    if (exit_key_ok)
        (void)pthread_key_delete(exit_key);
}

/* Keeps p; when no memory is left to keep it, it stays allocated. */
static void bury(pxhost_free_fn free_fn, void *p)
{
    if (ngraves == 0) {                /* the thread's exit must see the list */
        (void)pthread_once(&exit_once, make_exit_key);
        if (exit_key_ok)
            (void)pthread_setspecific(exit_key, &exit_key);   /* any non-NULL */
    }
    if (ngraves == capgraves) {
        size_t cap = capgraves ? 2 * capgraves : 16;
        grave *g = realloc(graves, cap * sizeof *g);
        if (g == NULL)
            return;
        graves = g;
        capgraves = cap;
    }
    graves[ngraves++] = (grave){ free_fn, p };
}

void pxhost_collect(pxhost_free_fn free_fn, void *p, int later)
{
    if (p == NULL)
        return;
    if (later || free_fn(p) == PX_EBUSY)
        bury(free_fn, p);
}

size_t pxhost_sweep(void)
{
    size_t kept = 0;
    for (size_t i = 0; i < ngraves; i++)
        if (graves[i].free(graves[i].p) == PX_EBUSY)
            graves[kept++] = graves[i];
    ngraves = kept;
    if (kept == 0) {
        free(graves);
        graves = NULL;
        capgraves = 0;
    }
    return kept;
}
