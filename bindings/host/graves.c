/*
** graves.c -- busy objects the collector reached, kept per thread until a
** run of that thread ends (the policy is in pxhost.h).
**
** Per thread, because a sync object is used by one scheduler at a time and
** the collecting thread's run is the one whose fibers most likely hold it;
** its free is only ever retried on the thread that collected it.
*/
#include <stdlib.h>

#include "pxhost.h"

typedef struct grave {
    pxhost_free_fn free;
    void *p;
} grave;

static _Thread_local grave *graves;
static _Thread_local size_t ngraves, capgraves;

/* Keeps p; when no memory is left to keep it, it stays allocated. */
static void bury(pxhost_free_fn free_fn, void *p)
{
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
