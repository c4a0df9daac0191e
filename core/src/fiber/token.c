/*
** token.c -- cancellation tokens.  A token is a flag plus the list of scopes
** that use it.  Cancelling sets the flag (which every later park reads) and
** interrupts the fibers parked in those scopes: directly when they belong to
** the calling thread's scheduler, through their scheduler's inbox otherwise.
** The lock guards only the list; the flag is read without it.
**
** In the child of a fork a token made before it may be held locked by a thread
** the child lacks, and its scopes belong to the parent's fibers: the child may
** read the flag, and nothing else touches the token there.
*/
#include <stdlib.h>

#include "fiber/fiber.h"
#include "base/fork.h"
#include "base/names.h"

struct px_token {
    atomic_int cancelled;
    pthread_mutex_t lock;
    px__list watchers;       /* the open scopes that use it, by their `watch` */
    unsigned fork_gen;
};

int px__token_forked(const px_token *t)
{
    return t->fork_gen != px__fork_generation();
}

px_token *px_token_new(void)
{
    px_token *t = malloc(sizeof *t);
    if (t == NULL)
        return NULL;
    atomic_init(&t->cancelled, 0);
    pthread_mutex_init(&t->lock, NULL);
    px__list_init(&t->watchers);
    px__fork_watch();
    t->fork_gen = px__fork_generation();
    return t;
}

int px_token_cancel(px_token *t)
{
    if (t == NULL)
        return PX_EINVAL;
    if (px__token_forked(t))
        return PX_EFORKED;
    if (atomic_exchange(&t->cancelled, 1))
        return 0;
    px_sched *here = px__sched_here();
    pthread_mutex_lock(&t->lock);
    /* Newest scope first (watch appends): the interrupted fibers queue in that order. */
    for (px__list *l = t->watchers.prev; l != &t->watchers; l = l->prev) {
        px__scope *sc = PX__CONTAINER_OF(l, px__scope, watch);
        if (sc->group) {
            px__group_token_cancelled(sc, here);
        } else if (sc->sched == here) {
            px__scope_cancel_parked(here, sc->fiber_id);
        } else {
            px__item it = { .kind = PX__FIBER_ITEM_CANCEL, .id = sc->fiber_id };
            /* No memory: its next park still sees the flag. */
            px__sched_inbox_post(sc->sched, &it);
        }
    }
    pthread_mutex_unlock(&t->lock);
    return 1;
}

int px_token_cancelled(const px_token *t)
{
    return t ? atomic_load(&((px_token *)t)->cancelled) : 0;
}

void px_token_free(px_token *t)
{
    if (t == NULL)
        return;
    if (!px__token_forked(t))
        pthread_mutex_destroy(&t->lock);   /* in a fork's child it may be held */
    px__names_forget(t);
    free(t);
}

void px__token_watch(px_token *t, px__scope *sc)
{
    pthread_mutex_lock(&t->lock);
    px__list_push(&t->watchers, &sc->watch);
    pthread_mutex_unlock(&t->lock);
}

void px__token_unwatch(px_token *t, px__scope *sc)
{
    if (px__token_forked(t))
        return;   /* a scope of the forking fiber closing in the child */
    pthread_mutex_lock(&t->lock);
    px__list_unlink(&sc->watch);
    pthread_mutex_unlock(&t->lock);
}
