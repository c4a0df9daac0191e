/*
** fiber.c -- fibers: spawn, join, yield, sleep, and the one suspension point,
** park/wake, on which every blocking operation of the library is built.
**
** A fiber record lives from spawn until it ended and its handle was released.
** Its stack lives only from its first turn until its body returns: then the
** fiber wakes its joiners, switches to the scheduler for the last time, and
** the scheduler puts the stack back in the pool, warm for the next first
** turn.  A parked fiber is in no list of the scheduler's: it is reachable only
** through its id (the id table) and, when its park has a deadline, through
** its node in the ordered set of deadlines.
*/
#include <stdlib.h>
#include <string.h>

#include "base/compiler.h"
#include "base/deadline.h"
#include "base/names.h"
#include "fiber/fiber.h"
#include "fiber/waitq.h"
#include "base/trace.h"

#define FREE_RECS_MAX 4096   /* recycled fiber records kept per scheduler */

/* -- records -------------------------------------------------------------- */

static inline void fiber_end(px_sched *s, px_fiber *f);

/* The end of a C fiber, out of line: px__fiber_main's frame lies under the
** body's for the fiber's whole life, and on a shared stack it is copied with
** every parked fiber's bytes, so it keeps only what the call needs. */
static PX__NOINLINE void fiber_finish(px_fiber *f)
{
    fiber_end(f->s, f);
    px__context_switch_final(&f->ctx, &f->s->ctx);
}

void px__fiber_main(void *arg)
{
    px_fiber *f = arg;
    f->started = 1;   /* px__fiber_discard owes it nothing; fn stays for the dump */
    f->result = f->fn(f->arg);
    fiber_finish(f);
}

static px_fiber *rec_alloc(px_sched *s)
{
    px_fiber *f = s->free_recs;
    if (f) {
        s->free_recs = f->next;
        s->nfree--;
    } else if ((f = malloc(sizeof *f)) == NULL) {
        return NULL;
    }
    memset(f, 0, sizeof *f);
    return f;
}

static void rec_recycle(px_sched *s, px_fiber *f)
{
    if (s->nfree >= FREE_RECS_MAX) {
        free(f);
        return;
    }
    f->next = s->free_recs;
    s->free_recs = f;
    s->nfree++;
}

/* Makes a fiber and queues it; fn NULL makes a hosted one (no stack).  With
** shared stacks, a fiber of the default size (0) goes on one of them.  A C
** fiber only claims its stack here: it takes it, and lays out its first
** frame, at its first turn (px__fiber_first_turn), so a fan-out of a million
** fibers that have not run costs a million records and no stack memory. */
px_fiber *px__fiber_new(px_sched *s, px_fiber_fn fn, void *arg, size_t stack_size)
{
    px_fiber *f = rec_alloc(s);
    if (f == NULL)
        return NULL;
    f->s = s;
    f->fn = fn;
    f->arg = arg;
    f->sleep_until = INT64_MAX;
    f->timer.where = PX__TSET_OUT;
    if (px__sched_id_add(s, f) != 0) {
        rec_recycle(s, f);
        return NULL;
    }
    if (fn != NULL && stack_size == 0 && s->shared != NULL) {
        if (px__shared_place(s, f) != 0) {   /* its context is made at its first turn */
            px__sched_id_remove(s, f->id);
            rec_recycle(s, f);
            return NULL;
        }
    } else if (fn != NULL && px__stack_claim(s->pool, stack_size, &f->stack) != 0) {
        px__sched_id_remove(s, f->id);   /* its stack is taken at its first turn */
        rec_recycle(s, f);
        return NULL;
    }
    px__list_push(&s->all, &f->all_link);
    s->live++;
    px__sched_ready_push(s, f);
    if (!PX__LIKELY(s->cur == NULL || s->cur->extra == 0))
        px__extra_spawned(f, s->cur);
    PX__FIBER_TRACE(f, "spawn", NULL);
    return f;
}

