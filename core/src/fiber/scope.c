/*
** scope.c -- timeout and cancellation scopes.  A fiber's open scopes form a
** chain from the innermost outwards; each caches the nearest deadline of itself
** and every outer scope, so a park learns its bound from one field.  A scope
** fires when a park notices its deadline passed or its token cancelled, and
** stays fired until it closes: every later park inside it ends at once.
**
** The scheduler counts its open scopes that watch a token.  In px_run, which
** gives the user no scheduler to hold for a thread that will cancel, a fiber
** parked in one is no deadlock: any thread may cancel a token at any time.
** A group's scopes are not counted -- its members' (which watch nothing:
** the group watches for them) and the one px_group_scope_push opens: fibers
** of a group that wait for each other are a deadlock.
*/
#include <stdlib.h>

#include "base/deadline.h"
#include "fiber/fiber.h"

/* A scope's deadline `ns` from now, finite however large `ns` (deadline.h). */
static int64_t scope_deadline(int64_t ns)
{
    return px__deadline_finite(px__deadline_after(px_now(), ns));
}

/* Scopes with a token: watched, they are among its watchers (its cancel
** interrupts their fiber); counted, among the scheduler's token_scopes. */
enum { WATCHED = 1, COUNTED = 2 };

static void scope_open(px_fiber *f, px__scope *sc, int64_t deadline, px_token *t, int heap,
                       int how)
{
    int64_t outer = f->scope ? f->scope->eff : INT64_MAX;
    sc->outer = f->scope;
    sc->deadline = deadline;
    sc->eff = deadline < outer ? deadline : outer;
    sc->token = t;
    sc->fired = 0;
    sc->heap = heap ? 1 : 0;
    sc->alloc = sc->heap;
    sc->sched = f->s;
    sc->fiber_id = f->id;
    sc->watched = t && (how & WATCHED);
    sc->counted = t && (how & COUNTED);
    sc->group = 0;
    px__list_init(&sc->watch);
    if (sc->watched)
        px__token_watch(t, sc);
    if (sc->counted)
        f->s->token_scopes++;
    f->scope = sc;
}

/* Takes `sc`, the innermost scope, off the chain; returns whether it fired. */
static int scope_unlink(px_fiber *f, px__scope *sc)
{
    f->scope = sc->outer;
    if (sc->watched)
        px__token_unwatch(sc->token, sc);
    if (sc->counted)
        sc->sched->token_scopes--;
    return sc->fired;
}

/* Closes the innermost scope (a push's, or a body's being discarded) and
** frees it if it is on the heap. */
static int scope_drop(px_fiber *f)
{
    px__scope *sc = f->scope;
    int fired = scope_unlink(f, sc);
    if (sc->alloc)
        free(sc);
    return fired;
}

void px__scope_close_all(px_fiber *f)
{
    while (f->scope)
        scope_drop(f);
}

int px__scope_check(px_fiber *f)
{
    int64_t now = -1;
    int code = f->s->cancelled ? PX_ECANCELED : 0;   /* px_sched_cancel: no scope fired */
    for (px__scope *sc = f->scope; sc; sc = sc->outer) {
        if (!sc->fired) {
            if (sc->token && px_token_cancelled(sc->token)) {
                sc->fired = PX_ECANCELED;
            } else if (sc->deadline != INT64_MAX) {
                if (now < 0)
                    now = px_now();
                if (sc->deadline <= now)
                    sc->fired = PX_ETIMEDOUT;
            }
        }
        if (code == 0)
            code = sc->fired;
    }
    return code;
}

void px__scope_cancel_parked(px_sched *s, uint64_t id)
{
    px_fiber *f = px__sched_lookup(s, id);
    if (f == NULL || f->state != PX__FIBER_PARKED || (f->park.flags & PX__FIBER_PARK_SHIELD))
        return;
    int r = px__scope_check(f);
    if (r != 0)
        px__fiber_unpark(s, f, r);
}

void px__scope_open_on(px_fiber *f, px__scope *sc, px_token *t)
{
    scope_open(f, sc, INT64_MAX, t, 0, 0);
}

/* The push of every push/pop scope: a scope of the running fiber f on the
** heap, which its pop closes. */
static int push_on(px_fiber *f, int64_t deadline, px_token *t, int how)
{
    px__scope *sc = malloc(sizeof *sc);
    if (sc == NULL)
        return PX_ENOMEM;
    scope_open(f, sc, deadline, t, 1, how);
    return 0;
}

int px__scope_push_uncounted(px_fiber *f, px_token *t)
{
    return push_on(f, INT64_MAX, t, WATCHED);
}

/* -- the body forms ------------------------------------------------------- */

/* The scope of a body form lives on the fiber's stack -- unless that stack is
** shared: a token's watchers (any thread) and the scheduler (expiries) read it
** while the fiber waits, when another fiber's bytes are there. */
static int with_scope(int64_t deadline, px_token *t, px_scope_fn body, void *arg)
{
    px_fiber *f = px__fiber_here();
    if (f == NULL)
        return PX_ENOFIBER;
    px__scope local, *sc = &local;
    if (f->sh != NULL && (sc = malloc(sizeof *sc)) == NULL)
        return PX_ENOMEM;
    scope_open(f, sc, deadline, t, 0, WATCHED | COUNTED);
    sc->alloc = sc != &local;
    int r = body(arg);
    while (f->scope && f->scope != sc)
        scope_drop(f);   /* pushes the body left open */
    if (f->scope == sc)
        scope_unlink(f, sc);
    if (sc->alloc)
        free(sc);
    return r;
}

int px_with_timeout(int64_t ns, px_scope_fn body, void *arg)
{
    if (body == NULL || ns < 0)
        return PX_EINVAL;
    return with_scope(scope_deadline(ns), NULL, body, arg);
}

int px_with_cancel(px_token *token, px_scope_fn body, void *arg)
{
    if (body == NULL || token == NULL)
        return PX_EINVAL;
    if (px__token_forked(token))
        return PX_EFORKED;
    return with_scope(INT64_MAX, token, body, arg);
}

/* -- the push/pop forms --------------------------------------------------- */

static int push(int64_t deadline, px_token *t)
{
    px_fiber *f = px__fiber_here();
    return f == NULL ? PX_ENOFIBER : push_on(f, deadline, t, WATCHED | COUNTED);
}

int px_scope_push_timeout(int64_t ns)
{
    return ns < 0 ? PX_EINVAL : push(scope_deadline(ns), NULL);
}

int px_scope_push_deadline(int64_t deadline)
{
    return deadline < 0 ? PX_EINVAL : push(deadline, NULL);
}

int px_scope_push_cancel(px_token *token)
{
    if (token == NULL)
        return PX_EINVAL;
    return px__token_forked(token) ? PX_EFORKED : push(INT64_MAX, token);
}

int px_scope_pop(void)
{
    px_fiber *f = px__fiber_here();
    if (f == NULL)
        return PX_ENOFIBER;
    if (f->scope == NULL || !f->scope->heap)
        return PX_EINVAL;
    return scope_drop(f);
}
