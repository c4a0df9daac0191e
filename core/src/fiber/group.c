/*
** group.c -- task groups (nurseries): fibers that a group owns, waited for
** together, the first failure cancelling the rest (see parataxis.h, "Group").
**
** A member is a record on the heap beside its fiber: the group's cancel
** scope, opened as the member's outermost before its first turn, and a hold
** of the fiber, whose ended() -- run when the fiber ends, however it ends --
** counts the member out and wakes the waiter when the last one is gone.  So
** a C member, a hosted one and one discarded with its scheduler leave the
** group the same way, and nothing of a member outlives its fiber.
**
** The group's cancel is its token's flag, which every park of a member
** reads.  The members' scopes are not among the token's watchers (a watch
** costs a lock at each spawn and each end): the group watches the token
** once, while it has members, and a cancel interrupts the parked members
** itself, walking the group's list on the scheduler's thread -- directly
** there, through the scheduler's inbox from any other thread (the watch
** holds the scheduler alive while it posts: a group with members has a
** run).  The waiter's own scopes bound its wait only until they fire: then
** the group is cancelled and the wait goes on, shielded, until the last
** member ended.
*/
#include <stdatomic.h>
#include <stdlib.h>

#include "base/compiler.h"
#include "base/names.h"
#include "fiber/fiber.h"
#include "fiber/waitq.h"

typedef struct member {
    px__hold hold;            /* on its fiber: ended() counts it out */
    px__scope scope;          /* the group's cancel scope, its outermost */
    px__list link;            /* in g->members */
    px_group *g;
    px_fiber *f;              /* its fiber; the next spare while it is one */
    px_group_fn fn;           /* a C member's body; NULL for a hosted one */
    void *arg;
} member;

/* Members come from blocks of the group's, each twice the last up to
** BLOCK_MAX, and go back to its spares when they end: a spawn costs no
** malloc once the group has room, and a group of one costs one small block. */
enum { BLOCK_FIRST = 4, BLOCK_MAX = 256 };

typedef struct block {
    struct block *next;
    member members[];
} block;

struct px_group {
    px_sched *s;
    px_token *token;          /* cancels every member's scope */
    px__scope watch;          /* in the token's watchers while live > 0 */
    px__list members;         /* the live ones, by their link */
    size_t live;
    px_fiber *waiter;         /* the fiber in px_group_wait, while it is */
    px__hold waiting;         /* on the waiter: a hosted one may end mid-wait */
    int closed;               /* px_group_wait returned: spawns are refused */
    int interrupted;          /* the code of the waiter's scope that fired, or 0 */
    int first;                /* the first failure (kept without memory) */
    int *failures;            /* the failures, first first */
    size_t nfail, cap;
    member *spare;            /* ended members' records, through their f */
    block *blocks;
    size_t block_size;        /* members in the newest block */
    atomic_int posts;         /* interrupts posted from other threads, not run yet */
    int free_pending;         /* freed while posts were pending: the last one frees */
    int abandoned;            /* px__group_abandon: the last member's end frees it */
};

px_group *px_group_new(void)
{
    px_fiber *me = px__fiber_here();
    if (me == NULL)
        return NULL;
    px_group *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    if ((g->token = px_token_new()) == NULL) {
        free(g);
        return NULL;
    }
    g->s = me->s;
    g->watch.group = 1;
    g->watch.sched = me->s;
    px__list_init(&g->watch.watch);
    px__list_init(&g->members);
    atomic_init(&g->posts, 0);
    return g;
}