void px__fiber_first_turn(px_sched *s, px_fiber *f)
{
    px__stack_take(s->pool, &f->stack);
    px__context_make(&f->ctx, f->stack.lo, f->stack.size, px__fiber_main, f);
}

void px__fiber_free(px_sched *s, px_fiber *f)
{
    px__names_forget(f);   /* the record goes to the next fiber, a name must not */
    px__future_fiber_freed(f);
    px__list_unlink(&f->all_link);
    rec_recycle(s, f);
}

/*
** A fiber that ends may still be in the middle of a park or a yield: a hosted
** one whose body ended in the very turn it recorded one (the park returned
** PX_EYIELD, then resume said PX_HOST_DONE), or one discarded by px_sched_free.
** Undo it, or the record would be freed while still linked: its deadline in
** the set, its outside park counted (no deadlock report ever again), its
** place in a queue of waiters or of joiners, or in the ready queue.  The dereg
** runs as for an interrupted park -- except when discarding, where it must
** not hand anything on to fibers that are being discarded too.
*/
static PX__NOINLINE void leave_turn(px_sched *s, px_fiber *f, int discarding)
{
    if (f->state == PX__FIBER_PARKED) {
        if (px__tset_contains(&f->timer))
            px__tset_remove(&s->tset, &f->timer);
        if (f->park.flags & PX_PARK_OUTSIDE)
            s->outside--;
        f->dereg_due = 1;
    } else if (f->state == PX__FIBER_READY && !discarding) {
        px__sched_ready_remove(s, f);   /* a yield, or woken in its own turn */
    }
    f->sleep_until = INT64_MAX;
    if (discarding)
        f->dereg_due = 0;
    else
        px__fiber_park_finish(f);
}

/* Every way a fiber ends goes through here: its body returned, its host said
** it ended, or px_sched_free discards it (`discarding`). */
static void fiber_ending(px_sched *s, px_fiber *f, int discarding)
{
    if (!PX__LIKELY(f->state == PX__FIBER_RUNNING))
        leave_turn(s, f, discarding);
    px__scope_close_all(f);
    if (f->wait.op == PX__POLL_OP && !discarding)
        px__poll_fiber_ended(f);
    px__waitq_fiber_ended(f, discarding);
}

/*
** The body returned (or the host said so): end the joins, forget the id.
** Ending a join is the hand-over (joining cleared, the result stored); only
** a joiner still parked is woken.  One that is ready already -- a stray wake,
** or an interrupt -- is queued and looks again when it runs: queuing it a
** second time would run it twice.  The joiners are a ring in join order,
** f->joiners its last: the ring's next of the last is the first.
*/
static inline void fiber_end(px_sched *s, px_fiber *f)
{
    fiber_ending(s, f, 0);
    f->state = PX__FIBER_DONE;
    s->live--;
    px__sched_id_remove(s, f->id);
    PX__FIBER_TRACE(f, "exit", NULL);
    if (!PX__LIKELY(f->extra == 0))
        px__extra_ended(f);
    px_fiber *last = f->joiners;
    f->joiners = NULL;
    if (last == NULL)
        return;
    px_fiber *j = last->join_next;
    for (px_fiber *first = j;;) {
        px_fiber *next = j->join_next;
        j->joining = NULL;
        j->joined = f->result;
        if (j->state == PX__FIBER_PARKED) {
            px__fiber_unpark_record(s, j, 0);
            if (j == first)   /* it waited for this: it goes on next */
                px__sched_ready_push_after(s, f, j);
            else
                px__sched_ready_push(s, j);
        }
        if (j == last)
            break;
        j = next;
    }
}

/* The host said so (sched.c); a C fiber's end is fiber_finish's, inlined. */
void px__fiber_end(px_sched *s, px_fiber *f)
{
    fiber_end(s, f);
}

