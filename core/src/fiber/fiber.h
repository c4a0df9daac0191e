/*
** fiber.h -- the fiber engine's private records, shared by sched.c (the run
** loop, ids, the inbox), fiber.c (spawn, join, park, wake), shared.c, scope.c,
** token.c, deadlock.c, and waitq.h with waitq.c (so every primitive of sync/
** includes it, but uses only the waiter and hold records: see waitq.h).
** Nothing here is public: parataxis.h is the API.
*/
#ifndef PX__FIBER_FIBER_H
#define PX__FIBER_FIBER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "parataxis.h"
#include "base/list.h"
#include "base/trace.h"
#include "fiber/ctx/context.h"
#include "fiber/poll.h"
#include "fiber/stack.h"
#include "timerset.h"

enum px__fstate {
    PX__FIBER_READY,     /* in the ready queue */
    PX__FIBER_RUNNING,   /* the scheduler's current fiber */
    PX__FIBER_PARKED,    /* waits for px_wake or its deadline */
    PX__FIBER_DONE       /* ended; the record waits for px_fiber_release */
};

typedef struct px__scope px__scope;
typedef struct px__waitq px__waitq;
typedef struct px__waiter px__waiter;
typedef struct px__hold px__hold;
typedef struct px__choice px__choice;

/*
** A fiber's place in a primitive's queue of waiters (waitq.c).  A fiber waits
** for one thing at a time, so each fiber record carries exactly one: a wait
** needs no allocation, and the record outlives the C stack of the operation
** (a hosted fiber returns from the operation with PX_EYIELD before it is
** woken, and calls it again to collect the outcome).  A hosted fiber's join
** records itself here too (fiber.c: op JOIN_OP, the joined fiber's id in n).
*/
struct px__waiter {
    px__list link;            /* in q, FIFO; on none while q is NULL */
    px__waitq *q;             /* the queue it is on; NULL once off it */
    const void *obj;         /* the object of the wait under way or uncollected */
    void (*pass_on)(px__waiter *w);  /* interrupted after a grant: hand it on */
    /* A short: op and granted share a word, which keeps the record (a parked
    ** fiber's whole cost on a shared stack) within its malloc size class. */
    short op;                /* the primitive's: what the fiber waits for */
    unsigned char granted;   /* the releasing side handed over */
    int result;              /* set by the grant: what the operation returns */
    void *value;             /* a value handed over with the grant (or offered) */
    uint64_t n;              /* a count the primitive may need */
    px__choice *choice;      /* a case of this select (waitq.h); NULL: the fiber's own */
};

/*
** Something a fiber holds that must not outlive it (a mutex, a write lock, a
** read hold, a Once it runs).  When the fiber ends holding it, or is discarded
** with its scheduler, ended() runs: with `discarding` set it must release
** without waking anyone (every fiber of the scheduler is being discarded).
*/
struct px__hold {
    px__hold *next;           /* in the owner's list, most recent first */
    void (*ended)(px__hold *h, uint64_t id, int discarding);
    px_fiber *owner;         /* NULL while not held */
};

/*
** A scope, on the C stack of px_with_* (on the heap for a fiber on a shared
** stack) or on the heap for the push/pop form.
** `eff` is the nearest deadline of this scope and every outer one, so a park
** reads one field to know its bound.
*/
struct px__scope {
    px__scope *outer;
    int64_t deadline;        /* INT64_MAX: no deadline of its own */
    int64_t eff;
    px_token *token;         /* NULL: no token */
    int fired;               /* 0, PX_ETIMEDOUT or PX_ECANCELED */
    unsigned heap : 1;       /* made by a push: its pop closes it */
    unsigned alloc : 1;      /* on the heap: freed when it closes */
    unsigned watched : 1;    /* in its token's watchers (a group member's is not) */
    unsigned counted : 1;    /* in sched->token_scopes (no group's scope is) */
    unsigned group : 1;      /* a group's watch (group.c), of no fiber */
    /* While open and watched: in that token's watchers (under its lock). */
    px__list watch;
    px_sched *sched;
    uint64_t fiber_id;
};