static void destroy(px_group *g)
{
    px__names_forget(g);
    for (block *b = g->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    px_token_free(g->token);
    free(g->failures);
    free(g);
}

/* Interrupts every member parked now (the others see the flag at their next
** park); on the scheduler's thread. */
static void interrupt_members(px_group *g)
{
    for (px__list *l = g->members.next; l != &g->members; l = l->next)
        px__scope_cancel_parked(g->s, PX__CONTAINER_OF(l, member, link)->f->id);
}

/* The interrupt a cancel from another thread posted; `status` is
** PX_ECANCELED when px_sched_free drops it, with the members. */
static void posted_interrupt(void *arg, int status)
{
    px_group *g = arg;
    if (status == 0)
        interrupt_members(g);
    if (atomic_fetch_sub(&g->posts, 1) == 1 && g->free_pending)
        destroy(g);
}

void px__group_token_cancelled(px__scope *sc, px_sched *here)
{
    px_group *g = PX__CONTAINER_OF(sc, px_group, watch);
    if (here == g->s) {
        interrupt_members(g);
        return;
    }
    atomic_fetch_add(&g->posts, 1);
    px__item it = { .kind = PX__FIBER_ITEM_CALL, .hfn = posted_interrupt, .arg = g };
    if (px__sched_inbox_post(g->s, &it) != 0)
        atomic_fetch_sub(&g->posts, 1);   /* no memory: parked members see it later */
}

int px_group_cancel(px_group *g)
{
    return g == NULL ? PX_EINVAL : px_token_cancel(g->token);
}

int px__group_cancelled(const px_group *g)
{
    return px_token_cancelled(g->token);
}

int px_group_fail(px_group *g, int status)
{
    if (g == NULL || status == 0)
        return PX_EINVAL;
    if (status == PX_ECANCELED && px_token_cancelled(g->token))
        return 0;   /* it did what the cancel asked */
    if (g->nfail == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 4;
        int *more = realloc(g->failures, cap * sizeof *more);
        if (more != NULL) {
            g->failures = more;
            g->cap = cap;
        }
    }
    if (g->nfail < g->cap)   /* out of memory: counted, not kept */
        g->failures[g->nfail] = status;
    if (g->nfail++ == 0) {
        g->first = status;
        px_token_cancel(g->token);
    }
    return 1;
}

size_t px_group_failures(const px_group *g, int *out, size_t max)
{
    if (g == NULL)
        return 0;
    size_t kept = g->nfail < g->cap ? g->nfail : g->cap;
    for (size_t i = 0; out != NULL && i < max && i < kept; i++)
        out[i] = g->failures[i];
    return g->nfail;
}

size_t px_group_live(const px_group *g)
{
    return g ? g->live : 0;
}

/* -- members ---------------------------------------------------------------- */

/* A member record of g's, or NULL (no memory for another block). */
static member *member_new(px_group *g)
{
    if (g->spare == NULL) {
        size_t n = g->blocks == NULL ? BLOCK_FIRST
                 : g->block_size < BLOCK_MAX ? 2 * g->block_size : BLOCK_MAX;
        block *b = malloc(sizeof *b + n * sizeof b->members[0]);
        if (b == NULL)
            return NULL;
        b->next = g->blocks;
        g->blocks = b;
        g->block_size = n;
        for (size_t i = 0; i < n; i++) {
            b->members[i].f = (px_fiber *)g->spare;
            g->spare = &b->members[i];
        }
    }
    member *m = g->spare;
    g->spare = (member *)m->f;
    return m;
}

static void member_free(px_group *g, member *m)
{
    m->f = (px_fiber *)g->spare;
    g->spare = m;
}

/* The member's fiber ended (or was discarded): it leaves the group. */
static void member_ended(px__hold *h, uint64_t id, int discarding)
{
    (void)id;
    member *m = PX__CONTAINER_OF(h, member, hold);
    px_group *g = m->g;
    px__list_unlink(&m->link);
    member_free(g, m);
    if (g->live == 1)
        px__token_unwatch(g->token, &g->watch);   /* the last: nothing to interrupt */
    if (--g->live == 0 && g->waiter != NULL && !discarding)
        px_wake(g->waiter->id);
    if (g->live == 0 && g->abandoned)
        px_group_free(g);
}

static void *member_main(void *arg)
{
    member *m = arg;
    int status = m->fn(m->arg);
    if (status != 0)
        px_group_fail(m->g, status);
    return NULL;
}

/* Whether the caller may spawn into g now: 0, or why not. */
static int admit(const px_group *g)
{
    px_fiber *me = px__fiber_here();
    if (me == NULL) {
        px_sched *s = px__sched_here();
        return s != NULL && s != g->s ? PX_ETHREAD : PX_ENOFIBER;
    }
    if (me->s != g->s)
        return PX_ETHREAD;
    if (g->closed)
        return PX_ECLOSED;
    return px_token_cancelled(g->token) ? PX_ECANCELED : 0;
}

/* Makes new fiber f, not started, member m of g. */
static void join(px_group *g, member *m, px_fiber *f)
{
    m->g = g;
    m->f = f;
    px__scope_open_on(f, &m->scope, g->token);
    px__waitq_hold_take(&m->hold, f, member_ended);
    px__list_push(&g->members, &m->link);
    if (g->live++ == 0)
        px__token_watch(g->token, &g->watch);
}

/* Spawns a member of g into *out: a C fiber of fn(arg), or, fn NULL, a
** hosted fiber of ops and host_ctx; 0 or why not. */
static int spawn_member(px_group *g, px_group_fn fn, void *arg, const px_host_ops *ops,
                        void *host_ctx, px_fiber **out)
{
    int r = admit(g);
    if (r != 0)
        return r;
    member *m = member_new(g);
    if (m == NULL)
        return PX_ENOMEM;
    m->fn = fn;
    m->arg = arg;
    px_fiber *f = fn ? px__fiber_new(g->s, member_main, m, 0)
                     : px_spawn_hosted(g->s, ops, host_ctx);
    if (f == NULL) {
        member_free(g, m);
        return PX_ENOMEM;
    }
    join(g, m, f);
    *out = f;
    return 0;
}

int px_group_spawn(px_group *g, px_group_fn fn, void *arg)
{
    if (g == NULL || fn == NULL)
        return PX_EINVAL;
    px_fiber *f;
    int r = spawn_member(g, fn, arg, NULL, NULL, &f);
    if (r == 0)
        px_fiber_release(f);   /* detached: the group joins it */
    return r;
}

int px_group_spawn_hosted(px_group *g, const px_host_ops *ops, void *host_ctx, px_fiber **out)
{
    if (out != NULL)
        *out = NULL;
    if (g == NULL || ops == NULL || out == NULL)
        return PX_EINVAL;
    return spawn_member(g, NULL, NULL, ops, host_ctx, out);
}

/* The prologue of a call that needs a fiber of g's run: 0 with the caller
** in *me, or PX_EINVAL (NULL g), PX_ENOFIBER, PX_ETHREAD. */
static int caller(const px_group *g, px_fiber **me)
{
    if (g == NULL)
        return PX_EINVAL;
    *me = px__fiber_here();
    if (*me == NULL)
        return PX_ENOFIBER;
    return (*me)->s != g->s ? PX_ETHREAD : 0;
}

int px_group_scope_push(px_group *g)
{
    px_fiber *me;
    int r = caller(g, &me);
    if (r != 0)
        return r;
    /* A watcher of the token as any scope (one body, one lock): only not
    ** counted as a token scope. */
    return px__scope_push_uncounted(me, g->token);
}

/* -- the wait ----------------------------------------------------------------- */

/* park_info.holders: the members hold the group's waiter. */
static size_t holders(const void *object, uint64_t *out, size_t max)
{
    const px_group *g = object;
    size_t n = 0;
    for (const px__list *l = g->members.next; l != &g->members && n < max; l = l->next)
        out[n++] = PX__CONTAINER_OF(l, member, link)->f->id;
    return n;
}

/* The waiter ended without coming back for its wait: a hosted body that
** ended after PX_EYIELD, or a fiber discarded with its scheduler.  The group
** has no waiter then (another fiber may wait), and its scope's code is not
** another waiter's. */
static void waiter_ended(px__hold *h, uint64_t id, int discarding)
{
    (void)id;
    (void)discarding;
    px_group *g = PX__CONTAINER_OF(h, px_group, waiting);
    g->waiter = NULL;
    g->interrupted = 0;
}

/* Whether fiber f is a member of g. */
static int is_member(const px_group *g, const px_fiber *f)
{
    for (const px__hold *h = px__waitq_holds(f); h; h = h->next)
        if (h->ended == member_ended && PX__CONTAINER_OF(h, const member, hold)->g == g)
            return 1;
    return 0;
}

static int park(px_group *g)
{
    static const px_park_info info = {
        .reason = "group wait", .kind = "group", .holders = holders };
    px_park_info pi = info;
    pi.object = g;
    return g->interrupted ? px__fiber_park_shielded(&pi) : px_park_with(&pi);
}

int px_group_wait(px_group *g)
{
    px_fiber *me;
    int r = caller(g, &me);
    if (r != 0)
        return r;
    if (is_member(g, me))
        return PX_EDEADLK;   /* it would wait for its own end */
    if (g->closed || (g->waiter != NULL && g->waiter != me))
        return PX_EINVAL;
    /* A hosted fiber's call again after PX_EYIELD: its park's outcome. */
    if (g->waiter == me) {
        r = px_park_result();
    } else {
        g->waiter = me;
        px__waitq_hold_take(&g->waiting, me, waiter_ended);
    }
    for (;;) {
        if (r == PX_ETIMEDOUT || r == PX_ECANCELED) {
            if (g->interrupted == 0)
                g->interrupted = r;
            px_token_cancel(g->token);
        } else if (r == PX_ENOMEM) {
            px_yield();   /* no memory to park on a shared stack: look again later */
        }
        if (g->live == 0)
            break;
        r = park(g);
        if (r == PX_EYIELD)
            return r;
    }
    px__waitq_hold_drop(&g->waiting);
    g->waiter = NULL;
    g->closed = 1;
    return g->nfail ? g->first : g->interrupted;
}

void px__group_abandon(px_group *g)
{
    if (g->live == 0)
        px_group_free(g);
    else
        g->abandoned = 1;
}

int px_group_free(px_group *g)
{
    if (g == NULL)
        return 0;
    if (g->live != 0)
        return PX_EBUSY;
    if (g->waiter != NULL) {
        /* a hosted waiter that got PX_EYIELD and never came back (a
        ** binding's collector frees the group): its end must not touch g */
        px__waitq_hold_drop(&g->waiting);
        g->waiter = NULL;
    }
    if (atomic_load(&g->posts) != 0)
        g->free_pending = 1;   /* the last posted interrupt frees it */
    else
        destroy(g);
    return 0;
}