/* Lets go of what a fiber has only while it can run: its context and stack,
** or, hosted, its host's context. */
static void release_running(px_sched *s, px_fiber *f)
{
    if (f->hosted) {
        if (f->ops.release) {
            int was = s->in_hook;
            s->in_hook = 1;   /* host code amid a turn of the loop: no pull */
            f->ops.release(f->host_ctx);
            s->in_hook = was;
        }
    } else if (f->sh != NULL) {
        px__context_destroy(&f->ctx);
        px__shared_release(f);
    } else {
        px__context_destroy(&f->ctx);
        px__stack_put(s->pool, &f->stack);
    }
}

/* On the scheduler, after the last switch out of an ended fiber. */
void px__fiber_reap(px_sched *s, px_fiber *f)
{
    release_running(s, f);
    if (f->released)
        px__fiber_free(s, f);
}

/* px_sched_free: drop a record whatever its state. */
void px__fiber_discard(px_sched *s, px_fiber *f)
{
    if (f->state != PX__FIBER_DONE) {
        fiber_ending(s, f, 1);
        if (!f->hosted && !f->started)
            px__sched_unstarted(s, f->fn, f->arg);
        release_running(s, f);
        if (f->extra != 0)
            px__extra_ended(f);
    }
    px__names_forget(f);
    px__future_fiber_freed(f);
    px__list_unlink(&f->all_link);
    free(f);
}

/* -- spawn, join, release ------------------------------------------------- */

px_fiber *px_spawn_sized(px_fiber_fn fn, void *arg, size_t stack_size)
{
    px_fiber *me = px__fiber_here();
    if (me == NULL || fn == NULL)
        return NULL;
    return px__fiber_new(me->s, fn, arg, stack_size);
}

px_fiber *px_spawn(px_fiber_fn fn, void *arg)
{
    return px_spawn_sized(fn, arg, 0);
}

px_fiber *px_spawn_hosted(px_sched *s, const px_host_ops *ops, void *host_ctx)
{
    if (s == NULL || ops == NULL || px__sched_forked(s))
        return NULL;
    pthread_mutex_lock(&s->lock);
    int other = s->running && !pthread_equal(s->thread, pthread_self());
    /* A pulled fiber cannot run in px_sched_run, which calls resume. */
    int refused = other || (ops->resume == NULL && s->running && !s->pulling);
    if (!refused && ops->resume == NULL)
        s->pulled = 1;
    pthread_mutex_unlock(&s->lock);
    if (refused)
        return NULL;
    px_fiber *f = px__fiber_new(s, NULL, NULL, 0);
    if (f == NULL)
        return NULL;
    f->hosted = 1;
    f->ops = *ops;
    f->host_ctx = host_ctx;
    return f;
}

/* Leaves the ring of f's joiners: O(1) from anywhere in it, so interrupted
** joins cost the same in whatever order their deadlines fire. */
static void join_dereg(void *ctx)
{
    px_fiber *me = ctx, *f = me->joining;
    if (f == NULL)
        return;
    me->joining = NULL;
    if (me->join_next == me) {
        f->joiners = NULL;             /* it was the only one */
        return;
    }
    me->join_prev->join_next = me->join_next;
    me->join_next->join_prev = me->join_prev;
    if (f->joiners == me)
        f->joiners = me->join_prev;
}

/* Joins the ring of f's joiners as its last: O(1) whatever their number.  A
** fiber that is ready (one that has not run yet, typically) is what `me` is
** about to wait for: it runs next, not behind the whole queue, so a fan-out
** that joins its children in turn runs depth first and holds few stacks. */
static void join_append(px_fiber *f, px_fiber *me)
{
    if (f->state == PX__FIBER_READY)
        px__sched_hand_off(f->s, me, f);
    px_fiber *last = f->joiners;
    if (last == NULL) {
        me->join_next = me->join_prev = me;
    } else {
        me->join_next = last->join_next;
        me->join_prev = last;
        last->join_next->join_prev = me;
        last->join_next = me;
    }
    f->joiners = me;
    me->joining = f;
}