/*
** A stack that several fibers run on in turn (shared.c): one mapping with a
** guard; the bytes on it are the resident fiber's, and every other fiber of
** it keeps its own in a buffer of its record's (f->away) while it waits.
*/
typedef struct px__shstack {
    px__stack stack;
    px_fiber *resident;      /* whose bytes are on it; NULL: nobody's */
    /* The top of what any fiber of it uses (px__context_top): the bytes above
    ** are the same for all of them (a part of the first frame), so no copy
    ** holds them.  Kept here: every switch out of one of its fibers reads it. */
    char *top;
} px__shstack;

struct px_fiber {
    uint64_t id;
    px_sched *s;
    px_fiber *next;                  /* ready queue, or the record free list */
    px_fiber *prev;                  /* ready queue: its predecessor, unless first */
    px__list all_link;               /* in s->all */
    px_fiber *joiners;               /* fibers in px_join on this one: the last
                                     ** of a ring in join order */
    px_fiber *join_next, *join_prev; /* links in the joined fiber's joiners */
    px_fiber *joining;               /* the fiber this one joins, while it does */
    px__tnode timer;                  /* in s->tset while a park has a deadline */
    int64_t sleep_until;             /* INT64_MAX unless it sleeps */
    px__scope *scope;                 /* innermost open scope */
    px_park_info park;               /* the park under way */
    /* The fields up to `park_ms` fill what was padding before the unions: a
    ** short is room enough for a park's code. */
    short park_result;               /* the park's outcome: 0, or a scope's code */
    unsigned char state;
    unsigned char released;          /* the handle was given up */
    unsigned char hosted;
    unsigned char dereg_due;         /* interrupted: dereg not run yet */
    unsigned char handed;            /* was handed its turn (px__sched_hand_off) */
    unsigned char started;           /* a C fiber's body began */
    uint32_t extra;                  /* its slot in s->extras (extra.c); 0: none */
    uint32_t park_ms;                /* s->clock_ms when it parked (dump.c) */
    /* Unions of what is never needed at once: a record is kept per parked
    ** fiber, and with shared stacks it is most of what a parked fiber costs. */
    union {
        px_fiber_fn fn;              /* a C fiber's function, until it ended (the dump's where) */
        void *result;                /* what it returned, once it ended */
    };
    union {
        void *arg;                   /* until it starts */
        void *joined;                /* result of the fiber it joined, once that ended */
    };
    px__shstack *sh;                  /* its shared stack; NULL: none (own, hosted) */
    union {
        struct {                      /* a C fiber (fn set at spawn) */
            union {
                px__stack stack;      /* its own stack, unless sh */
                struct {              /* on sh: its bytes while not resident */
                    void *saved;
                    size_t len, cap;
                } away;
            };
            px__context ctx;          /* sp NULL: not started yet */
        };
        struct {                      /* hosted */
            px_host_ops ops;
            void *host_ctx;
        };
    };
    px__waiter wait;                  /* its place in a primitive's queue */
    px__hold *holds;                  /* what it holds that it must release */
};

/* An item posted to a scheduler from any thread. */
enum px__item_kind {
    PX__FIBER_ITEM_SPAWN,
    PX__FIBER_ITEM_HANDLER,
    PX__FIBER_ITEM_WAKE,
    PX__FIBER_ITEM_CANCEL,
    PX__FIBER_ITEM_CALL      /* hfn(arg, 0) on the scheduler thread, outside fibers */
};

typedef struct px__item {
    struct px__item *next;
    int kind;
    int status;              /* PX__FIBER_ITEM_HANDLER: the handler's status */
    px_fiber_fn fn;          /* PX__FIBER_ITEM_SPAWN */
    px_handler_fn hfn;       /* PX__FIBER_ITEM_HANDLER */
    void *arg;
    uint64_t id;             /* PX__FIBER_ITEM_WAKE, PX__FIBER_ITEM_CANCEL */
} px__item;

struct px_sched {
    px__context ctx;          /* the scheduler's own context (its thread's) */
    px_fiber *cur;           /* running fiber */
    px_fiber *ready, *ready_tail;
    px_fiber *batch;         /* the rest of the batch the loop runs */
    unsigned handoffs;       /* turns handed on in a row (px__sched_hand_off) */
    const px_fiber *handed_by; /* the last to hand one on (never dereferenced) */
    px__list all;            /* its fibers' records, in spawn (= id) order */
    px_fiber *free_recs;     /* recycled fiber records */
    size_t nfree;
    px__tset tset;
    px__stack_pool *pool;
    px__shstack *shared;     /* opts.shared_stacks of them, mapped when first used */
    size_t shared_next;      /* the one the next fiber goes to (round robin) */
    px_sched_opts opts;      /* as given (zeroed for NULL) */
    int64_t slack_ns;        /* opts.timer_slack_ns, bounded (deadline.h) */

