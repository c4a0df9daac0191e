/*
** map.c -- px_map: a function over an array, several calls at once, in a
** group (see parataxis.h).
**
** `concurrency` workers, members of one group, take the next index in turn
** until none is left: a scheduler runs one fiber at a time, so a counter is
** all the hand-out needs.  A worker stops at the first failure (its own: the
** group's cancel ends every other call's waits, and no worker starts another
** call once the group is cancelled), and results[i] is written only by a
** call that returned 0, so the input order holds whatever order calls end in.
**
** The run is a hold of the caller's fiber: discarded with its scheduler in
** the middle of the map, it lets go of the run and the group, which its
** members, discarded too, may still be in.
*/
#include <stdlib.h>

#include "fiber/fiber.h"
#include "fiber/waitq.h"

typedef struct map_run {
    px__hold hold;            /* on the caller while it maps */
    px_map_fn fn;
    void *const *items;
    void **results;
    size_t n, next;
    px_group *g;
} map_run;

static int worker(void *arg)
{
    map_run *run = arg;
    while (run->next < run->n && !px__group_cancelled(run->g)) {
        size_t i = run->next++;
        void *result = NULL;
        int status = run->fn(run->items[i], &result);
        if (status != 0)
            return status;
        run->results[i] = result;
    }
    return 0;
}

/* The caller was discarded mid-map (its scheduler freed): no worker runs
** again. */
static void caller_ended(px__hold *h, uint64_t id, int discarding)
{
    (void)id;
    (void)discarding;
    map_run *run = PX__CONTAINER_OF(h, map_run, hold);
    px__group_abandon(run->g);
    free(run);
}

int px_map(px_map_fn fn, void *const *items, void **results, size_t n, size_t concurrency)
{
    if (fn == NULL || (n > 0 && (items == NULL || results == NULL)))
        return PX_EINVAL;
    if (n == 0)
        return 0;
    px_fiber *me = px__fiber_here();
    if (me == NULL)
        return PX_ENOFIBER;
    if (me->hosted && me->ops.suspend == NULL)
        return PX_ENOTSUP;   /* its C frame cannot wait: a binding maps on a group */
    /* On the heap: the workers read it while the caller's stack may be
    ** another fiber's (a shared stack). */
    map_run *run = malloc(sizeof *run);
    if (run == NULL)
        return PX_ENOMEM;
    *run = (map_run){ .fn = fn, .items = items, .results = results, .n = n };
    if ((run->g = px_group_new()) == NULL) {
        free(run);
        return PX_ENOMEM;
    }
    px__waitq_hold_take(&run->hold, me, caller_ended);
    size_t workers = concurrency == 0 || concurrency > n ? n : concurrency;
    int spawned = 0;
    for (size_t i = 0; i < workers; i++) {
        if ((spawned = px_group_spawn(run->g, worker, run)) != 0) {
            px_group_cancel(run->g);   /* what runs stops; the wait still joins it */
            break;
        }
    }
    int r = px_group_wait(run->g);
    px__waitq_hold_drop(&run->hold);
    px_group_free(run->g);
    free(run);
    return r != 0 ? r : spawned;
}