static size_t join_holders(const void *object, uint64_t *out, size_t max)
{
    const px_fiber *f = object;
    if (max == 0 || f->state == PX__FIBER_DONE)
        return 0;
    out[0] = f->id;
    return 1;
}

/*
** A join recorded in a fiber's waiter: wait.op JOIN_OP, no primitive's (theirs
** count from 0), and the joined fiber by id in wait.n, not by address: its host
** may release it before the re-call (it collects the outcome with
** px_park_result then, which clears the record), and its record may then be a
** new fiber's.  It is the fiber's last park only while f->park is that join's.
*/
enum { JOIN_OP = -1 };

/* A hosted fiber that must yield records its join, for the re-call to
** collect (join_hosted). */
static PX__NOINLINE void join_record(px_fiber *me, px_fiber *f)
{
    if (me->wait.op == PX__POLL_OP)
        px__poll_fiber_ended(me);   /* an uncollected fd wait: this one replaces it */
    else if (me->wait.op == PX__WAITQ_CHOICE_OP)
        px__waitq_abandon(me);      /* an uncollected select, likewise */
    me->wait.obj = NULL;   /* no primitive's wait under way */
    me->wait.op = JOIN_OP;
    me->wait.n = f->id;
}

/* The join of a fiber that ended: at once. */
static inline int join_ended(px_fiber *f, void **result)
{
    if (result)
        *result = f->result;
    return 0;
}

/* Parks `me`, one of f's joiners, until f ends or a scope interrupts it. */
static inline int join_wait(px_fiber *me, px_fiber *f, void **result)
{
    /* In the record, not in this frame, which lies under the parked fiber. */
    me->park = (px_park_info){ .reason = "fiber join", .dereg = join_dereg, .ctx = me,
                               .object = f, .kind = "fiber", .holders = join_holders };
    int r;
    do   /* a px_wake from elsewhere is not f's end: wait on */
        r = px__fiber_park(me);
    while (r == 0 && me->joining == f);
    if (r == 0 && result)
        *result = me->joined;
    else if (r == PX_EYIELD)
        join_record(me, f);
    return r;
}

/*
** px_join in a hosted fiber.  One whose host cannot switch inside C gets
** PX_EYIELD and calls px_join(f) again once resumed: that re-call returns the
** outcome of the park it recorded, whatever happened since -- an interrupt
** (its dereg ran before the resume: no joiner any more) even when f ended
** before the re-call, as a C fiber's join reports it; a stray wake waits on.
*/
static PX__NOINLINE int join_hosted(px_fiber *me, px_fiber *f, void **result)
{
    if (me->wait.op == JOIN_OP && me->wait.n == f->id && me->park.object == f) {
        me->wait.n = 0;    /* collected: no id is 0 */
        int r = me->park_result;
        if (r != 0)
            return r;
        if (me->joining != f) {
            if (result)
                *result = me->joined;
            return 0;
        }
        return join_wait(me, f, result);   /* still a joiner */
    }
    if (f->state == PX__FIBER_DONE)
        return join_ended(f, result);
    if (me->joining != f)   /* not if its host left a recorded join uncollected */
        join_append(f, me);
    return join_wait(me, f, result);
}

int px_join(px_fiber *f, void **result)
{
    if (f == NULL)
        return PX_EINVAL;
    px_fiber *me = px__fiber_here();
    if (me == NULL)
        return PX_ENOFIBER;
    if (f->s != me->s)
        return PX_ETHREAD;
    if (f == me)
        return PX_EDEADLK;
    if (!PX__LIKELY(!me->hosted))
        return join_hosted(me, f, result);
    if (f->state == PX__FIBER_DONE)
        return join_ended(f, result);
    join_append(f, me);   /* a C fiber's join is over when px_join returns */
    return join_wait(me, f, result);
}