    size_t live;             /* fibers not ended */
    size_t outside;          /* parked with PX_PARK_OUTSIDE */
    size_t token_scopes;     /* open scopes with a token: any thread may cancel it */

    /* id -> fiber for the live fibers: open addressing, linear probing */
    px_fiber **tab;
    size_t tab_cap, tab_len;
    uint64_t serial;         /* high bits of this scheduler's ids */
    uint64_t next_n;         /* low bits of the next id */

    int running;
    int pulling;             /* a run of px_sched_next is under way */
    int pulled;              /* has fibers without resume: px_sched_next runs it */
    int cancelled;           /* px_sched_cancel: every park ends with PX_ECANCELED */
    int in_hook;             /* in opts.on_wait, opts.on_deadlock or a host's
                             ** release: px_sched_next refuses to pull */
    int old_slack;           /* the thread's timer slack before the run */
    int bound;               /* ran once: thread is its thread */
    pthread_t thread;
    unsigned fork_gen;       /* the fork generation it was made in (fork.h) */
    int forked;              /* the child of a fork made in one of its fibers */

    /* Shared with other threads, under lock. */
    pthread_mutex_t lock;
    px__item *inbox, *inbox_tail;
    atomic_int inbox_ready;  /* 1 while the inbox may hold items: read unlocked */
    int sleeping, signalled;
    long holds;
    int efd;

    px__poll poll;           /* its fibers' fd waits (poll.c) */

    /* Time, as the scheduler last looked: milliseconds since clock_t0,
    ** stamped on each park for the dump's "waited" (a clock read per park
    ** would cost more than the park).  It looks when it expires deadlines,
    ** after a wait in the kernel, and when it takes in posts. */
    uint32_t clock_ms;
    int64_t clock_t0;
    int64_t vnow;            /* the virtual clock's time (opts.clock) */

    /* Fibers' names and local values (extra.c), by f->extra: slot 0 unused. */
    struct px__extra **extras;
    uint32_t *extras_free;   /* the free slots, a stack of extras_nfree */
    uint32_t extras_len, extras_cap, extras_nfree;

    px_sched *reg_next;      /* the registry of live schedulers */
};

/* Ids: the scheduler's serial over a per-scheduler count. */
#define PX__FIBER_ID_SHIFT 40
#define PX__FIBER_ID_SERIAL(id) ((id) >> PX__FIBER_ID_SHIFT)

/* The calling thread's running scheduler, NULL if none (set by sched.c).
** Inline: every operation of the sync family starts here, and an uncontended
** lock is only a few instructions more. */
extern _Thread_local px_sched *px__sched_tl;
static inline px_sched *px__sched_here(void) { return px__sched_tl; }
/* The running fiber of the calling thread, NULL off-fiber. */
static inline px_fiber *px__fiber_here(void)
{
    px_sched *s = px__sched_tl;
    return s ? s->cur : NULL;
}

/* sched.c: the ready queue, ids and posting. */
void px__sched_ready_push(px_sched *s, px_fiber *f);
/* Takes ready fiber f out of the ready queue or the batch under way,
** wherever it is, in O(1) (a hand-off's target, a fiber that ends while
** queued: a host's rare case). */
void px__sched_ready_remove(px_sched *s, px_fiber *f);
/*
** Hand-offs: `from`, whose turn it is, lets `to` run next, first in the
** batch -- what `from` is about to wait for (the fiber it joins), or the
** fiber that waited for it (the joiner of a fiber that ends).
** PX__SCHED_HANDOFF_MAX of them in a row give way to the queue, so a ready
** fiber waits a bounded number of turns.  px__sched_hand_off moves `to` from
** where it waits (it stays there past the bound); px__sched_ready_push_after
** queues `to`, ready now, as px__sched_ready_push does past the bound.
*/
void px__sched_hand_off(px_sched *s, px_fiber *from, px_fiber *to);
void px__sched_ready_push_after(px_sched *s, px_fiber *from, px_fiber *to);
#define PX__SCHED_HANDOFF_MAX 256
/* px_sched_free discards fiber (fn, arg) that never started: a handler call
** taken in gets its one call, aborted. */
void px__sched_unstarted(px_sched *s, px_fiber_fn fn, void *arg);
px_fiber *px__sched_lookup(px_sched *s, uint64_t id);
int px__sched_id_add(px_sched *s, px_fiber *f);
void px__sched_id_remove(px_sched *s, uint64_t id);
int px__sched_inbox_post(px_sched *s, const px__item *proto);
/* Runs fn(s, ctx) for every live scheduler of the process, under the lock of
** their registry (fn may post to s; it must not make or free a scheduler). */
void px__sched_each(void (*fn)(px_sched *s, void *ctx), void *ctx);
/* Posts a wake or cancel of `id` to the scheduler that made it; 1 posted, 0 none. */
int px__sched_post_by_id(int kind, uint64_t id);
/* The turn of hosted fiber `f` ended with `status` (what resume returned). */
void px__sched_turn_over(px_sched *s, px_fiber *f, int status);
/* Switches from the running fiber back to the scheduler. */
void px__sched_switch_to(px_fiber *f);
/* 1 when `s` belongs to the parent of a fork: no call of the child may use it. */
int px__sched_forked(const px_sched *s);

/* fiber.c */
/* The fiber whose link in its scheduler's `all` is `l`. */
static inline px_fiber *px__fiber_of_all(px__list *l)
{
    return PX__CONTAINER_OF(l, px_fiber, all_link);
}
px_fiber *px__fiber_new(px_sched *s, px_fiber_fn fn, void *arg, size_t stack_size);
/* Before the first switch to C fiber f (its own stack, not a shared one):
** takes the stack it claimed at spawn and lays out its first frame there. */
void px__fiber_first_turn(px_sched *s, px_fiber *f);
void px__fiber_free(px_sched *s, px_fiber *f);
void px__fiber_unpark(px_sched *s, px_fiber *f, int code);
/* The record side of px__fiber_unpark: f is ready, in no queue yet. */
void px__fiber_unpark_record(px_sched *s, px_fiber *f, int code);
/* px_wake of fiber `id` of `s`, on s's thread; 1 when it woke it. */
int px__fiber_wake(px_sched *s, uint64_t id);
void px__fiber_expired(px_sched *s, px_fiber *f, int64_t now);
void px__fiber_park_finish(px_fiber *f);
/* C fiber f just left the CPU (parked or yielded) and nothing ran since, but
** it cannot stay away (px__shared_keep failed): undoes the leave -- f runs
** next, and what it called returns `code`, a park as when a scope fired
** before it (nothing queued, its dereg run). */
void px__fiber_refuse(px_sched *s, px_fiber *f, int code);
/* px_park_with for the running fiber f, with the info already in f->park. */
int px__fiber_park(px_fiber *f);
/* px_park_info.flags bit of a shielded park, never a public one (px_park_with
** drops it): no scope bounds it and px_sched_cancel does not end it; only a
** px_wake does.  The blocking pool's wait for a job that the fiber may not
** abandon (io/pool.c), as trio's abandon_on_cancel=False. */
#define PX__FIBER_PARK_SHIELD 0x100u
/* px_park_with, shielded; `info`'s flags may add PX_PARK_OUTSIDE. */
int px__fiber_park_shielded(const px_park_info *info);
void px__fiber_discard(px_sched *s, px_fiber *f);
void px__fiber_end(px_sched *s, px_fiber *f);
void px__fiber_reap(px_sched *s, px_fiber *f);
/* The body of every C fiber (its context's entry); arg is its record. */
void px__fiber_main(void *arg);