void px_fiber_release(px_fiber *f)
{
    if (f == NULL)
        return;
    px_sched *s = f->s;
    if (px__sched_forked(s))
        return;   /* the child of a fork: the parent's record */
    if (px__sched_here() != s) {
        pthread_mutex_lock(&s->lock);
        int running = s->running;
        pthread_mutex_unlock(&s->lock);
        if (running)
            return;   /* another thread runs it: not ours to touch */
    }
    if (f->state == PX__FIBER_DONE)
        px__fiber_free(s, f);
    else
        f->released = 1;
}

uint64_t px_fiber_id(const px_fiber *f)
{
    return f ? f->id : 0;
}

uint64_t px_self(void)
{
    px_fiber *f = px__fiber_here();
    return f ? f->id : 0;
}

/* -- yield and sleep ------------------------------------------------------ */

/* Leaves the CPU to the scheduler; `f` is queued or parked already. */
static int suspend(px_fiber *f)
{
    if (!f->hosted) {
        px__sched_switch_to(f);
        return 0;
    }
    if (f->ops.suspend == NULL)
        return PX_EYIELD;
    f->ops.suspend(f->host_ctx);
    return 0;
}

int px_yield(void)
{
    px_fiber *f = px__fiber_here();
    if (f == NULL)
        return PX_ENOFIBER;
    px__sched_ready_push(f->s, f);
    f->park_result = 0;      /* what a hosted fiber reads once resumed */
    int r = suspend(f);
    /* PX_ENOMEM when the scheduler could not let it leave (px__fiber_refuse) */
    return r ? r : f->park_result;
}

int px_sleep_until(int64_t deadline)
{
    px_fiber *f = px__fiber_here();
    if (f == NULL)
        return PX_ENOFIBER;
    if (deadline <= px_now()) {
        int r = px__scope_check(f);
        return r ? r : px_yield();
    }
    f->sleep_until = px__deadline_finite(deadline);   /* px__fiber_unpark resets it */
    f->park = (px_park_info){ .reason = "sleep" };   /* in the record, not in this frame */
    return px__fiber_park(f);
}

int px_sleep(int64_t ns)
{
    if (ns < 0)
        return PX_EINVAL;
    return px_sleep_until(px__deadline_after(px_now(), ns));
}

/* -- park and wake -------------------------------------------------------- */

void px__fiber_park_finish(px_fiber *f)
{
    if (f->dereg_due) {
        f->dereg_due = 0;
        if (f->park.dereg)
            f->park.dereg(f->park.ctx);
    }
}

static const char *interrupt_event(int code)
{
    return code == PX_ECANCELED ? "cancel" : code == PX_ENOMEM ? "nomem" : "timeout";
}

void px__fiber_unpark(px_sched *s, px_fiber *f, int code)
{
    px__fiber_unpark_record(s, f, code);
    px__sched_ready_push(s, f);
}

void px__fiber_unpark_record(px_sched *s, px_fiber *f, int code)
{
    if (px__tset_contains(&f->timer))
        px__tset_remove(&s->tset, &f->timer);
    if (f->park.flags & PX_PARK_OUTSIDE)
        s->outside--;
    f->sleep_until = INT64_MAX;
    f->park_result = code;
    f->dereg_due = code != 0;
    PX__FIBER_TRACE(f, code ? interrupt_event(code) : "wake", f->park.reason);
    f->state = PX__FIBER_READY;
}

void px__fiber_refuse(px_sched *s, px_fiber *f, int code)
{
    if (f->state == PX__FIBER_PARKED)
        px__fiber_unpark(s, f, code);   /* interrupted: its dereg runs, as a scope's */
    else
        f->park_result = code;          /* a yield: px_yield returns it */
    px__sched_ready_remove(s, f);       /* it runs now, before anyone */
    f->state = PX__FIBER_RUNNING;
}

/* Its node in the set of deadlines came due: the sleep ended, or a scope's
** deadline passed. */
void px__fiber_expired(px_sched *s, px_fiber *f, int64_t now)
{
    int r = px__scope_check(f);
    if (r == 0 && f->sleep_until > now) {
        /* Neither is due (cannot happen: the set never returns a node early);
        ** keep it parked rather than wake it early. */
        px__tset_insert(&s->tset, &f->timer);
        return;
    }
    px__fiber_unpark(s, f, r);
}