/* shared.c: fibers on shared stacks (px_sched_opts.shared_stacks). */
/* realloc, unless a test put a failing one in its place. */
extern void *(*px__shared_realloc)(void *p, size_t n);
/* Puts new fiber f (its context not made) on one of s's shared stacks; 0 or
** PX_ENOMEM. */
int px__shared_place(px_sched *s, px_fiber *f);
/* Before the switch to f: makes its bytes resident on its shared stack
** (saving the resident's), and returns that stack. */
const px__stack *px__shared_enter(px_fiber *f);
/* f just left its shared stack (parked or yielded; not ended), and nothing
** ran since: makes its buffer fit the bytes it left there, so that saving
** them later needs no memory.  0, or PX_ENOMEM (the bytes are still there). */
int px__shared_keep(px_fiber *f);
/* Lets go of what f has on its shared stack: its bytes, its saved copy. */
void px__shared_release(px_fiber *f);
/* Gives s's shared stacks back to its pool. */
void px__shared_free(px_sched *s);

/* scope.c */
/* Fires the open scopes that are due (deadline passed, token cancelled) and
** returns the code of the innermost scope that fired, or 0. */
int px__scope_check(px_fiber *f);
void px__scope_close_all(px_fiber *f);
/* Opens sc, the caller's memory, as a scope of fiber f (not the running one:
** a group's member before its first turn) that `t` cancels; it closes with
** f's other scopes, at the latest when f ends, and is not freed then.  It is
** not among t's watchers, nor counted as a token scope: whoever cancels t
** interrupts f's park itself (group.c does, for all its members at once). */
void px__scope_open_on(px_fiber *f, px__scope *sc, px_token *t);
/* As px_scope_push_cancel for the running fiber f, but not counted as a
** token scope (px_group_scope_push): 0 or PX_ENOMEM. */
int px__scope_push_uncounted(px_fiber *f, px_token *t);
/* A token of fiber `id` was cancelled: interrupt it if it is parked under it. */
void px__scope_cancel_parked(px_sched *s, uint64_t id);

/* token.c */
/* 1 when `t` belongs to the parent of a fork: the child may only read it. */
int px__token_forked(const px_token *t);
void px__token_watch(px_token *t, px__scope *sc);
void px__token_unwatch(px_token *t, px__scope *sc);

/* waitq.c: a fiber that ends or is discarded lets go of its waits and holds. */
void px__waitq_fiber_ended(px_fiber *f, int discarding);

/* future.c: f's record is freed (px_fiber_release, px_sched_free): its
** future (px_fiber_future) goes with it. */
void px__future_fiber_freed(px_fiber *f);

/* group.c: the token of the group whose watch `sc` is was cancelled; called
** under the token's lock, on the canceller's thread (`here` its scheduler). */
void px__group_token_cancelled(px__scope *sc, px_sched *here);
/* group.c: 1 once g was cancelled (a failure, px_group_cancel, its waiter's
** scope), else 0. */
int px__group_cancelled(const px_group *g);
/* group.c: frees g now, or once its last member ended (px_map's group, its
** caller discarded while members are still to be). */
void px__group_abandon(px_group *g);

/* deadlock.c: writes the report; returns PX_EDEADLK. */
int px__deadlock_report(px_sched *s);

/* extra.c: what a fiber has only when asked for (a name, local values). */
/* The name of f, NULL when it has none. */
const char *px__extra_name(const px_fiber *f);
/* The name of live fiber `id` of s, NULL when it has none or is no such fiber
** (a holder a report or a dump names by its id). */
const char *px__extra_name_of(px_sched *s, uint64_t id);
/* New fiber f, spawned by `parent` (NULL: not by a fiber), inherits what its
** parent's keys pass on (px_local_new's inherit). */
void px__extra_spawned(px_fiber *f, px_fiber *parent);
/* f ended, or is discarded with its scheduler: its values are destroyed and
** its slot is freed. */
void px__extra_ended(px_fiber *f);
/* Frees s's table of slots (px_sched_free, after every fiber went). */
void px__extra_free_all(px_sched *s);

/* dump.c: reads PARATAXIS_DUMP_SIGNAL, once per process (px_sched_new). */
void px__dump_read_env(void);

/* Fiber f's number: the low bits of its id. */
static inline uint64_t px__fiber_number(uint64_t id)
{
    return id & ((UINT64_C(1) << PX__FIBER_ID_SHIFT) - 1);
}

/* A trace line for fiber f (base/trace.h), with its number and name. */
#define PX__FIBER_TRACE(f, event, detail) \
    do { \
        if (px__trace_on) \
            px__trace(px__fiber_number((f)->id), px__extra_name(f), (event), (detail)); \
    } while (0)

#endif /* PX__FIBER_FIBER_H */