/* Parks the running fiber f with what f->park says.  The info lives in the
** record, not in a frame of the parking call: it is what the deadlock report
** reads, and a frame under a parked fiber costs memory on a shared stack. */
int px__fiber_park(px_fiber *f)
{
    px_sched *s = f->s;
    const px_park_info *info = &f->park;
    int shielded = (info->flags & PX__FIBER_PARK_SHIELD) != 0;
    int r = shielded ? 0 : px__scope_check(f);
    if (r != 0) {
        /* A scope fired already: the park ends before it begins.  A sleep
        ** must not leave its deadline behind: the next park would take it
        ** for its own and px_wake would think that park a sleep. */
        f->sleep_until = INT64_MAX;
        PX__FIBER_TRACE(f, interrupt_event(r), info->reason);
        f->park_result = r;
        f->dereg_due = 1;
        px__fiber_park_finish(f);
        return r;
    }
    int64_t deadline = f->scope && !shielded ? f->scope->eff : INT64_MAX;
    if (f->sleep_until < deadline)
        deadline = f->sleep_until;
    if (deadline != INT64_MAX) {
        f->timer.deadline = deadline;
        px__tset_insert(&s->tset, &f->timer);
    }
    if (info->flags & PX_PARK_OUTSIDE)
        s->outside++;
    f->state = PX__FIBER_PARKED;
    f->park_result = 0;
    f->park_ms = s->clock_ms;
    PX__FIBER_TRACE(f, "park", info->reason);
    r = suspend(f);
    if (r != 0)
        return r;   /* PX_EYIELD: the host yields; dereg runs before resuming */
    px__fiber_park_finish(f);
    return f->park_result;
}

int px_park_with(const px_park_info *info)
{
    if (info == NULL)
        return PX_EINVAL;
    px_fiber *f = px__fiber_here();
    if (f == NULL)
        return PX_ENOFIBER;
    f->park = *info;
    f->park.flags &= PX_PARK_OUTSIDE;   /* no caller of the API shields a park */
    return px__fiber_park(f);
}

int px__fiber_park_shielded(const px_park_info *info)
{
    px_fiber *f = px__fiber_here();
    if (f == NULL)
        return PX_ENOFIBER;
    f->park = *info;
    f->park.flags |= PX__FIBER_PARK_SHIELD;
    return px__fiber_park(f);
}

int px_park(const char *reason, void (*dereg)(void *ctx), void *ctx)
{
    px_fiber *f = px__fiber_here();
    if (f == NULL)
        return PX_ENOFIBER;
    f->park = (px_park_info){ .reason = reason, .dereg = dereg, .ctx = ctx };
    return px__fiber_park(f);
}

int px_park_result(void)
{
    px_fiber *f = px__fiber_here();
    if (f == NULL)
        return PX_ENOFIBER;
    if (f->wait.op == JOIN_OP)
        f->wait.n = 0;   /* a recorded join, collected: the next px_join is a new one */
    return f->park_result;
}

/* The one rule of a wake: only a fiber parked, and not asleep, is woken.  A
** sleep is in no primitive's queue, so a wake aimed at it is stale, like one
** aimed at a fiber that runs or has ended. */
int px__fiber_wake(px_sched *s, uint64_t id)
{
    px_fiber *f = px__sched_lookup(s, id);
    if (f == NULL || f->state != PX__FIBER_PARKED || f->sleep_until != INT64_MAX)
        return 0;
    px__fiber_unpark(s, f, 0);
    return 1;
}

int px_wake(uint64_t id)
{
    px_sched *s = px__sched_here();
    if (id == 0)
        return 0;
    if (s != NULL && PX__FIBER_ID_SERIAL(id) == s->serial)
        return px__fiber_wake(s, id);
    return px__sched_post_by_id(PX__FIBER_ITEM_WAKE, id);
}
