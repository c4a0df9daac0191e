/*
** pxlua_fiber.c -- Lua fibers: each fiber is a coroutine run as a hosted fiber
** (px_spawn_hosted, suspend NULL) of a C scheduler that px.run makes and runs
** on the calling thread.
**
** The scheduler resumes a fiber with lua_resume of its coroutine (host_resume).
** A call that may wait is a lua_CFunction: when the engine answers PX_EYIELD the
** park is recorded, and the function ends in lua_yieldk; once the scheduler
** resumes the coroutine, the continuation collects the outcome -- it calls the
** same px function again (a sync wait, a join), reads px_park_result (a sleep),
** or just returns (a yield).  A yield that is not ours (a plain coroutine.yield
** at the fiber's own level) reaches host_resume the same way and counts as a
** px.yield: the engine takes a resume that returns without a park for a yield.
**
** The Lua state is touched only on the thread that runs px.run, from inside it:
** the C scheduler calls host_resume and host_release there.  Coroutines are kept
** alive by their fiber's userdata, which the run's keep table holds for as long
** as the engine may resume it.  A fiber that returned at most one value leaves it in
** its userdata and gives its coroutine to the run's pool of idle ones, on which
** a later fiber starts (Lua can start a function on a coroutine that returned);
** other results stay on the ended coroutine's stack, for every join.
**
** Structured concurrency is bound here too, for it needs the fibers: px.select
** (px_select over an array that stays put while the fiber is parked), futures
** (the C future carries the settlement, the Lua value stays in the Future),
** a Fiber as a future (its end settles one), and groups, whose members are
** hosted fibers spawned with px_group_spawn_hosted that report their own
** failures (px_group_fail) as host_resume sees them end.
**
** Errors are tables {code = "ETIMEDOUT", message = "..."} with a __tostring.
** Waits interrupted by a scope and misuse raise them; outcomes a caller handles
** (EOWNERDEAD, EBUSY of a try form, ECLOSED of a channel) are returned.
*/
#include <lauxlib.h>
#include <lua.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <lualib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parataxis.h"
#include "pxhost.h"
#include "pxlua_exec.h"
#include "pxlua_fiber.h"
#include "pxlua_io.h"
#include "pxlua_sigint.h"

#define ERROR_MT "parataxis.Error"
#define FIBER_MT "parataxis.Fiber"
#define TOKEN_MT "parataxis.Token"
#define MUTEX_MT "parataxis.Mutex"
#define RWLOCK_MT "parataxis.RwLock"
#define WAITGROUP_MT "parataxis.WaitGroup"
#define BARRIER_MT "parataxis.Barrier"
#define ONCE_MT "parataxis.Once"
#define SEM_MT "parataxis.Semaphore"
#define EVENT_MT "parataxis.Event"
#define CHAN_MT "parataxis.Channel"
#define SELECT_CASE_MT "parataxis.SelectCase"
#define FUTURE_MT "parataxis.Future"
#define GROUP_MT "parataxis.Group"

/* The failure status of a future or a group member that a Lua value failed:
** the value itself stays on the Lua side (the Future's uservalue, the
** Group's list of failures).  Positive, so no PX_E* code is mistaken for it. */
enum { PXLUA_FAILED = 0x4c7561 };

/* -- Errors --------------------------------------------------------------- */

/* Pushes an error object with `code` and the message on top of the stack. */
static void push_error_msg(lua_State *L, int rc)
{
    lua_createtable(L, 0, 2);
    lua_pushstring(L, px_errname(rc));
    lua_setfield(L, -2, "code");
    lua_rotate(L, -2, 1);
    lua_setfield(L, -2, "message");
    luaL_setmetatable(L, ERROR_MT);
}

/* Pushes the error object "<where>: <what the code means>". */
static void push_error(lua_State *L, int rc, const char *where)
{
    lua_pushfstring(L, "%s: %s", where, px_strerror(rc));
    push_error_msg(L, rc);
}

static int raise_code(lua_State *L, int rc, const char *where)
{
    push_error(L, rc, where);
    return lua_error(L);
}

/* Raises an EINVAL error object naming the function and the argument. */
static int arg_error(lua_State *L, const char *where, int arg, const char *name,
                     const char *expected)
{
    lua_pushfstring(L, "%s: bad argument #%d (%s): %s expected, got %s", where, arg,
                    name, expected, luaL_typename(L, arg));
    push_error_msg(L, PX_EINVAL);
    return lua_error(L);
}

static int error_tostring(lua_State *L)
{
    lua_getfield(L, 1, "code");
    lua_getfield(L, 1, "message");
    lua_pushfstring(L, "%s (%s)", luaL_optstring(L, 3, "?"), luaL_optstring(L, 2, "?"));
    return 1;
}

/* A Lua error raised from C: an error object, or a string for the rest. */
static void *check_ud(lua_State *L, int arg, const char *mt, const char *where)
{
    void *p = luaL_testudata(L, arg, mt);
    if (p == NULL)
        arg_error(L, where, arg, arg == 1 ? "self" : "object", mt);
    return p;
}

static int64_t check_seconds(lua_State *L, int arg, const char *where)
{
    if (lua_type(L, arg) != LUA_TNUMBER)
        arg_error(L, where, arg, "seconds", "a number >= 0");
    int64_t ns;
    if (pxhost_ns(lua_tonumber(L, arg), &ns) != 0)   /* 2^63 ns or more: never */
        arg_error(L, where, arg, "seconds", "a number >= 0");
    return ns;
}

static void check_callable(lua_State *L, int arg, const char *where)
{
    if (lua_type(L, arg) == LUA_TFUNCTION)
        return;
    if (luaL_getmetafield(L, arg, "__call") != LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    arg_error(L, where, arg, "fn", "a function");
}

/* -- Runs and fibers -------------------------------------------------------- */

enum { F_LIVE, F_OK, F_ERROR };

/* A Fiber's uservalues: its coroutine (or its one result), the Future its end
** settles (made when the fiber is first waited for as a future), the Group
** it is a member of. */
enum { FIBER_CO = 1, FIBER_FUTURE, FIBER_GROUP, FIBER_NUV = FIBER_GROUP };

typedef struct lrun lrun;

/* A px.group(): the C group, and the token of the scope the body of
** px.group(fn) runs in, cancelled with the group by this binding. */
typedef struct lgroup {
    px_group *g;             /* freed by the collector: another thread may cancel
                                it until then */
    px_token *tok;
    int cancelled;           /* this binding cancelled it (or saw it refuse a spawn) */
    int waited;              /* px_group_wait returned */
    uint64_t run;            /* the serial of its run */
} lgroup;

typedef struct lfiber {
    lrun *run;               /* NULL once its run is over */
    px_fiber *h;             /* NULL once released, or the run is over */
    lua_State *co;           /* its coroutine, the fiber's uservalue 1; NULL once
                                given back to the pool (see pool_put) */
    uint64_t id;
    int ref;                 /* its key in the run's keep table while the engine has it */
    int nargs;               /* passed to the first resume */
    int state, nres;         /* F_*; results at the top of co once ended, or
                                (co NULL) nres <= 1 of them in uservalue 1 */
    int joined;              /* its error was seen by a join */
    int named;               /* it has had a name set: its own, or the default one
                                (name_default), which is set only when something
                                shows it (f:name(), px.dump, a deadlock report) */
    void *slot;              /* where a parked channel recv gets its key */
    px_future *fu;           /* what its end settles (FIBER_FUTURE), or NULL */
    lgroup *group;           /* the group it is a member of (FIBER_GROUP), or NULL */
    struct lfiber *prev, *next;   /* in run->fibers while h is live */
} lfiber;

struct lrun {
    lua_State *L;            /* the thread that called px.run */
    uint64_t serial;         /* which run of this thread (a group's run) */
    px_sched *s;
    lfiber *current;         /* the fiber host_resume is running */
    lfiber *mainf;           /* px.run's main */
    lfiber fibers;           /* list head */
    char *report;            /* the deadlock report, if any */
    int sigint;              /* it has SIGINT (pxlua_sigint.c) */
    int interrupted;         /* a SIGINT cancelled it */
    int keep;                /* registry ref to the keep table: the idle
                                coroutines at 1..nidle, the fibers the engine
                                has at keys above POOL_MAX */
    int nidle, nkeys;        /* fiber keys used: POOL_MAX + 1..nkeys */
    int *freekeys;           /* keys given back, for reuse */
    size_t nfree, capfree;
};

/* Idle coroutines a run keeps for later fibers: a new coroutine, and the
** collection of the last one, cost more than the rest of a spawn. */
enum { POOL_MAX = 64 };

/* The Fiber metatable's key in the registry besides FIBER_MT: a light
** userdata key is found without hashing and comparing a name. */
static const char fiber_mt = 0;

/* The run under way on this thread: px.run does not nest. */
static _Thread_local lrun *cur_run;
static _Thread_local uint64_t runs;      /* the serial of the last run begun */

/* The Lua state the engine's callbacks into Lua (a fiber-local value's
** destroy and inherit, describe) run on: the running coroutine while a C
** function of ours calls into the engine (a spawn, key:set, px.dump), else
** the thread that runs px.run -- the running one while the scheduler has the
** CPU.  in_cb counts the fiber-local callbacks under way: they may not wait
** nor spawn. */
static _Thread_local lua_State *cb_L;
static _Thread_local int in_cb;

static void name_default(lfiber *f);

static void link_fiber(lrun *r, lfiber *f)
{
    f->prev = r->fibers.prev;
    f->next = &r->fibers;
    f->prev->next = f;
    r->fibers.prev = f;
}

static void unlink_fiber(lfiber *f)
{
    if (f->next == NULL)
        return;
    f->prev->next = f->next;
    f->next->prev = f->prev;
    f->prev = f->next = NULL;
}

/*
** A fiber that ended with at most one result gives its coroutine back: the
** result takes the coroutine's place as the Fiber's uservalue, and the empty
** coroutine goes to the pool, where a later spawn starts its body on it (Lua
** starts a function pushed on the empty stack of a coroutine that returned).
** Runs on r->L, from host_resume.
*/
static void pool_put(lrun *r, lfiber *f, int nres)
{
    lua_State *L = r->L;
    if (nres > 1 || r->nidle == POOL_MAX)
        return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, r->keep);
    lua_rawgeti(L, -1, f->ref);
    lua_getiuservalue(L, -1, 1);             /* keep fiber co */
    lua_rawseti(L, -3, ++r->nidle);
    if (nres == 1)
        lua_xmove(f->co, L, 1);
    else
        lua_pushnil(L);
    lua_setiuservalue(L, -2, 1);
    lua_pop(L, 2);
    lua_settop(f->co, 0);
    f->co = NULL;
}

/* Ctrl-C: every fiber of the run is cancelled, as after an error in main;
** px.run then raises "interrupted!".  The interpreter's hook goes first: the
** unwinding calls Lua on r->L (pxlua_sigint_disarm).  Each time: a host whose
** handler does not end the process may set it again at a second signal. */
static void interrupt(lrun *r)
{
    pxlua_sigint_disarm();
    if (r->interrupted)
        return;
    r->interrupted = 1;
    (void)px_sched_cancel(r->s);
    pxlua_exec_cancelled();
}

/* Posted by the on_wait hook once a SIGINT ended a wait in the kernel. */
static void *interrupt_fiber(void *arg)
{
    interrupt(arg);
    return NULL;
}

static void on_wait(void *ctx, int entering)
{
    lrun *r = ctx;
    (void)entering;
    if (r->sigint)
        pxlua_sigint_on_wait(r->s, interrupt_fiber, r);
}

/* Whether the value at idx of L is the module's error object with `code`. */
static int is_error_code(lua_State *L, int idx, const char *code)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx))
        return 0;
    luaL_getmetatable(L, ERROR_MT);
    int yes = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (!yes)
        return 0;
    lua_getfield(L, idx, "code");
    yes = lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), code) == 0;
    lua_pop(L, 1);
    return yes;
}

/* A failure of group g: the first cancels the body's scope too; each one's
** value, on top of L, joins the group's list (its uservalue 1) and is popped. */
static void group_failed(lua_State *L, lgroup *g, int gidx)
{
    g->cancelled = 1;
    (void)px_token_cancel(g->tok);
    if (lua_isnil(L, -1)) {                      /* error(nil): a list keeps no nil */
        lua_pop(L, 1);
        lua_pushliteral(L, "nil");
    }
    gidx = lua_absindex(L, gidx);
    lua_getiuservalue(L, gidx, 1);
    lua_rotate(L, -2, 1);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    lua_pop(L, 1);
}

/*
** Member f of a group ended with an error (on top of its coroutine): it
** reports it to the group (px_group_fail), as ECANCELED when it is the error
** object of a cancel -- which once the group is cancelled is no failure --
** and else as PXLUA_FAILED.  A failure's value goes to the group's list.
*/
static void member_failed(lrun *r, lfiber *f)
{
    lua_State *L = r->L;
    int status = is_error_code(f->co, -1, "ECANCELED") ? PX_ECANCELED : PXLUA_FAILED;
    if (px_group_fail(f->group->g, status) != 1)
        return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, r->keep);
    lua_rawgeti(L, -1, f->ref);
    lua_getiuservalue(L, -1, FIBER_GROUP);
    lua_pushvalue(f->co, -1);
    lua_xmove(f->co, L, 1);
    group_failed(L, f->group, -2);
    lua_pop(L, 3);
}

static int host_resume(void *ctx)
{
    lfiber *f = ctx;
    lrun *r = f->run;
    int nres = 0, nargs = f->nargs;
    f->nargs = 0;
    r->current = f;
    if (r->sigint)
        pxlua_sigint_running = f->co;
    int st = lua_resume(f->co, r->L, nargs, &nres);
    if (r->sigint) {
        pxlua_sigint_running = NULL;
        /* after the store: a signal before it hooked f->co and set the flag */
        if (pxlua_sigint_came) {
            pxlua_sigint_unhook(f->co);
            interrupt(r);
        }
    }
    if (st == LUA_YIELD) {
        /* ours yield no values; a plain coroutine.yield's are dropped */
        lua_pop(f->co, nres);
        r->current = NULL;
        return 0;
    }
    if (st == LUA_OK) {
        f->state = F_OK;
        f->nres = nres;
        pool_put(r, f, nres);
    } else {
        /* body() closed its to-be-closed variables already, unless a
        ** __close raised: those under it are closed here, while it is still
        ** the current fiber (the error object stays on top). */
#if LUA_VERSION_RELEASE_NUM >= 50406
        (void)lua_closethread(f->co, r->L);
#else
        (void)lua_resetthread(f->co);
#endif
        f->state = F_ERROR;
        f->nres = 1;
    }
    r->current = NULL;
    if (f->group != NULL && st != LUA_OK)
        member_failed(r, f);
    if (f->fu != NULL)
        (void)(st == LUA_OK ? px_future_set_result(f->fu, NULL)
                            : px_future_set_error(f->fu, PXLUA_FAILED));
    /* Its results are read from f alone: the handle is given up now, so no
    ** finalizer is needed (the engine frees the record once it reaped it). */
    px_fiber_release(f->h);
    f->h = NULL;
    unlink_fiber(f);
    /* An error in main unwinds the whole program: every wait ends. */
    if (st != LUA_OK && f == r->mainf) {
        (void)px_sched_cancel(r->s);
        pxlua_exec_cancelled();     /* and waits for no timer */
    }
    return PX_HOST_DONE;
}

/* The engine let go of f: so does the keep table (and its key is free). */
static void host_release(void *ctx)
{
    lfiber *f = ctx;
    lrun *r = f->run;
    lua_State *L = r->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, r->keep);
    lua_pushnil(L);
    lua_rawseti(L, -2, f->ref);
    lua_pop(L, 1);
    if (r->nfree == r->capfree) {
        size_t cap = r->capfree ? 2 * r->capfree : 64;
        int *k = realloc(r->freekeys, cap * sizeof *k);
        if (k != NULL) {                     /* else the key is not reused */
            r->freekeys = k;
            r->capfree = cap;
        }
    }
    if (r->nfree < r->capfree)
        r->freekeys[r->nfree++] = f->ref;
    f->ref = LUA_NOREF;
}

static const px_host_ops HOST_OPS = { host_resume, NULL, host_release };

/*
** Every fiber's coroutine starts here, with the fiber's function and its
** arguments: it calls them under lua_pcallk, so that an error ending the body
** closes its to-be-closed variables inside the coroutine, where their
** __close may wait (Lua closes them yieldably while it recovers a pcallk, as
** under a Lua pcall), and then raises on, unchanged.  Closed by host_resume
** instead, once lua_resume returned, they could not yield.
*/
static int body_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)ctx;
    if (status != LUA_OK && status != LUA_YIELD)
        return lua_error(L);                 /* the error object is on top */
    return lua_gettop(L);                    /* the results */
}

static int body(lua_State *L)
{
    return body_k(L, lua_pcallk(L, lua_gettop(L) - 1, LUA_MULTRET, 0, 0, body_k), 0);
}

/*
** Replaces fn and its arguments, at base..top, by a new fiber's userdata at
** base, and spawns it on r -- as a member of the Group at gidx (below base)
** unless gidx is 0.  NULL when the engine cannot, with *rc saying why: no
** memory, or px_group_spawn_hosted's refusal.
*/
static lfiber *spawn_at(lua_State *L, lrun *r, int base, int gidx, int *rc)
{
    int nargs = lua_gettop(L) - base;
    lfiber *f = lua_newuserdatauv(L, sizeof *f, FIBER_NUV);
    memset(f, 0, sizeof *f);
    f->ref = LUA_NOREF;
    *rc = PX_ENOMEM;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &fiber_mt);
    lua_setmetatable(L, -2);
    if (gidx != 0) {
        lua_pushvalue(L, gidx);
        lua_setiuservalue(L, -2, FIBER_GROUP);
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, r->keep);
    lua_State *co;
    if (r->nidle > 0) {
        lua_rawgeti(L, -1, r->nidle);
        co = lua_tothread(L, -1);
        lua_pushnil(L);
        lua_rawseti(L, -3, r->nidle--);
    } else {
        co = lua_newthread(L);
    }
    lua_setiuservalue(L, -3, 1);
    lua_rotate(L, base, 2);                  /* fiber keep fn args... */
    if (!lua_checkstack(co, nargs + 2 + LUA_MINSTACK))
        return NULL;
    lua_pushcfunction(co, body);             /* body(fn, args...) */
    lua_xmove(L, co, nargs + 1);
    f->co = co;
    f->nargs = nargs + 1;
    f->run = r;
    lua_State *cb = cb_L;
    cb_L = L;                                /* a fiber-local value's inherit */
    if (gidx != 0) {
        f->group = lua_touserdata(L, gidx);
        *rc = px_group_spawn_hosted(f->group->g, &HOST_OPS, f, &f->h);
    } else {
        f->h = px_spawn_hosted(r->s, &HOST_OPS, f);
        *rc = f->h != NULL ? 0 : PX_ENOMEM;
    }
    cb_L = cb;
    if (f->h == NULL) {
        f->run = NULL;
        f->group = NULL;
        lua_pop(L, 1);
        return NULL;
    }
    f->ref = r->nfree > 0 ? r->freekeys[--r->nfree] : POOL_MAX + ++r->nkeys;
    lua_pushvalue(L, base);
    lua_rawseti(L, -2, f->ref);
    lua_pop(L, 1);                           /* the keep table */
    f->id = px_fiber_id(f->h);
    link_fiber(r, f);
    return f;
}

/* Pushes an ended fiber's results, or raises its error; its Fiber is at 1. */
static int push_results(lua_State *L, lfiber *f)
{
    if (f->co == NULL) {                     /* see pool_put */
        if (f->nres == 1)
            lua_getiuservalue(L, 1, 1);
        return f->nres;
    }
    int top = lua_gettop(f->co);
    if (f->state == F_ERROR) {
        f->joined = 1;
        lua_pushvalue(f->co, top);
        lua_xmove(f->co, L, 1);
        return lua_error(L);
    }
    if (!lua_checkstack(L, f->nres + LUA_MINSTACK))
        raise_code(L, PX_ENOMEM, "fiber:join");
    for (int i = top - f->nres + 1; i <= top; i++)
        lua_pushvalue(f->co, i);
    lua_xmove(f->co, L, f->nres);
    return f->nres;
}

/*
** The deadlock report, kept for px.run's error.  A fiber gets its default
** name only when something shows it (naming each at its spawn, or at its
** first wait, costs a third of a spawn and join): here every fiber not named
** yet is, and the report, which the engine wrote before, gets the names of
** those it printed as a bare `fiber N`.
*/
static const char *name_of_number(lrun *r, uint64_t number)
{
    for (lfiber *f = r->fibers.next; f != &r->fibers; f = f->next)
        if (px_fiber_number(f->id) == number)
            return px_fiber_name(f->id);
    return NULL;
}

static void on_deadlock(void *ctx, const char *report)
{
    lrun *r = ctx;
    for (lfiber *f = r->fibers.next; f != &r->fibers; f = f->next)
        if (!f->named)
            name_default(f);
    size_t len = strlen(report), cap = len + 1 + 64, n = 0;
    char *out = malloc(cap);
    for (const char *p = report; out != NULL && *p != '\0'; ) {
        const char *name = NULL, *q = p;
        if (strncmp(p, "fiber ", 6) == 0 && p[6] >= '0' && p[6] <= '9' &&
            (p == report || p[-1] == ' ' || p[-1] == '\n')) {
            uint64_t number = 0;
            for (q = p + 6; *q >= '0' && *q <= '9'; q++)
                number = number * 10 + (uint64_t)(*q - '0');
            if (strncmp(q, " \"", 2) != 0)
                name = name_of_number(r, number);
        } else {
            q = p + 1;
        }
        size_t add = (size_t)(q - p) + (name != NULL ? strlen(name) + 3 : 0);
        if (n + add + 1 > cap) {
            cap = 2 * (n + add + 1);
            char *o = realloc(out, cap);
            if (o == NULL) {
                free(out);
                out = NULL;
                break;
            }
            out = o;
        }
        memcpy(out + n, p, (size_t)(q - p));
        n += (size_t)(q - p);
        if (name != NULL)
            n += (size_t)sprintf(out + n, " \"%s\"", name);
        p = q;
    }
    if (out != NULL)
        out[n] = '\0';
    else if ((out = malloc(len + 1)) != NULL)
        memcpy(out, report, len + 1);
    free(r->report);
    r->report = out;
}

/* Ends a run: frees the scheduler, forgets every handle of it, frees what
** the collector found busy (pxhost.h: kept until a run of the thread ends). */
static void end_run(lrun *r)
{
    cur_run = NULL;
    px_sched_free(r->s);
    for (lfiber *f = r->fibers.next; f != &r->fibers; ) {
        lfiber *next = f->next;
        f->h = NULL;
        f->run = NULL;
        f->prev = f->next = NULL;
        f = next;
    }
    r->fibers.next = r->fibers.prev = &r->fibers;
    (void)pxhost_sweep();
    free(r->freekeys);
    luaL_unref(r->L, LUA_REGISTRYINDEX, r->keep);
}

static size_t describe(void *ctx, uint64_t id, void *host_ctx, char *buf, size_t cap);

/* px.run(main, ...): main's results; re-raises its error; EDEADLK with the
** report.  px.run_with's C half is the same with a clock (fibers.lua checks
** the options): _run_with(clock, main, ...). */
static int run_at(lua_State *L, int clock);
static int l_run(lua_State *L) { return run_at(L, PX_CLOCK_REAL); }
static int l_run_with(lua_State *L)
{
    int clock = (int)luaL_checkinteger(L, 1);
    lua_remove(L, 1);
    return run_at(L, clock);
}

static int run_at(lua_State *L, int clock)
{
    check_callable(L, 1, "px.run");
    if (cur_run != NULL || px_self() != 0)
        return raise_code(L, PX_EBUSY, "px.run: a run is under way on this thread");
    lrun r;
    memset(&r, 0, sizeof r);
    r.L = L;
    r.serial = ++runs;
    r.fibers.next = r.fibers.prev = &r.fibers;
    px_sched_opts o;
    memset(&o, 0, sizeof o);
    o.on_deadlock = on_deadlock;
    o.on_deadlock_ctx = &r;
    o.on_wait = on_wait;
    o.on_wait_ctx = &r;
    o.clock = clock;
    o.describe = describe;
    o.describe_ctx = &r;
    r.s = px_sched_new(&o);
    if (r.s == NULL)
        return raise_code(L, clock != PX_CLOCK_REAL && clock != PX_CLOCK_VIRTUAL
                                 ? PX_EINVAL : PX_ENOMEM, "px.run");
    lua_createtable(L, POOL_MAX, 0);
    r.keep = luaL_ref(L, LUA_REGISTRYINDEX);
    int rc;
    lfiber *mainf = r.mainf = spawn_at(L, &r, 1, 0, &rc);
    if (mainf == NULL) {
        luaL_unref(L, LUA_REGISTRYINDEX, r.keep);
        px_sched_free(r.s);
        return raise_code(L, PX_ENOMEM, "px.run");
    }
    cur_run = &r;
    lua_State *cb = cb_L;
    cb_L = L;                        /* fiber-local values end on this thread */
    r.sigint = pxlua_sigint_begin(L, r.s);
    rc = px_sched_run(r.s);
    if (rc == PX_EDEADLK) {
        /* Unwind: every parked fiber gets ECANCELED and cleans up. */
        (void)px_sched_cancel(r.s);
        pxlua_exec_cancelled();
        if (px_sched_run(r.s) != 0)
            rc = PX_EDEADLK;
    }
    /* Handler calls posted to px.scheduler() and not started yet run first. */
    while (!pxlua_exec_close(L, 0))
        if (px_sched_run(r.s) != 0)
            (void)pxlua_exec_close(L, 1);
    int interrupted = r.sigint && pxlua_sigint_end();
    char *report = r.report;
    end_run(&r);
    cb_L = cb;
    if (interrupted) {
        free(report);
        return luaL_error(L, "interrupted!");   /* as the interpreter says it */
    }
    if (rc == PX_EDEADLK) {
        lua_pushstring(L, report != NULL ? report : "deadlock");
        free(report);
        push_error_msg(L, PX_EDEADLK);
        return lua_error(L);
    }
    free(report);
    if (rc != 0)
        return raise_code(L, rc, "px.run");
    if (mainf->state == F_LIVE)
        return raise_code(L, PX_EDEADLK, "px.run: main never ended");
    return push_results(L, mainf);
}

/* For pxlua_exec.c (pxlua_exec.h). */
lua_State *pxlua_run_state(void) { return cur_run != NULL ? cur_run->L : NULL; }
px_sched *pxlua_run_sched(void) { return cur_run != NULL ? cur_run->s : NULL; }

void pxlua_run_see_sigint(void)
{
    lrun *r = cur_run;
    if (r != NULL && r->sigint && pxlua_sigint_came)
        interrupt(r);
}

int pxlua_spawn(lua_State *L, int base)
{
    if (cur_run == NULL)
        return PX_ENOFIBER;
    int rc;
    return spawn_at(L, cur_run, base, 0, &rc) != NULL ? 0 : rc;
}

static lrun *need_run(lua_State *L, const char *where)
{
    lrun *r = cur_run;
    if (r == NULL)
        raise_code(L, PX_ENOFIBER, where);
    if (in_cb) {
        lua_pushfstring(L, "%s: cannot spawn in a fiber-local value's inherit or "
                        "destroy function", where);
        push_error_msg(L, PX_EPERM);
        lua_error(L);
    }
    return r;
}

static int l_spawn(lua_State *L)
{
    check_callable(L, 1, "px.spawn");
    lrun *r = need_run(L, "px.spawn");
    int rc;
    if (spawn_at(L, r, 1, 0, &rc) == NULL)
        return raise_code(L, rc, "px.spawn");
    return 1;
}

static int l_self(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)px_self());
    return 1;
}

/* -- Waiting ----------------------------------------------------------------- */

/* A call that may wait (pxlua_fiber.h, where pxlua_io.c finds it too). */
typedef pxlua_wait_op wait_op;

/* Only the fiber's own coroutine may wait, and only where it can yield. */
static void check_waitable(lua_State *L, const char *where)
{
    lrun *r = cur_run;
    if (in_cb) {
        lua_pushfstring(L, "%s: cannot wait in a fiber-local value's inherit or "
                        "destroy function", where);
        push_error_msg(L, PX_ENOFIBER);
        lua_error(L);
    }
    if (r == NULL || r->current == NULL)
        return;                      /* off-fiber: the px call says ENOFIBER */
    if (r->current->co != L) {
        lua_pushfstring(L, "%s: called from a coroutine inside a fiber; only the "
                        "fiber's own coroutine can wait", where);
        push_error_msg(L, PX_ENOFIBER);
        lua_error(L);
    }
    if (!lua_isyieldable(L)) {
        lua_pushfstring(L, "%s: cannot wait here (inside a metamethod or a C call "
                        "that Lua cannot yield across)", where);
        push_error_msg(L, PX_ENOFIBER);
        lua_error(L);
    }
}

static int wait_k(lua_State *L, int status, lua_KContext ctx);

static int wait_yield(lua_State *L, const wait_op *op)
{
    return lua_yieldk(L, 0, (lua_KContext)(intptr_t)op, wait_k);
}

static int wait_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    const wait_op *op = (const wait_op *)(intptr_t)ctx;
    lrun *r = cur_run;
    if (r == NULL || r->current == NULL || r->current->co != L) {
        lua_pushfstring(L, "%s: a parked fiber's coroutine was resumed by something "
                        "other than its scheduler", op->name);
        push_error_msg(L, PX_EPERM);
        return lua_error(L);
    }
    int rc = op->again(L);
    if (rc == PX_EYIELD)             /* a stray wake: it parked again */
        return wait_yield(L, op);
    return op->done(L, rc, op->name);
}

static int wait_run(lua_State *L, const wait_op *op)
{
    check_waitable(L, op->name);
    int rc = op->call(L);
    if (rc == PX_EYIELD)
        return wait_yield(L, op);
    return op->done(L, rc, op->name);
}

/* For the binding's other native files (pxlua_fiber.h). */
int pxlua_wait(lua_State *L, const pxlua_wait_op *op) { return wait_run(L, op); }
void pxlua_push_error(lua_State *L, int rc, const char *where) { push_error(L, rc, where); }
int pxlua_raise(lua_State *L, int rc, const char *where) { return raise_code(L, rc, where); }
int pxlua_arg_error(lua_State *L, const char *where, int arg, const char *name,
                    const char *expected)
{
    return arg_error(L, where, arg, name, expected);
}

static int done_nothing(lua_State *L, int rc, const char *name)
{
    if (rc != 0)
        return raise_code(L, rc, name);
    return 0;
}

static int done_true(lua_State *L, int rc, const char *name)
{
    if (rc != 0)
        return raise_code(L, rc, name);
    lua_pushboolean(L, 1);
    return 1;
}

/* Acquired (true), plus the EOWNERDEAD error when a dead owner left it. */
static int done_lock(lua_State *L, int rc, const char *name)
{
    if (rc != 0 && rc != PX_EOWNERDEAD)
        return raise_code(L, rc, name);
    lua_pushboolean(L, 1);
    if (rc == 0)
        return 1;
    push_error(L, rc, name);
    return 2;
}

/* A try form: as done_lock, or nil, err (EBUSY) where the wait would park. */
static int try_outcome(lua_State *L, int rc, const char *name)
{
    if (rc == PX_EBUSY) {
        lua_pushnil(L);
        push_error(L, rc, name);
        return 2;
    }
    return done_lock(L, rc, name);
}

static int park_result(lua_State *L) { (void)L; return px_park_result(); }
static int zero(lua_State *L) { (void)L; return 0; }

static int sleep_call(lua_State *L) { return px_sleep(check_seconds(L, 1, "px.sleep")); }
static const wait_op SLEEP = { "px.sleep", sleep_call, park_result, done_nothing };
static int l_sleep(lua_State *L)
{
    (void)check_seconds(L, 1, "px.sleep");
    return wait_run(L, &SLEEP);
}

static int yield_call(lua_State *L) { (void)L; return px_yield(); }
static const wait_op YIELD = { "px.yield", yield_call, zero, done_nothing };
static int l_yield(lua_State *L) { return wait_run(L, &YIELD); }

/* The bare px_yield status, for the benchmark of a Lua-side yield. */
static int l_yield_status(lua_State *L)
{
    lua_pushinteger(L, px_yield());
    return 1;
}

static int join_call(lua_State *L)
{
    lfiber *f = lua_touserdata(L, 1);
    return f->state != F_LIVE ? 0 : px_join(f->h, NULL);
}
/* The re-call: px_join's, or, once the fiber ended (its handle given up at
** its end), the park's own outcome -- an interrupt that came before the end
** is reported, as px_join reports it. */
static int join_again(lua_State *L)
{
    lfiber *f = lua_touserdata(L, 1);
    return f->state != F_LIVE ? px_park_result() : px_join(f->h, NULL);
}
static int join_done(lua_State *L, int rc, const char *name)
{
    if (rc != 0)
        return raise_code(L, rc, name);
    return push_results(L, lua_touserdata(L, 1));
}
static const wait_op JOIN = { "fiber:join", join_call, join_again, join_done };

/* The Fiber at 1 (check_ud's test, with the metatable found by its key). */
static lfiber *check_fiber(lua_State *L, const char *where)
{
    lfiber *f = lua_touserdata(L, 1);
    if (f != NULL && lua_getmetatable(L, 1)) {
        lua_rawgetp(L, LUA_REGISTRYINDEX, &fiber_mt);
        int same = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
        if (same)
            return f;
    }
    return check_ud(L, 1, FIBER_MT, where);
}

static int fiber_join(lua_State *L)
{
    lfiber *f = check_fiber(L, "fiber:join");
    lua_settop(L, 1);
    if (f->state != F_LIVE)
        return push_results(L, f);
    if (f->h == NULL || f->run != cur_run)
        return raise_code(L, PX_EINVAL, "fiber:join: the fiber's run is over");
    return wait_run(L, &JOIN);
}

static int fiber_id(lua_State *L)
{
    lfiber *f = check_fiber(L, "fiber:id");
    lua_pushinteger(L, (lua_Integer)f->id);
    return 1;
}

static int fiber_done(lua_State *L)
{
    lfiber *f = check_fiber(L, "fiber:done");
    lua_pushboolean(L, f->state != F_LIVE);
    return 1;
}

static int fiber_tostring(lua_State *L)
{
    lfiber *f = check_fiber(L, "fiber:__tostring");   /* called by hand, on anything */
    lua_pushfstring(L, "parataxis.Fiber %I (%s)", (lua_Integer)f->id,
                    f->state == F_LIVE ? "live" : f->state == F_OK ? "ended" : "failed");
    return 1;
}

/* -- Scopes and tokens --------------------------------------------------------- */

static int l_push_timeout(lua_State *L)
{
    int rc = px_scope_push_timeout(check_seconds(L, 1, "px.timeout"));
    if (rc != 0)
        return raise_code(L, rc, "px.timeout");
    return 0;
}

typedef struct ltoken { px_token *t; } ltoken;

static int l_push_cancel(lua_State *L)
{
    ltoken *t = check_ud(L, 1, TOKEN_MT, "px.with_cancel");
    int rc = px_scope_push_cancel(t->t);
    if (rc != 0)
        return raise_code(L, rc, "px.with_cancel");
    return 0;
}

/* Closes the innermost scope: nil when it never fired, else the code's name. */
static int l_pop(lua_State *L)
{
    int rc = px_scope_pop();
    if (rc == 0)
        return 0;
    if (rc != PX_ETIMEDOUT && rc != PX_ECANCELED)
        return raise_code(L, rc, "scope pop");
    lua_pushstring(L, px_errname(rc));
    return 1;
}

static int l_token(lua_State *L)
{
    ltoken *t = lua_newuserdatauv(L, sizeof *t, 0);
    t->t = NULL;
    luaL_setmetatable(L, TOKEN_MT);
    if ((t->t = px_token_new()) == NULL)
        return raise_code(L, PX_ENOMEM, "px.token");
    return 1;
}

static int token_cancel(lua_State *L)
{
    ltoken *t = check_ud(L, 1, TOKEN_MT, "token:cancel");
    int rc = px_token_cancel(t->t);
    if (rc < 0)
        return raise_code(L, rc, "token:cancel");
    lua_pushboolean(L, rc == 1);
    return 1;
}

static int token_cancelled(lua_State *L)
{
    ltoken *t = check_ud(L, 1, TOKEN_MT, "token:cancelled");
    lua_pushboolean(L, px_token_cancelled(t->t));
    return 1;
}

static int free_token(void *p) { px_token_free(p); return 0; }

static int token_gc(lua_State *L)
{
    ltoken *t = luaL_testudata(L, 1, TOKEN_MT);   /* see sync_gc */
    if (t == NULL || t->t == NULL)
        return 0;
    /* a scope of the run may still use it: free it once the run is over */
    pxhost_collect(free_token, t->t, cur_run != NULL);
    t->t = NULL;
    return 0;
}

/* -- The synchronization family ---------------------------------------------- */

/* Every sync object's userdata: the C object first. */
typedef struct lsync { void *p; } lsync;

static void *new_sync(lua_State *L, void *p, const char *mt, const char *where, int nuv)
{
    lsync *u = lua_newuserdatauv(L, sizeof *u, nuv);
    u->p = NULL;
    luaL_setmetatable(L, mt);
    if (p == NULL)
        raise_code(L, PX_ENOMEM, where);
    u->p = p;
    return p;
}

/* A collected object still held or waited on is freed once a run of this
** thread is over (pxhost.h).  A finalizer may be called by hand
** (getmetatable(m).__gc(v)): one given anything but its own kind of object
** does nothing. */
static int sync_gc(lua_State *L, const char *mt, int (*freefn)(void *))
{
    lsync *u = luaL_testudata(L, 1, mt);
    if (u == NULL || u->p == NULL)
        return 0;
    pxhost_collect(freefn, u->p, 0);
    u->p = NULL;
    return 0;
}

#define SELF(type, mt, where) ((type *)((lsync *)check_ud(L, 1, mt, where))->p)
#define ARG1(type) ((type *)((lsync *)lua_touserdata(L, 1))->p)

/* Mutex */
static int mutex_free(void *p) { return px_mutex_free(p); }
static int l_mutex(lua_State *L) { new_sync(L, px_mutex_new(), MUTEX_MT, "px.mutex", 0); return 1; }
static int mutex_lock_call(lua_State *L) { return px_mutex_lock(ARG1(px_mutex)); }
static const wait_op MUTEX_LOCK = { "mutex:lock", mutex_lock_call, mutex_lock_call, done_lock };
static int mutex_lock(lua_State *L)
{
    (void)SELF(px_mutex, MUTEX_MT, "mutex:lock");
    return wait_run(L, &MUTEX_LOCK);
}
static int mutex_trylock(lua_State *L)
{
    return try_outcome(L, px_mutex_trylock(SELF(px_mutex, MUTEX_MT, "mutex:trylock")),
                       "mutex:trylock");
}
static int mutex_unlock(lua_State *L)
{
    return done_nothing(L, px_mutex_unlock(SELF(px_mutex, MUTEX_MT, "mutex:unlock")),
                        "mutex:unlock");
}
static int mutex_owner(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)px_mutex_owner(SELF(px_mutex, MUTEX_MT, "mutex:owner")));
    return 1;
}
static int mutex_waiters(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)px_mutex_waiters(SELF(px_mutex, MUTEX_MT, "mutex:waiters")));
    return 1;
}
static int mutex_gc(lua_State *L) { return sync_gc(L, MUTEX_MT, mutex_free); }

/* RwLock */
static int rwlock_free(void *p) { return px_rwlock_free(p); }
static int l_rwlock(lua_State *L)
{
    new_sync(L, px_rwlock_new(), RWLOCK_MT, "px.rwlock", 0);
    return 1;
}
static int rdlock_call(lua_State *L) { return px_rwlock_rdlock(ARG1(px_rwlock)); }
static int wrlock_call(lua_State *L) { return px_rwlock_wrlock(ARG1(px_rwlock)); }
static const wait_op RDLOCK = { "rwlock:rdlock", rdlock_call, rdlock_call, done_lock };
static const wait_op WRLOCK = { "rwlock:wrlock", wrlock_call, wrlock_call, done_lock };
static int rwlock_rdlock(lua_State *L)
{
    (void)SELF(px_rwlock, RWLOCK_MT, "rwlock:rdlock");
    return wait_run(L, &RDLOCK);
}
static int rwlock_wrlock(lua_State *L)
{
    (void)SELF(px_rwlock, RWLOCK_MT, "rwlock:wrlock");
    return wait_run(L, &WRLOCK);
}
static int rwlock_tryrdlock(lua_State *L)
{
    return try_outcome(L, px_rwlock_tryrdlock(SELF(px_rwlock, RWLOCK_MT, "rwlock:tryrdlock")),
                       "rwlock:tryrdlock");
}
static int rwlock_trywrlock(lua_State *L)
{
    return try_outcome(L, px_rwlock_trywrlock(SELF(px_rwlock, RWLOCK_MT, "rwlock:trywrlock")),
                       "rwlock:trywrlock");
}
static int rwlock_rdunlock(lua_State *L)
{
    return done_nothing(L, px_rwlock_rdunlock(SELF(px_rwlock, RWLOCK_MT, "rwlock:rdunlock")),
                        "rwlock:rdunlock");
}
static int rwlock_wrunlock(lua_State *L)
{
    return done_nothing(L, px_rwlock_wrunlock(SELF(px_rwlock, RWLOCK_MT, "rwlock:wrunlock")),
                        "rwlock:wrunlock");
}
static int rwlock_readers(lua_State *L)
{
    lua_pushinteger(L,
                    (lua_Integer)px_rwlock_readers(SELF(px_rwlock, RWLOCK_MT, "rwlock:readers")));
    return 1;
}
static int rwlock_writer(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)px_rwlock_writer(SELF(px_rwlock, RWLOCK_MT, "rwlock:writer")));
    return 1;
}
static int rwlock_waiters(lua_State *L)
{
    lua_pushinteger(L,
                    (lua_Integer)px_rwlock_waiters(SELF(px_rwlock, RWLOCK_MT, "rwlock:waiters")));
    return 1;
}
static int rwlock_gc(lua_State *L) { return sync_gc(L, RWLOCK_MT, rwlock_free); }

/* WaitGroup */
static int waitgroup_free(void *p) { return px_waitgroup_free(p); }
static int l_waitgroup(lua_State *L)
{
    new_sync(L, px_waitgroup_new(), WAITGROUP_MT, "px.waitgroup", 0);
    return 1;
}
static int waitgroup_add(lua_State *L)
{
    px_waitgroup *wg = SELF(px_waitgroup, WAITGROUP_MT, "waitgroup:add");
    if (!lua_isnoneornil(L, 2) && !lua_isinteger(L, 2))
        return arg_error(L, "waitgroup:add", 2, "n", "an integer");
    int rc = px_waitgroup_add(wg, (int64_t)luaL_optinteger(L, 2, 1));
    if (rc == PX_ETHREAD)
        return raise_code(L, rc, "waitgroup:add");
    if (rc != 0) {
        lua_pushstring(L, "waitgroup:add: the count would go below zero or past its maximum");
        push_error_msg(L, rc);
        return lua_error(L);
    }
    return 0;
}
static int waitgroup_done(lua_State *L)
{
    int rc = px_waitgroup_done(SELF(px_waitgroup, WAITGROUP_MT, "waitgroup:done"));
    if (rc == PX_ETHREAD)
        return raise_code(L, rc, "waitgroup:done");
    if (rc != 0) {
        lua_pushstring(L, "waitgroup:done: the count is zero already");
        push_error_msg(L, rc);
        return lua_error(L);
    }
    return 0;
}
static int wg_wait_call(lua_State *L) { return px_waitgroup_wait(ARG1(px_waitgroup)); }
static const wait_op WG_WAIT = { "waitgroup:wait", wg_wait_call, wg_wait_call, done_true };
static int waitgroup_wait(lua_State *L)
{
    (void)SELF(px_waitgroup, WAITGROUP_MT, "waitgroup:wait");
    return wait_run(L, &WG_WAIT);
}
static int waitgroup_count(lua_State *L)
{
    lua_pushinteger(L,
                    (lua_Integer)px_waitgroup_count(SELF(px_waitgroup, WAITGROUP_MT,
                                                            "waitgroup:count")));
    return 1;
}
static int waitgroup_gc(lua_State *L) { return sync_gc(L, WAITGROUP_MT, waitgroup_free); }

/* Barrier */
static int barrier_free(void *p) { return px_barrier_free(p); }
static int l_barrier(lua_State *L)
{
    if (!lua_isinteger(L, 1) || lua_tointeger(L, 1) < 1)
        return arg_error(L, "px.barrier", 1, "n", "an integer >= 1");
    new_sync(L, px_barrier_new((size_t)lua_tointeger(L, 1)), BARRIER_MT, "px.barrier", 0);
    return 1;
}
static int arrive_call(lua_State *L) { return px_barrier_arrive_and_wait(ARG1(px_barrier)); }
static int arrive_done(lua_State *L, int rc, const char *name)
{
    if (rc < 0)
        return raise_code(L, rc, name);
    lua_pushboolean(L, rc == 1);
    return 1;
}
static const wait_op ARRIVE = { "barrier:arrive_and_wait", arrive_call, arrive_call, arrive_done };
static int barrier_arrive(lua_State *L)
{
    (void)SELF(px_barrier, BARRIER_MT, "barrier:arrive_and_wait");
    return wait_run(L, &ARRIVE);
}
static int barrier_phase(lua_State *L)
{
    lua_pushinteger(L,
                    (lua_Integer)px_barrier_phase(SELF(px_barrier, BARRIER_MT, "barrier:phase")));
    return 1;
}
static int barrier_waiting(lua_State *L)
{
    lua_pushinteger(L,
                    (lua_Integer)px_barrier_waiting(SELF(px_barrier, BARRIER_MT,
                                                            "barrier:waiting")));
    return 1;
}
static int barrier_gc(lua_State *L) { return sync_gc(L, BARRIER_MT, barrier_free); }

/* Once: the action runs in Lua, between begin and finish (fibers.lua). */
static int once_free(void *p) { return px_once_free(p); }
static int l_once(lua_State *L) { new_sync(L, px_once_new(), ONCE_MT, "px.once", 0); return 1; }
static int begin_call(lua_State *L) { return px_once_begin(ARG1(px_once)); }
static const wait_op BEGIN = { "once:call", begin_call, begin_call, arrive_done };
static int once_begin(lua_State *L)
{
    (void)SELF(px_once, ONCE_MT, "once:call");
    return wait_run(L, &BEGIN);
}
static int once_finish(lua_State *L)
{
    return done_nothing(L, px_once_end(SELF(px_once, ONCE_MT, "once:call")), "once:call");
}
static int once_done(lua_State *L)
{
    lua_pushboolean(L, px_once_done(SELF(px_once, ONCE_MT, "once:done")));
    return 1;
}
static int once_gc(lua_State *L) { return sync_gc(L, ONCE_MT, once_free); }

/* Semaphore */
static int sem_free(void *p) { return px_sem_free(p); }
static int l_semaphore(lua_State *L)
{
    if (!lua_isnoneornil(L, 1) && (!lua_isinteger(L, 1) || lua_tointeger(L, 1) < 0))
        return arg_error(L, "px.semaphore", 1, "n", "an integer >= 0");
    new_sync(L, px_sem_new((size_t)luaL_optinteger(L, 1, 1)), SEM_MT, "px.semaphore", 0);
    return 1;
}
static int acquire_call(lua_State *L) { return px_sem_acquire(ARG1(px_sem)); }
static const wait_op ACQUIRE = { "semaphore:acquire", acquire_call, acquire_call, done_true };
static int sem_acquire(lua_State *L)
{
    (void)SELF(px_sem, SEM_MT, "semaphore:acquire");
    return wait_run(L, &ACQUIRE);
}
static int sem_tryacquire(lua_State *L)
{
    return try_outcome(L, px_sem_tryacquire(SELF(px_sem, SEM_MT, "semaphore:tryacquire")),
                       "semaphore:tryacquire");
}
/* Lua's largest count is math.maxinteger, where C's is SIZE_MAX: a release
** past it is EINVAL, as C's past its own, so that value() can always say it. */
static int sem_release(lua_State *L)
{
    px_sem *s = SELF(px_sem, SEM_MT, "semaphore:release");
    int rc = px_sem_value(s) >= (size_t)LUA_MAXINTEGER ? PX_EINVAL : px_sem_release(s);
    return done_nothing(L, rc, "semaphore:release");
}
static int sem_value(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)px_sem_value(SELF(px_sem, SEM_MT, "semaphore:value")));
    return 1;
}
static int sem_waiters(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)px_sem_waiters(SELF(px_sem, SEM_MT, "semaphore:waiters")));
    return 1;
}
static int sem_gc(lua_State *L) { return sync_gc(L, SEM_MT, sem_free); }

/* Event */
static int event_free(void *p) { return px_event_free(p); }
static int l_event(lua_State *L) { new_sync(L, px_event_new(), EVENT_MT, "px.event", 0); return 1; }
static int event_set(lua_State *L)
{
    int n = px_event_set(SELF(px_event, EVENT_MT, "event:set"));
    if (n < 0)
        return raise_code(L, n, "event:set");   /* ETHREAD */
    lua_pushinteger(L, n);
    return 1;
}
static int event_clear(lua_State *L)
{
    (void)px_event_clear(SELF(px_event, EVENT_MT, "event:clear"));
    return 0;
}
static int event_is_set(lua_State *L)
{
    lua_pushboolean(L, px_event_is_set(SELF(px_event, EVENT_MT, "event:is_set")));
    return 1;
}
static int ev_wait_call(lua_State *L) { return px_event_wait(ARG1(px_event)); }
static const wait_op EV_WAIT = { "event:wait", ev_wait_call, ev_wait_call, done_true };
static int event_wait(lua_State *L)
{
    (void)SELF(px_event, EVENT_MT, "event:wait");
    return wait_run(L, &EV_WAIT);
}
static int event_gc(lua_State *L) { return sync_gc(L, EVENT_MT, event_free); }

/*
** Channel: the C channel carries integer keys; the values wait in the
** channel's uservalue table under their key, from send until a recv takes
** them.  nil cannot be sent (recv's nil means closed).
*/
typedef struct lchan { px_chan *ch; lua_Integer next; } lchan;

static int chan_free(void *p) { return px_chan_free(p); }
static int l_channel(lua_State *L)
{
    if (!lua_isnoneornil(L, 1) && (!lua_isinteger(L, 1) || lua_tointeger(L, 1) < 0))
        return arg_error(L, "px.channel", 1, "capacity", "an integer >= 0");
    size_t cap = (size_t)luaL_optinteger(L, 1, 0);   /* before the userdata takes index 1 */
    lchan *c = lua_newuserdatauv(L, sizeof *c, 1);
    c->ch = NULL;
    c->next = 1;
    luaL_setmetatable(L, CHAN_MT);
    lua_newtable(L);
    lua_setiuservalue(L, -2, 1);
    if ((c->ch = px_chan_new(cap)) == NULL)
        return raise_code(L, PX_ENOMEM, "px.channel");
    return 1;
}

/* Stores v (at 2) under a new key, pushed at 3. */
static void stash(lua_State *L, lchan *c)
{
    lua_settop(L, 2);
    lua_pushinteger(L, c->next++);
    lua_getiuservalue(L, 1, 1);
    lua_pushvalue(L, 3);
    lua_pushvalue(L, 2);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

static void unstash(lua_State *L)
{
    lua_getiuservalue(L, 1, 1);
    lua_pushvalue(L, 3);
    lua_pushnil(L);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

static int send_done(lua_State *L, int rc, const char *name)
{
    if (rc == 0) {
        lua_pushboolean(L, 1);
        return 1;
    }
    unstash(L);
    if (rc == PX_ECLOSED || rc == PX_EBUSY) {
        lua_pushnil(L);
        push_error(L, rc, name);
        return 2;
    }
    return raise_code(L, rc, name);
}

static int send_call(lua_State *L)
{
    return px_chan_send(((lchan *)lua_touserdata(L, 1))->ch,
                        (void *)(intptr_t)lua_tointeger(L, 3));
}
static const wait_op SEND = { "channel:send", send_call, send_call, send_done };

static lchan *check_send(lua_State *L, const char *where)
{
    lchan *c = check_ud(L, 1, CHAN_MT, where);
    if (lua_isnoneornil(L, 2))
        arg_error(L, where, 2, "value", "a value other than nil");
    stash(L, c);
    return c;
}

static int chan_send(lua_State *L)
{
    check_waitable(L, "channel:send");   /* before the value is stashed */
    (void)check_send(L, "channel:send");
    return wait_run(L, &SEND);
}

static int chan_trysend(lua_State *L)
{
    lchan *c = check_send(L, "channel:trysend");
    return send_done(L, px_chan_trysend(c->ch, (void *)(intptr_t)lua_tointeger(L, 3)),
                     "channel:trysend");
}

/* Pushes the value under `key` and drops it from the table. */
static int take_value(lua_State *L, void *key)
{
    lua_getiuservalue(L, 1, 1);
    lua_pushinteger(L, (lua_Integer)(intptr_t)key);
    lua_rawget(L, -2);
    lua_pushinteger(L, (lua_Integer)(intptr_t)key);
    lua_pushnil(L);
    lua_rawset(L, -4);
    return 1;
}

/*
** A parked recv's key is written at the hand-over, while the coroutine is
** suspended: into the fiber's own slot (a fiber waits on one thing at a time).
*/
static void **recv_slot(void)
{
    static _Thread_local void *off_fiber;
    lrun *r = cur_run;
    return r != NULL && r->current != NULL ? &r->current->slot : &off_fiber;
}

static int recv_call(lua_State *L)
{
    return px_chan_recv(((lchan *)lua_touserdata(L, 1))->ch, recv_slot());
}
static int recv_outcome(lua_State *L, int rc, const char *name, void *key)
{
    if (rc == 0)
        return take_value(L, key);
    if (rc == PX_ECLOSED || rc == PX_EBUSY) {
        lua_pushnil(L);
        push_error(L, rc, name);
        return 2;
    }
    return raise_code(L, rc, name);
}
static int recv_done(lua_State *L, int rc, const char *name)
{
    return recv_outcome(L, rc, name, *recv_slot());
}
static const wait_op RECV = { "channel:recv", recv_call, recv_call, recv_done };

static int chan_recv(lua_State *L)
{
    (void)check_ud(L, 1, CHAN_MT, "channel:recv");
    lua_settop(L, 1);
    return wait_run(L, &RECV);
}

static int chan_tryrecv(lua_State *L)
{
    lchan *c = check_ud(L, 1, CHAN_MT, "channel:tryrecv");
    lua_settop(L, 1);
    void *key = NULL;
    int rc = px_chan_tryrecv(c->ch, &key);
    return recv_outcome(L, rc, "channel:tryrecv", key);
}

static int chan_close(lua_State *L)
{
    lchan *c = check_ud(L, 1, CHAN_MT, "channel:close");
    int rc = px_chan_close(c->ch);
    if (rc != 0 && rc != PX_ECLOSED)
        return raise_code(L, rc, "channel:close");   /* ETHREAD */
    lua_pushboolean(L, rc == 0);
    return 1;
}

static int chan_len(lua_State *L)
{
    lchan *c = check_ud(L, 1, CHAN_MT, "channel:len");
    lua_pushinteger(L, (lua_Integer)px_chan_len(c->ch));
    return 1;
}

static int chan_cap(lua_State *L)
{
    lchan *c = check_ud(L, 1, CHAN_MT, "channel:cap");
    lua_pushinteger(L, (lua_Integer)px_chan_cap(c->ch));
    return 1;
}

static int chan_gc(lua_State *L) { return sync_gc(L, CHAN_MT, chan_free); }

static int chan_waiters(lua_State *L)
{
    lchan *c = check_ud(L, 1, CHAN_MT, "channel:waiters");
    lua_pushinteger(L, (lua_Integer)px_chan_waiters(c->ch));
    return 1;
}

static int event_waiters(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)px_event_waiters(SELF(px_event, EVENT_MT, "event:waiters")));
    return 1;
}

/* -- Select ------------------------------------------------------------------ */

/*
** px.select{ case, case, ..., default = true }: px_select over the cases.
** A case is a small table {kind, what, extra} with the SelectCase metatable,
** made by ch:recv_case(), ch:send_case(v), ev:wait_case(),
** sem:acquire_case(), px.readable(fd), px.writable(fd), px.deadline(t);
** `false` in the list is a case switched off (Go's nil channel).
**
** The C cases live in a userdata at stack index 2, which stays where it is
** while the fiber is parked: a sender writes a received key into it, and
** the continuation calls px_select again with the same array.  A send case
** offers the key of its value, stashed in the channel's table as a send
** stashes it; every send case that did not deliver takes its value out
** again.  The channel userdata of each channel case sits on the stack above
** the state (slot[k]), so the cases table may change meanwhile.
*/
enum { CASE_KIND = 1, CASE_WHAT, CASE_EXTRA };

typedef struct lselect {
    size_t n;                /* C cases */
    int *lidx;               /* the Lua index of each (0: the default) */
    int *slot;               /* the stack index of a channel case's userdata */
    px_select_case c[];
} lselect;

static int new_case(lua_State *L, int kind, int what, int extra)
{
    lua_createtable(L, 3, 0);
    lua_pushinteger(L, kind);
    lua_rawseti(L, -2, CASE_KIND);
    lua_pushvalue(L, what);
    lua_rawseti(L, -2, CASE_WHAT);
    if (extra != 0) {
        lua_pushvalue(L, extra);
        lua_rawseti(L, -2, CASE_EXTRA);
    }
    luaL_setmetatable(L, SELECT_CASE_MT);
    return 1;
}

static int chan_recv_case(lua_State *L)
{
    (void)check_ud(L, 1, CHAN_MT, "channel:recv_case");
    return new_case(L, PX_SELECT_RECV, 1, 0);
}

static int chan_send_case(lua_State *L)
{
    (void)check_ud(L, 1, CHAN_MT, "channel:send_case");
    if (lua_isnoneornil(L, 2))
        return arg_error(L, "channel:send_case", 2, "value", "a value other than nil");
    return new_case(L, PX_SELECT_SEND, 1, 2);
}

static int event_wait_case(lua_State *L)
{
    (void)SELF(px_event, EVENT_MT, "event:wait_case");
    return new_case(L, PX_SELECT_EVENT, 1, 0);
}

static int sem_acquire_case(lua_State *L)
{
    (void)SELF(px_sem, SEM_MT, "semaphore:acquire_case");
    return new_case(L, PX_SELECT_SEM, 1, 0);
}

static int fd_case(lua_State *L, unsigned events, const char *where)
{
    lua_settop(L, 1);
    lua_pushinteger(L, pxlua_check_fd(L, 1, where));
    lua_pushinteger(L, events);
    return new_case(L, PX_SELECT_FD, 2, 3);
}
static int l_readable(lua_State *L) { return fd_case(L, PX_READABLE, "px.readable"); }
static int l_writable(lua_State *L) { return fd_case(L, PX_WRITABLE, "px.writable"); }

/* px.deadline(t): t in seconds on px.now()'s clock; 2^63 ns or more is never. */
static int l_deadline(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TNUMBER || lua_tonumber(L, 1) != lua_tonumber(L, 1))
        return arg_error(L, "px.deadline", 1, "t", "a number (seconds on px.now()'s clock)");
    double ns = lua_tonumber(L, 1) * 1e9;
    int64_t d = ns >= 9223372036854775807.0 ? INT64_MAX
              : ns <= -9223372036854775807.0 ? -INT64_MAX : (int64_t)ns;
    lua_settop(L, 1);
    lua_pushinteger(L, (lua_Integer)d);
    return new_case(L, PX_SELECT_DEADLINE, 2, 0);
}

static int bad_case(lua_State *L, lua_Integer i, const char *why)
{
    lua_pushfstring(L, "px.select: bad argument #1 (cases): case %I %s", i, why);
    push_error_msg(L, PX_EINVAL);
    return lua_error(L);
}

/* The C object of the case table on top, whose kind is `kind`: checked. */
static void *case_object(lua_State *L, lua_Integer i, int kind)
{
    const char *mt = kind == PX_SELECT_EVENT ? EVENT_MT : kind == PX_SELECT_SEM ? SEM_MT : CHAN_MT;
    lua_rawgeti(L, -1, CASE_WHAT);
    void *u = luaL_testudata(L, -1, mt);
    lua_pop(L, 1);
    if (u == NULL)
        bad_case(L, i, "has lost its object");
    void *p = kind == PX_SELECT_EVENT || kind == PX_SELECT_SEM ? ((lsync *)u)->p
                                                               : ((lchan *)u)->ch;
    if (p == NULL)
        bad_case(L, i, "is on an object already freed");
    return p;
}

static lua_Integer case_int(lua_State *L, int field)
{
    lua_rawgeti(L, -1, field);
    lua_Integer v = lua_tointeger(L, -1);
    lua_pop(L, 1);
    return v;
}

/* Takes a send case's value out of its channel's table again. */
static void select_unstash(lua_State *L, lselect *s, size_t k)
{
    lua_getiuservalue(L, s->slot[k], 1);
    lua_pushinteger(L, (lua_Integer)(intptr_t)s->c[k].value);
    lua_pushnil(L);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

static int select_call(lua_State *L)
{
    lselect *s = lua_touserdata(L, 2);
    return px_select(s->c, s->n);
}

static int select_done(lua_State *L, int rc, const char *name)
{
    lselect *s = lua_touserdata(L, 2);
    for (size_t k = 0; k < s->n; k++)
        if (s->c[k].kind == PX_SELECT_SEND && ((int)k != rc || s->c[k].result != 0))
            select_unstash(L, s, k);
    if (rc < 0)
        return raise_code(L, rc, name);
    px_select_case *c = &s->c[rc];
    if (s->lidx[rc] == 0) {
        lua_pushliteral(L, "default");
        return 1;
    }
    lua_pushinteger(L, s->lidx[rc]);
    if (c->result != 0) {                        /* ECLOSED: a channel or an fd */
        lua_pushnil(L);
        push_error(L, c->result, name);
        return 3;
    }
    if (c->kind != PX_SELECT_RECV) {
        lua_pushboolean(L, 1);
        return 2;
    }
    lua_getiuservalue(L, s->slot[rc], 1);        /* take the value under its key */
    lua_pushinteger(L, (lua_Integer)(intptr_t)c->value);
    lua_rawget(L, -2);
    lua_pushinteger(L, (lua_Integer)(intptr_t)c->value);
    lua_pushnil(L);
    lua_rawset(L, -4);
    lua_remove(L, -2);
    return 2;
}

static const wait_op SELECT = { "px.select", select_call, select_call, select_done };

static int l_select(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TTABLE)
        return arg_error(L, "px.select", 1, "cases", "a table of cases");
    lua_settop(L, 1);
    lua_Integer len = (lua_Integer)lua_rawlen(L, 1);
    lua_getfield(L, 1, "default");
    int dflt = lua_toboolean(L, -1);
    if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
        return bad_case(L, 0, "`default` is neither true nor false");
    lua_pop(L, 1);
    size_t n = dflt ? 1 : 0;
    for (lua_Integer i = 1; i <= len; i++) {
        int t = lua_rawgeti(L, 1, i);
        if (t == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
            lua_pop(L, 1);                       /* switched off */
            continue;
        }
        if (t != LUA_TTABLE || !lua_getmetatable(L, -1))
            return bad_case(L, i, "is not a select case (ch:recv_case(), px.readable(fd), ...)");
        luaL_getmetatable(L, SELECT_CASE_MT);
        if (!lua_rawequal(L, -1, -2))
            return bad_case(L, i, "is not a select case (ch:recv_case(), px.readable(fd), ...)");
        lua_pop(L, 3);
        n++;
    }
    if (n > (size_t)INT32_MAX || !lua_checkstack(L, (int)n + LUA_MINSTACK))
        return raise_code(L, PX_ENOMEM, "px.select");
    if (!dflt)
        check_waitable(L, "px.select");          /* before a value is stashed */
    size_t size = sizeof(lselect) + n * sizeof(px_select_case) + 2 * n * sizeof(int);
    lselect *s = lua_newuserdatauv(L, size, 0);  /* at 2 */
    memset(s, 0, size);
    s->lidx = (int *)(void *)&s->c[n];
    s->slot = s->lidx + n;
    /* every case is checked before a value is stashed */
    size_t k = 0;
    for (lua_Integer i = 1; i <= len; i++) {
        if (lua_rawgeti(L, 1, i) != LUA_TTABLE) {
            lua_pop(L, 1);
            continue;
        }
        px_select_case *c = &s->c[k];
        s->lidx[k] = (int)i;
        c->kind = (int)case_int(L, CASE_KIND);
        switch (c->kind) {
        case PX_SELECT_SEND:
        case PX_SELECT_RECV:
        case PX_SELECT_EVENT:
        case PX_SELECT_SEM:
            c->obj = case_object(L, i, c->kind);
            break;
        case PX_SELECT_FD:
            c->fd = (int)case_int(L, CASE_WHAT);
            c->events = (unsigned)case_int(L, CASE_EXTRA);
            break;
        case PX_SELECT_DEADLINE:
            c->deadline = (int64_t)case_int(L, CASE_WHAT);
            break;
        default:
            return bad_case(L, i, "has an unknown kind");
        }
        lua_pop(L, 1);
        k++;
    }
    if (dflt)
        s->c[k].kind = PX_SELECT_DEFAULT;        /* lidx 0 */
    s->n = n;
    for (k = 0; k < n; k++) {
        px_select_case *c = &s->c[k];
        if (c->kind != PX_SELECT_SEND && c->kind != PX_SELECT_RECV)
            continue;
        lua_rawgeti(L, 1, s->lidx[k]);
        lua_rawgeti(L, -1, CASE_WHAT);
        lua_remove(L, -2);
        s->slot[k] = lua_gettop(L);              /* the channel, kept on the stack */
        if (c->kind == PX_SELECT_SEND) {
            lchan *ch = lua_touserdata(L, -1);
            lua_Integer key = ch->next++;
            lua_getiuservalue(L, -1, 1);
            lua_pushinteger(L, key);
            lua_rawgeti(L, 1, s->lidx[k]);
            lua_rawgeti(L, -1, CASE_EXTRA);
            lua_remove(L, -2);
            lua_rawset(L, -3);
            lua_pop(L, 1);
            c->value = (void *)(intptr_t)key;
        }
    }
    if (dflt)                                    /* never parks: any coroutine may */
        return select_done(L, select_call(L), SELECT.name);
    return wait_run(L, &SELECT);
}

/* -- Futures ------------------------------------------------------------------ */

/*
** px.future(): the C future carries the settlement only, 0 or a status; the
** Lua value (a result, or the value a :fail gave) is the Future's uservalue,
** set on this thread right after the C settlement succeeded -- nothing can
** read it before: the waiters are fibers of this Lua state, which run once
** the settling fiber waits.  A status that another thread set (a C thread
** holding the px_future) has no Lua value: its wait raises the error object
** of that code, and a result set there reads as nil.
**
** A Fiber waited for as a future (px.wait_all, px.wait_any) gets a Future
** of its own (FIBER_FUTURE), which host_resume settles at the fiber's end:
** PXLUA_FAILED when it raised.  Its outcome is read from the Fiber.
*/
typedef struct lfuture { px_future *fu; } lfuture;

static int l_future(lua_State *L)
{
    lfuture *u = lua_newuserdatauv(L, sizeof *u, 1);
    u->fu = NULL;
    luaL_setmetatable(L, FUTURE_MT);
    if ((u->fu = px_future_new()) == NULL)
        return raise_code(L, PX_ENOMEM, "px.future");
    return 1;
}

static lfuture *check_future(lua_State *L, int arg, const char *where)
{
    lfuture *u = check_ud(L, arg, FUTURE_MT, where);
    if (u->fu == NULL)                           /* its __gc was called by hand */
        raise_code(L, PX_EINVAL, where);
    return u;
}

static int settled(lua_State *L, int rc, const char *where)
{
    if (rc == PX_EBUSY) {
        lua_pushfstring(L, "%s: the future is settled already", where);
        push_error_msg(L, rc);
        return lua_error(L);
    }
    if (rc != 0)
        return raise_code(L, rc, where);
    lua_settop(L, 2);
    lua_setiuservalue(L, 1, 1);
    lua_pushboolean(L, 1);
    return 1;
}

/* fu:set(v): settles it with v (nil too); a second settlement raises EBUSY. */
static int future_set(lua_State *L)
{
    lfuture *u = check_future(L, 1, "future:set");
    return settled(L, px_future_set_result(u->fu, NULL), "future:set");
}

/* fu:fail(err): settles it with the error err (any value but nil), which
** every wait raises, unchanged. */
static int future_fail(lua_State *L)
{
    lfuture *u = check_future(L, 1, "future:fail");
    if (lua_isnoneornil(L, 2))
        return arg_error(L, "future:fail", 2, "err", "an error value other than nil");
    return settled(L, px_future_set_error(u->fu, PXLUA_FAILED), "future:fail");
}

static int future_done(lua_State *L)
{
    lua_pushboolean(L, px_future_done(check_future(L, 1, "future:done")->fu));
    return 1;
}

static int free_future(void *p) { return px_future_free(p); }

static int future_gc(lua_State *L)
{
    lfuture *u = luaL_testudata(L, 1, FUTURE_MT);   /* see sync_gc */
    if (u == NULL || u->fu == NULL)
        return 0;
    pxhost_collect(free_future, u->fu, 0);
    u->fu = NULL;
    return 0;
}

static int future_tostring(lua_State *L)
{
    lfuture *u = check_ud(L, 1, FUTURE_MT, "future:__tostring");
    lua_pushfstring(L, "parataxis.Future (%s)",
                    u->fu != NULL && px_future_done(u->fu) ? "settled" : "pending");
    return 1;
}

/* The Fiber at idx, or NULL when it is something else. */
static lfiber *to_fiber(lua_State *L, int idx)
{
    lfiber *f = lua_touserdata(L, idx);
    if (f == NULL || !lua_getmetatable(L, idx))
        return NULL;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &fiber_mt);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same ? f : NULL;
}

/* The px_future of the Future or Fiber at idx, or NULL when it is neither
** (or a Fiber whose run ended before it did: nothing will settle it). */
static px_future *future_of(lua_State *L, int idx)
{
    lfuture *u = luaL_testudata(L, idx, FUTURE_MT);
    if (u != NULL)
        return u->fu;
    lfiber *f = to_fiber(L, idx);
    if (f == NULL)
        return NULL;
    if (f->fu != NULL)
        return f->fu;
    if (f->state == F_LIVE && (f->h == NULL || f->run != cur_run))
        return NULL;
    idx = lua_absindex(L, idx);
    l_future(L);
    f->fu = ((lfuture *)lua_touserdata(L, -1))->fu;
    lua_setiuservalue(L, idx, FIBER_FUTURE);
    if (f->state != F_LIVE)
        (void)(f->state == F_OK ? px_future_set_result(f->fu, NULL)
                                : px_future_set_error(f->fu, PXLUA_FAILED));
    return f->fu;
}

/*
** Pushes what the settled Future or Fiber at idx settled with, or raises its
** error: a Fiber's first result or its error, a Future's value or the value
** of its :fail, or (a status set in C) the error object of that code.
*/
static int push_outcome(lua_State *L, int idx, const char *where)
{
    idx = lua_absindex(L, idx);
    lfiber *f = to_fiber(L, idx);
    if (f != NULL) {
        if (f->co == NULL) {                     /* see pool_put */
            if (f->nres == 1)
                lua_getiuservalue(L, idx, FIBER_CO);
            else
                lua_pushnil(L);
            return 1;
        }
        int top = lua_gettop(f->co);
        if (f->state == F_ERROR) {
            f->joined = 1;
            lua_pushvalue(f->co, top);
            lua_xmove(f->co, L, 1);
            return lua_error(L);
        }
        if (f->nres == 0) {
            lua_pushnil(L);
            return 1;
        }
        lua_pushvalue(f->co, top - f->nres + 1);
        lua_xmove(f->co, L, 1);
        return 1;
    }
    lfuture *u = lua_touserdata(L, idx);
    int rc = px_future_wait(u->fu, NULL);        /* settled: answers at once */
    if (rc == 0) {
        lua_getiuservalue(L, idx, 1);
        return 1;
    }
    if (rc == PXLUA_FAILED) {
        lua_getiuservalue(L, idx, 1);
        return lua_error(L);
    }
    return raise_code(L, rc, where);
}

static int fwait_call(lua_State *L)
{
    return px_future_wait(((lfuture *)lua_touserdata(L, 1))->fu, NULL);
}
static int fwait_done(lua_State *L, int rc, const char *name)
{
    if (!px_future_done(((lfuture *)lua_touserdata(L, 1))->fu))
        return raise_code(L, rc, name);          /* the wait's own outcome: a scope */
    return push_outcome(L, 1, name);
}
static const wait_op FUTURE_WAIT = { "future:wait", fwait_call, fwait_call, fwait_done };

/* fu:wait(): its value, or raises its error. */
static int future_wait(lua_State *L)
{
    lfuture *u = check_future(L, 1, "future:wait");
    lua_settop(L, 1);
    if (px_future_done(u->fu))                   /* never parks: any coroutine may */
        return push_outcome(L, 1, "future:wait");
    return wait_run(L, &FUTURE_WAIT);
}

/*
** px.wait_all{...} and px.wait_any{...}: the list at 1, the C array at 2 (it
** stays where it is while the fiber is parked: the hosted re-call names the
** same array), a copy of the list at 3 (the caller's may change meanwhile).
*/
typedef struct lfutures { size_t n; px_future *fus[]; } lfutures;

static void futures_args(lua_State *L, const char *where)
{
    if (lua_type(L, 1) != LUA_TTABLE)
        arg_error(L, where, 1, "futures", "a list of futures and fibers");
    lua_settop(L, 1);
    size_t n = (size_t)lua_rawlen(L, 1);
    lfutures *s = lua_newuserdatauv(L, sizeof *s + n * sizeof s->fus[0], 0);
    s->n = 0;
    lua_createtable(L, (int)(n < INT32_MAX ? n : 0), 0);
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, 1, (lua_Integer)i + 1);
        if ((s->fus[i] = future_of(L, -1)) == NULL) {
            lua_pushfstring(L, "%s: bad argument #1 (futures): item %I is %s", where,
                            (lua_Integer)i + 1,
                            to_fiber(L, -1) ? "a fiber whose run is over"
                                            : "neither a future nor a fiber");
            push_error_msg(L, PX_EINVAL);
            lua_error(L);
        }
        lua_rawseti(L, 3, (lua_Integer)i + 1);
    }
    s->n = n;
}

static int wall_call(lua_State *L)
{
    lfutures *s = lua_touserdata(L, 2);
    return px_future_wait_all(s->fus, s->n, NULL);
}
static int wall_done(lua_State *L, int rc, const char *name)
{
    lfutures *s = lua_touserdata(L, 2);
    if (rc == 0) {
        lua_createtable(L, (int)(s->n < INT32_MAX ? s->n : 0), 1);
        for (size_t i = 0; i < s->n; i++) {
            lua_rawgeti(L, 3, (lua_Integer)i + 1);
            push_outcome(L, -1, name);
            lua_rawseti(L, -3, (lua_Integer)i + 1);
            lua_pop(L, 1);
        }
        lua_pushinteger(L, (lua_Integer)s->n);
        lua_setfield(L, -2, "n");
        return 1;
    }
    /* A failure, or the wait's own outcome: of the futures that failed, the
    ** first to (px_future_wait_any of settled ones answers so) is raised. */
    lfutures *failed = lua_newuserdatauv(L, sizeof *failed + s->n * sizeof s->fus[0] +
                                         s->n * sizeof(size_t), 0);
    size_t *at = (size_t *)(void *)&failed->fus[s->n], k = 0;
    for (size_t i = 0; i < s->n; i++)
        if (px_future_done(s->fus[i]) && px_future_wait(s->fus[i], NULL) != 0) {
            at[k] = i;
            failed->fus[k++] = s->fus[i];
        }
    if (k == 0)
        return raise_code(L, rc, name);
    int first = px_future_wait_any(failed->fus, k);
    lua_rawgeti(L, 3, (lua_Integer)at[first >= 0 ? first : 0] + 1);
    return push_outcome(L, -1, name);
}
static const wait_op WAIT_ALL = { "px.wait_all", wall_call, wall_call, wall_done };

static int wany_call(lua_State *L)
{
    lfutures *s = lua_touserdata(L, 2);
    return px_future_wait_any(s->fus, s->n);
}
static int wany_done(lua_State *L, int rc, const char *name)
{
    if (rc < 0)
        return raise_code(L, rc, name);
    lua_pushinteger(L, rc + 1);
    lua_rawgeti(L, 3, rc + 1);
    push_outcome(L, -1, name);
    lua_remove(L, -2);
    return 2;
}
static const wait_op WAIT_ANY = { "px.wait_any", wany_call, wany_call, wany_done };

/* px.wait_all{...}: the values in input order (a list with n), or raises
** the error of the first to fail. */
static int l_wait_all(lua_State *L)
{
    futures_args(L, "px.wait_all");
    lfutures *s = lua_touserdata(L, 2);
    size_t done = 0;
    while (done < s->n && px_future_done(s->fus[done]))
        done++;
    if (done == s->n)                            /* never parks: any coroutine may */
        return wall_done(L, wall_call(L), WAIT_ALL.name);
    return wait_run(L, &WAIT_ALL);
}

/* px.wait_any{...}: the index of the first to settle and its value, or
** raises its error. */
static int l_wait_any(lua_State *L)
{
    futures_args(L, "px.wait_any");
    lfutures *s = lua_touserdata(L, 2);
    if (s->n == 0)
        return arg_error(L, "px.wait_any", 1, "futures", "a non-empty list");
    for (size_t i = 0; i < s->n; i++)
        if (px_future_done(s->fus[i]))          /* never parks: any coroutine may */
            return wany_done(L, wany_call(L), WAIT_ANY.name);
    return wait_run(L, &WAIT_ANY);
}

/* -- Groups ------------------------------------------------------------------- */

/*
** The C half of px.group (fibers.lua has the rest): the group, its members
** (hosted fibers spawned with px_group_spawn_hosted: spawn_at), the list of
** failures (uservalue 1: each failure's Lua value, in the order they came),
** and the wait.
*/
static int l_group(lua_State *L)
{
    if (cur_run == NULL || cur_run->current == NULL)
        return raise_code(L, PX_ENOFIBER, "px.group");
    check_waitable(L, "px.group");               /* its end waits */
    lgroup *g = lua_newuserdatauv(L, sizeof *g, 1);
    memset(g, 0, sizeof *g);
    luaL_setmetatable(L, GROUP_MT);
    lua_newtable(L);
    lua_setiuservalue(L, -2, 1);
    g->run = cur_run->serial;
    if ((g->tok = px_token_new()) == NULL || (g->g = px_group_new()) == NULL)
        return raise_code(L, PX_ENOMEM, "px.group");
    return 1;
}

static lgroup *check_group(lua_State *L, const char *where)
{
    lgroup *g = check_ud(L, 1, GROUP_MT, where);
    if (g->g == NULL)                            /* its __gc was called by hand */
        raise_code(L, PX_EINVAL, where);
    return g;
}

/* g:spawn(fn, ...): a member running fn(...); its Fiber.  ECANCELED raised
** once the group is cancelled, ECLOSED once it was waited for. */
static int group_spawn(lua_State *L)
{
    lgroup *g = check_group(L, "group:spawn");
    check_callable(L, 2, "group:spawn");
    lrun *r = need_run(L, "group:spawn");
    if (g->run != r->serial)
        return raise_code(L, PX_EINVAL, "group:spawn: the group's run is over");
    int rc;
    if (spawn_at(L, r, 2, 1, &rc) == NULL) {
        if (rc == PX_ECANCELED)
            g->cancelled = 1;
        return raise_code(L, rc, "group:spawn");
    }
    return 1;
}

/* g:cancel(): true when this call cancelled it. */
static int group_cancel(lua_State *L)
{
    lgroup *g = check_group(L, "group:cancel");
    int first = !g->cancelled;
    g->cancelled = 1;
    (void)px_token_cancel(g->tok);
    if (px_group_cancel(g->g) == 0)
        first = 0;
    lua_pushboolean(L, first);
    return 1;
}

static int group_cancelled(lua_State *L)
{
    lua_pushboolean(L, check_group(L, "group:cancelled")->cancelled);
    return 1;
}

static int group_live(lua_State *L)
{
    lgroup *g = check_group(L, "group:live");
    lua_pushinteger(L, (lua_Integer)px_group_live(g->g));
    return 1;
}

/* g:_fail(err): records err, the error of the body, as a failure: true
** when it was one (the first cancels the group). */
static int group_fail(lua_State *L)
{
    lgroup *g = check_group(L, "group:_fail");
    lua_settop(L, 2);
    int status = is_error_code(L, 2, "ECANCELED") ? PX_ECANCELED : PXLUA_FAILED;
    int yes = px_group_fail(g->g, status) == 1;
    if (yes)
        group_failed(L, g, 1);
    lua_pushboolean(L, yes);
    return 1;
}

/* g:_failures(): the list of failures (the group's own table). */
static int group_failures(lua_State *L)
{
    (void)check_group(L, "group:_failures");
    lua_getiuservalue(L, 1, 1);
    return 1;
}

/* g:_push_scope(): opens the scope the body runs in (closed by px.pop): the
** group's own, so the body is cancelled with the members and, like theirs,
** its scope does not keep the run from reporting a deadlock. */
static int group_push_scope(lua_State *L)
{
    int rc = px_group_scope_push(check_group(L, "px.group")->g);
    if (rc != 0)
        return raise_code(L, rc, "px.group");
    return 0;
}

static int gwait_call(lua_State *L) { return px_group_wait(((lgroup *)lua_touserdata(L, 1))->g); }
/* Nothing, or the error object of the wait's own outcome (a scope of the
** caller that fired, the first failure's status); misuse raises. */
static int gwait_done(lua_State *L, int rc, const char *name)
{
    lgroup *g = lua_touserdata(L, 1);
    /* a member's failure is PXLUA_FAILED or ECANCELED, a scope's ETIMEDOUT or
    ** ECANCELED: the rest is misuse (EDEADLK: a member waits for its group) */
    if (rc != 0 && rc != PXLUA_FAILED && rc != PX_ECANCELED && rc != PX_ETIMEDOUT)
        return raise_code(L, rc, name);
    g->waited = 1;
    if (rc == 0)
        return 0;
    if (rc > 0)
        lua_pushboolean(L, 1);                   /* PXLUA_FAILED */
    else
        push_error(L, rc, name);
    return 1;
}
static const wait_op GROUP_WAIT = { "px.group", gwait_call, gwait_call, gwait_done };

/* g:_wait(): waits for every member (px_group_wait); see gwait_done.  A
** group waited for already: nothing. */
static int group_wait(lua_State *L)
{
    lgroup *g = check_group(L, "group:_wait");
    lua_settop(L, 1);
    if (!g->waited && (cur_run == NULL || g->run != cur_run->serial))
        g->waited = 1;                           /* its run is over: so are its members */
    if (g->waited)
        return 0;
    return wait_run(L, &GROUP_WAIT);
}

static int free_group(void *p) { return px_group_free(p); }

static int group_gc(lua_State *L)
{
    lgroup *g = luaL_testudata(L, 1, GROUP_MT);   /* see sync_gc */
    if (g == NULL)
        return 0;
    if (g->g != NULL)
        pxhost_collect(free_group, g->g, 0);
    if (g->tok != NULL)                           /* a scope of the run may still use it */
        pxhost_collect(free_token, g->tok, cur_run != NULL);
    g->g = NULL;
    g->tok = NULL;
    return 0;
}

/* -- Seeing into a run: names, the dump, fiber-local values ------------------ */

/*
** The function a fiber runs, as "short_src:linedefined", into buf ("" when
** it cannot be told): the level above body() while the fiber has started,
** else the function spawn_at left on its coroutine.  Raises nothing and
** allocates nothing (describe calls it too).
*/
static void default_name(lua_State *co, char *buf, size_t cap)
{
    lua_Debug ar;
    buf[0] = '\0';
    if (co == NULL)
        return;
    if (lua_getstack(co, 0, &ar)) {
        int lo = 0, hi = 1;                  /* the deepest level: body() */
        while (lua_getstack(co, hi, &ar)) {
            lo = hi;
            hi *= 2;
        }
        while (hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            if (lua_getstack(co, mid, &ar))
                lo = mid;
            else
                hi = mid;
        }
        if (lo < 1 || !lua_getstack(co, lo - 1, &ar) || !lua_getinfo(co, "S", &ar))
            return;
    } else {
        if (lua_gettop(co) < 2 || !lua_checkstack(co, 1))
            return;
        lua_pushvalue(co, 2);                /* body fn args... */
        if (!lua_getinfo(co, ">S", &ar))
            return;
    }
    char tmp[LUA_IDSIZE + 16];
    if (ar.linedefined > 0)
        snprintf(tmp, sizeof tmp, "%s:%d", ar.short_src, ar.linedefined);
    else
        snprintf(tmp, sizeof tmp, "%s", ar.short_src);
    size_t n = strlen(tmp);
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, tmp, n);
    buf[n] = '\0';
}

static void name_default(lfiber *f)
{
    char buf[PX_NAME_MAX];
    f->named = 1;
    default_name(f->co, buf, sizeof buf);
    if (buf[0] != '\0' && f->h != NULL)
        (void)px_fiber_set_name(f->id, buf);
}

/* The live fiber of this thread's run that argument idx names (a Fiber or an
** id); idx 0: the calling fiber.  NULL, or raises ENOFIBER (`strict`). */
static lfiber *fiber_arg(lua_State *L, int idx, const char *where, int strict)
{
    lrun *r = cur_run;
    uint64_t id = 0;
    if (idx == 0) {
        if (r != NULL && r->current != NULL)
            return r->current;
        if (strict) {
            lua_pushfstring(L, "%s: not called in a fiber", where);
            push_error_msg(L, PX_ENOFIBER);
            lua_error(L);
        }
        return NULL;
    }
    lfiber *g = to_fiber(L, idx);
    if (g != NULL) {
        if (r != NULL && g->run == r && g->state == F_LIVE && g->h != NULL)
            return g;
        id = g->id;
    } else if (lua_isinteger(L, idx)) {
        id = (uint64_t)lua_tointeger(L, idx);
        for (lfiber *f = r != NULL ? r->fibers.next : NULL; f != NULL && f != &r->fibers;
             f = f->next)
            if (f->id == id)
                return f;
    } else {
        arg_error(L, where, idx, "fiber", "a Fiber or a fiber id");
    }
    if (strict) {
        lua_pushfstring(L, "%s: fiber %I (id %I) is no live fiber of this thread's run "
                        "(it ended, or never was)", where, (lua_Integer)px_fiber_number(id),
                        (lua_Integer)id);
        push_error_msg(L, PX_ENOFIBER);
        lua_error(L);
    }
    return NULL;
}

static int set_name_of(lua_State *L, lfiber *f, int nidx, const char *where)
{
    const char *name = NULL;
    if (!lua_isnil(L, nidx)) {
        if (lua_type(L, nidx) != LUA_TSTRING)
            return arg_error(L, where, nidx, "name", "a string or nil");
        name = lua_tostring(L, nidx);
    }
    int rc = px_fiber_set_name(f->id, name);
    if (rc != 0)
        return raise_code(L, rc, where);
    f->named = 1;
    return 0;
}

/* px.set_name([fiber,] name): names a live fiber of the run (a Fiber or an
** id; none: the calling one); nil removes its name.  ENOFIBER for any other. */
static int l_set_name(lua_State *L)
{
    if (lua_gettop(L) >= 2)
        return set_name_of(L, fiber_arg(L, 1, "px.set_name", 1), 2, "px.set_name");
    lua_settop(L, 1);
    return set_name_of(L, fiber_arg(L, 0, "px.set_name", 1), 1, "px.set_name");
}

/* px.name([fiber]): its name (by default, its function's "file:line"); nil
** when it has none, or is no live fiber of the run. */
static int l_name(lua_State *L)
{
    lfiber *f = fiber_arg(L, lua_isnoneornil(L, 1) ? 0 : 1, "px.name", 0);
    const char *name = NULL;
    if (f != NULL) {
        if (!f->named)
            name_default(f);
        name = px_fiber_name(f->id);
    }
    if (name == NULL)
        lua_pushnil(L);
    else
        lua_pushstring(L, name);
    return 1;
}

/* px.number([fiber]): the number reports print for it (1 for a run's main);
** any fiber, ended too; 0 off-fiber. */
static int l_number(lua_State *L)
{
    uint64_t id;
    lfiber *g;
    if (lua_isnoneornil(L, 1))
        id = px_self();
    else if ((g = to_fiber(L, 1)) != NULL)
        id = g->id;
    else if (lua_isinteger(L, 1))
        id = (uint64_t)lua_tointeger(L, 1);
    else
        return arg_error(L, "px.number", 1, "fiber", "a Fiber or a fiber id");
    lua_pushinteger(L, (lua_Integer)px_fiber_number(id));
    return 1;
}

static int fiber_name(lua_State *L)
{
    (void)check_fiber(L, "fiber:name");
    lua_settop(L, 1);
    return l_name(L);
}

static int fiber_set_name(lua_State *L)
{
    (void)check_fiber(L, "fiber:set_name");
    lua_settop(L, 2);
    return set_name_of(L, fiber_arg(L, 1, "fiber:set_name", 1), 2, "fiber:set_name");
}

static int fiber_number(lua_State *L)
{
    (void)check_fiber(L, "fiber:number");
    lua_settop(L, 1);
    return l_number(L);
}

/* px.spawn_named(name, fn, ...): px.spawn(fn, ...) with its name. */
static int l_spawn_named(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TSTRING)
        return arg_error(L, "px.spawn_named", 1, "name", "a string");
    check_callable(L, 2, "px.spawn_named");
    lrun *r = need_run(L, "px.spawn_named");
    int rc;
    lfiber *f = spawn_at(L, r, 2, 0, &rc);
    if (f == NULL)
        return raise_code(L, rc, "px.spawn_named");
    f->named = 1;
    (void)px_fiber_set_name(f->id, lua_tostring(L, 1));   /* only ENOMEM: no name */
    return 1;
}

/* obj:set_name(name) and obj:name() of every sync object and the Future:
** their userdata hold the C object first; upvalue 1 is the metatable's name,
** 2 the method's. */
static void *named_object(lua_State *L)
{
    const char *where = lua_tostring(L, lua_upvalueindex(2));
    void *p = ((lsync *)check_ud(L, 1, lua_tostring(L, lua_upvalueindex(1)), where))->p;
    if (p == NULL)
        raise_code(L, PX_EINVAL, where);
    return p;
}

static int object_set_name(lua_State *L)
{
    void *p = named_object(L);
    const char *where = lua_tostring(L, lua_upvalueindex(2));
    if (!lua_isnoneornil(L, 2) && lua_type(L, 2) != LUA_TSTRING)
        return arg_error(L, where, 2, "name", "a string or nil");
    int rc = px_object_set_name(p, lua_tostring(L, 2));
    if (rc != 0)
        return raise_code(L, rc, where);
    return 0;
}

static int object_name(lua_State *L)
{
    char buf[PX_NAME_MAX];
    if (px_object_name(named_object(L), buf, sizeof buf) == 0)
        lua_pushnil(L);
    else
        lua_pushstring(L, buf);
    return 1;
}

/* Adds set_name and name to the methods table out[cls] of metatable mt. */
static void add_naming(lua_State *L, const char *cls, const char *mt, const char *prefix)
{
    lua_getfield(L, -1, cls);
    lua_pushstring(L, mt);
    lua_pushfstring(L, "%s:set_name", prefix);
    lua_pushcclosure(L, object_set_name, 2);
    lua_setfield(L, -2, "set_name");
    lua_pushstring(L, mt);
    lua_pushfstring(L, "%s:name", prefix);
    lua_pushcclosure(L, object_name, 2);
    lua_setfield(L, -2, "name");
    lua_pop(L, 1);
}

/* -- the dump -- */

static int traceback_p(lua_State *L)
{
    lua_State *co = lua_touserdata(L, 1);
    luaL_traceback(L, co, NULL, co == L ? 1 : 0);
    return 1;
}

/*
** px_sched_opts.describe of a Lua run: the traceback of the fiber's coroutine
** (a fiber not started yet: its function).  Called by px_sched_inspect and
** px_dump, from px.dump (on its coroutine, cb_L) or from a signal's dump at a
** turn of the loop (on the run's thread, r->L): it raises nothing and runs no
** Lua code -- the traceback is made under a pcall with the collector stopped.
*/
static size_t describe(void *ctx, uint64_t id, void *host_ctx, char *buf, size_t cap)
{
    lrun *r = ctx;
    lfiber *f = host_ctx;
    lua_State *L = cb_L != NULL ? cb_L : r->L;
    lua_Debug ar;
    size_t len = 0;
    (void)id;
    if (cap == 0)
        return 0;
    buf[0] = '\0';
    if (f == NULL || f->co == NULL || L == NULL || !lua_checkstack(L, 4))
        return 0;
    if (!lua_getstack(f->co, 0, &ar)) {
        char fn[PX_NAME_MAX];
        default_name(f->co, fn, sizeof fn);
        int k = snprintf(buf, cap, "not started: function <%s>", fn);
        return k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1;
    }
    int gc = lua_gc(L, LUA_GCISRUNNING);
    lua_gc(L, LUA_GCSTOP);
    lua_pushcfunction(L, traceback_p);
    lua_pushlightuserdata(L, f->co);
    if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        static const char body_level[] = "\n\t[C]: in ?";   /* body(): not the fiber's */
        if (n >= sizeof body_level - 1 &&
            memcmp(s + n - (sizeof body_level - 1), body_level, sizeof body_level - 1) == 0)
            n -= sizeof body_level - 1;
        len = n < cap ? n : cap - 1;
        memcpy(buf, s, len);
        buf[len] = '\0';
    }
    lua_pop(L, 1);
    if (gc)
        lua_gc(L, LUA_GCRESTART);
    return len;
}

/* One fiber of px_sched_inspect, copied out (its pointers last only the visit). */
typedef struct drec {
    px_fiber_info i;             /* its pointers unused */
    int has_name;
    char name[PX_NAME_MAX], reason[64], kind[32];
    char *where;
} drec;

typedef struct dcoll { drec *v; size_t n, cap; int nomem; } dcoll;

static void copy_text(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src != NULL ? src : "");
}

static int collect(void *ctx, const px_fiber_info *i)
{
    dcoll *c = ctx;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        drec *v = realloc(c->v, cap * sizeof *v);
        if (v == NULL) {
            c->nomem = 1;
            return 1;
        }
        c->v = v;
        c->cap = cap;
    }
    drec *d = &c->v[c->n];
    d->i = *i;
    d->has_name = i->name != NULL;
    copy_text(d->name, sizeof d->name, i->name);
    copy_text(d->reason, sizeof d->reason, i->reason);
    copy_text(d->kind, sizeof d->kind, i->kind);
    const char *w = i->where != NULL ? i->where : "";
    size_t wn = strlen(w) + 1;
    if ((d->where = malloc(wn)) != NULL)
        memcpy(d->where, w, wn);
    if (d->where == NULL) {
        c->nomem = 1;
        return 1;
    }
    c->n++;
    return 0;
}

static void free_coll(dcoll *c)
{
    for (size_t k = 0; k < c->n; k++)
        free(c->v[k].where);
    free(c->v);
}

static void set_str(lua_State *L, const char *k, const char *v)
{
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

static void set_int(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

static void push_record(lua_State *L, const drec *d)
{
    static const char *const states[] = { "ready", "running", "parked", "ended" };
    const px_fiber_info *i = &d->i;
    lua_createtable(L, 0, 14);
    set_int(L, "number", (lua_Integer)i->number);
    set_int(L, "id", (lua_Integer)i->id);
    if (d->has_name)
        set_str(L, "name", d->name);
    set_str(L, "state", states[i->state & 3]);
    lua_createtable(L, (int)i->nholders, 0);
    for (size_t h = 0; h < i->nholders; h++) {
        lua_pushinteger(L, (lua_Integer)px_fiber_number(i->holders[h]));
        lua_rawseti(L, -2, (lua_Integer)h + 1);
    }
    lua_setfield(L, -2, "holders");
    if (i->state == PX_FIBER_PARKED) {
        set_str(L, "reason", d->reason);
        if (d->kind[0])
            set_str(L, "kind", d->kind);
        if (i->object_name[0])
            set_str(L, "object_name", i->object_name);
        if (i->fd >= 0) {
            set_int(L, "fd", i->fd);
            set_str(L, "events", (i->events & PX_READABLE) && (i->events & PX_WRITABLE)
                                     ? "readable writable"
                                     : i->events & PX_READABLE ? "readable" : "writable");
        }
        if (i->deadline != INT64_MAX) {
            lua_pushnumber(L, (lua_Number)i->deadline / 1e9);
            lua_setfield(L, -2, "deadline");
        }
        lua_pushnumber(L, (lua_Number)i->parked_ns / 1e9);
        lua_setfield(L, -2, "waited");
    }
    set_str(L, "traceback", d->where);
}

/*
** px.dump([file]): a record of every live fiber of the run, in spawn order,
** and px_dump's table written to `file` (a Lua file; none: stderr; false:
** nothing).  The fibers not named yet get their default name first.
*/
static int l_dump(lua_State *L)
{
    lrun *r = cur_run;
    if (r == NULL)
        return raise_code(L, PX_ENOFIBER, "px.dump");
    FILE *out = stderr;
    if (lua_isboolean(L, 1) && !lua_toboolean(L, 1)) {
        out = NULL;
    } else if (!lua_isnoneornil(L, 1)) {
        luaL_Stream *ls = luaL_testudata(L, 1, LUA_FILEHANDLE);
        if (ls == NULL)
            return arg_error(L, "px.dump", 1, "file", "a file, or false");
        if (ls->closef == NULL)
            return raise_code(L, PX_EINVAL, "px.dump: the file is closed");
        out = ls->f;
    }
    lua_settop(L, 1);
    if (!lua_checkstack(L, 8))
        return raise_code(L, PX_ENOMEM, "px.dump");
    for (lfiber *f = r->fibers.next; f != &r->fibers; f = f->next)
        if (!f->named)
            name_default(f);
    dcoll c = { NULL, 0, 0, 0 };
    lua_State *cb = cb_L;
    cb_L = L;
    int n = px_sched_inspect(r->s, collect, &c);
    if (n >= 0 && !c.nomem && out != NULL) {
        if (out != stderr)
            fflush(out);
        n = px_dump(r->s, out);
        fflush(out);
    }
    cb_L = cb;
    if (n < 0 || c.nomem) {
        free_coll(&c);
        return raise_code(L, n < 0 ? n : PX_ENOMEM, "px.dump");
    }
    lua_createtable(L, (int)(c.n < INT32_MAX ? c.n : 0), 0);
    for (size_t k = 0; k < c.n; k++) {
        push_record(L, &c.v[k]);
        lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
    free_coll(&c);
    return 1;
}

/* px.dump_signal(signo): a number, or a name ("SIGUSR1", "USR1"); 0 or nil
** puts the previous handler back. */
static int l_dump_signal(lua_State *L)
{
    static const struct { const char *name; int signo; } names[] = {
        { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "USR1", SIGUSR1 },
        { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "ALRM", SIGALRM }, { "WINCH", SIGWINCH },
        { "CONT", SIGCONT }, { "TSTP", SIGTSTP }, { "TTIN", SIGTTIN }, { "TTOU", SIGTTOU },
        { "URG", SIGURG }, { "PROF", SIGPROF }, { "VTALRM", SIGVTALRM }, { "PIPE", SIGPIPE },
        { "CHLD", SIGCHLD }, { "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ }, { "PWR", SIGPWR },
        { "SYS", SIGSYS }, { "IO", SIGIO },
    };
    int signo = -1;
    if (lua_isnoneornil(L, 1)) {
        signo = 0;
    } else if (lua_isinteger(L, 1)) {
        lua_Integer v = lua_tointeger(L, 1);
        signo = v >= 0 && v < 1024 ? (int)v : 1024;
    } else if (lua_type(L, 1) == LUA_TSTRING) {
        const char *s = lua_tostring(L, 1);
        if (strncmp(s, "SIG", 3) == 0)
            s += 3;
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            if (strcmp(s, names[k].name) == 0)
                signo = names[k].signo;
        if (signo < 0)
            return arg_error(L, "px.dump_signal", 1, "signal",
                             "a signal's number or name (\"SIGUSR1\", \"USR1\")");
    } else {
        return arg_error(L, "px.dump_signal", 1, "signal", "a signal's number or name");
    }
    int rc = px_dump_signal(signo);
    if (rc != 0)
        return raise_code(L, rc, "px.dump_signal");
    return 0;
}

/* -- fiber-local values -- */

/*
** px.fiber_local{ inherit = fn, destroy = fn }: a key (px_local) whose value
** in each fiber is a box -- a registry reference to the Lua value, and the
** key's functions (kinfo, counted: the key and every box, since a fiber keeps
** its value after the key is collected).  destroy and inherit run the Lua
** functions on cb_L, under a pcall: an error is reported with warn() and
** counts as done (destroy) or as no value (inherit).  The box goes with its
** fiber: destroyed exactly once, when the fiber ends or its run is discarded
** (px_sched_free in end_run), or when key:set replaces it.
*/
typedef struct kinfo { int refs; int iref, dref; } kinfo;
typedef struct lkey { px_local *k; kinfo *ki; } lkey;
typedef struct lbox { int vref; kinfo *ki; } lbox;

static void kinfo_unref(lua_State *L, kinfo *ki)
{
    if (--ki->refs > 0)
        return;
    luaL_unref(L, LUA_REGISTRYINDEX, ki->iref);
    luaL_unref(L, LUA_REGISTRYINDEX, ki->dref);
    free(ki);
}

static int tostring_p(lua_State *L)
{
    luaL_tolstring(L, 1, NULL);
    return 1;
}

/* Reports the error on top of L with warn(), and pops it. */
static void warn_error(lua_State *L, const char *what)
{
    lua_pushcfunction(L, tostring_p);
    lua_rotate(L, -2, 1);
    const char *msg = lua_pcall(L, 1, 1, 0) == LUA_OK ? lua_tostring(L, -1) : NULL;
    lua_warning(L, what, 1);
    lua_warning(L, msg != NULL ? msg : "(an error value that tostring cannot show)", 0);
    lua_pop(L, 1);
}

static void local_destroy(void *value)
{
    lbox *b = value;
    lua_State *L = cb_L;
    if (L == NULL || !lua_checkstack(L, 4))
        return;                              /* cannot be: never off a run */
    in_cb++;
    if (b->ki->dref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, b->ki->dref);
        lua_rawgeti(L, LUA_REGISTRYINDEX, b->vref);
        if (lua_pcall(L, 1, 0, 0) != LUA_OK)
            warn_error(L, "parataxis: a fiber-local value's destroy function raised: ");
    }
    luaL_unref(L, LUA_REGISTRYINDEX, b->vref);
    kinfo_unref(L, b->ki);
    free(b);
    in_cb--;
}

/* inherit_p(box, fn, value): the child's box gets fn(value); false for nil. */
static int inherit_p(lua_State *L)
{
    lbox *nb = lua_touserdata(L, 1);
    lua_call(L, 1, 1);
    if (lua_isnil(L, -1))
        return 0;
    nb->vref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushboolean(L, 1);
    return 1;
}

static void *local_inherit(void *value)
{
    lbox *b = value, *nb;
    lua_State *L = cb_L;
    if (L == NULL || !lua_checkstack(L, 5) || (nb = malloc(sizeof *nb)) == NULL)
        return NULL;
    in_cb++;
    lua_pushcfunction(L, inherit_p);
    lua_pushlightuserdata(L, nb);
    lua_rawgeti(L, LUA_REGISTRYINDEX, b->ki->iref);
    lua_rawgeti(L, LUA_REGISTRYINDEX, b->vref);
    int ok = 0;
    if (lua_pcall(L, 3, 1, 0) != LUA_OK)
        warn_error(L, "parataxis: a fiber-local value's inherit function raised: ");
    else {
        ok = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    in_cb--;
    if (!ok) {
        free(nb);
        return NULL;
    }
    nb->ki = b->ki;
    nb->ki->refs++;
    return nb;
}

#define LOCAL_MT "parataxis.FiberLocal"

static int l_fiber_local(lua_State *L)
{
    static const char *const where = "px.fiber_local";
    static const char *const opt[2] = { "inherit", "destroy" };
    if (!lua_isnoneornil(L, 1) && lua_type(L, 1) != LUA_TTABLE)
        return arg_error(L, where, 1, "opts", "a table { inherit = fn, destroy = fn }");
    lua_settop(L, 1);
    if (lua_istable(L, 1)) {
        lua_pushnil(L);
        while (lua_next(L, 1)) {
            lua_pop(L, 1);
            const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
            if (k == NULL || (strcmp(k, opt[0]) != 0 && strcmp(k, opt[1]) != 0)) {
                lua_pushfstring(L, "%s: unknown option %s (inherit, destroy)", where,
                                luaL_tolstring(L, -1, NULL));
                push_error_msg(L, PX_EINVAL);
                return lua_error(L);
            }
        }
    }
    for (int k = 0; k < 2; k++) {                /* inherit at 2, destroy at 3 */
        if (lua_istable(L, 1))
            lua_getfield(L, 1, opt[k]);
        else
            lua_pushnil(L);
        if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TFUNCTION) {
            if (luaL_getmetafield(L, -1, "__call") == LUA_TNIL) {
                lua_pushfstring(L, "%s: bad option %s: a function expected, got %s", where,
                                opt[k], luaL_typename(L, -1));
                push_error_msg(L, PX_EINVAL);
                return lua_error(L);
            }
            lua_pop(L, 1);
        }
    }
    lkey *k = lua_newuserdatauv(L, sizeof *k, 0);
    k->k = NULL;
    k->ki = NULL;
    luaL_setmetatable(L, LOCAL_MT);
    if ((k->ki = malloc(sizeof *k->ki)) == NULL)
        return raise_code(L, PX_ENOMEM, where);
    k->ki->refs = 1;
    k->ki->iref = k->ki->dref = LUA_NOREF;
    lua_rotate(L, 2, 1);                         /* opts key inherit destroy */
    int dref = luaL_ref(L, LUA_REGISTRYINDEX);   /* nil: LUA_REFNIL */
    k->ki->dref = dref == LUA_REFNIL ? LUA_NOREF : dref;
    int iref = luaL_ref(L, LUA_REGISTRYINDEX);
    k->ki->iref = iref == LUA_REFNIL ? LUA_NOREF : iref;
    /* destroy is always set: it frees the box */
    if ((k->k = px_local_new(local_destroy, iref != LUA_REFNIL ? local_inherit : NULL)) == NULL)
        return raise_code(L, PX_ENOMEM, where);
    return 1;
}

static lkey *check_key(lua_State *L, const char *where)
{
    lkey *k = check_ud(L, 1, LOCAL_MT, where);
    if (k->k == NULL)
        raise_code(L, PX_EINVAL, where);
    return k;
}

/* key:get(): the calling fiber's value, nil when it has none (or off-fiber). */
static int local_get(lua_State *L)
{
    lkey *k = check_key(L, "local:get");
    lbox *b = px_local_get(k->k);
    if (b == NULL)
        lua_pushnil(L);
    else
        lua_rawgeti(L, LUA_REGISTRYINDEX, b->vref);
    return 1;
}

/* key:set(v): the calling fiber's value is v (nil: none); the value it
** replaces, unless it is v itself, is destroyed now.  ENOFIBER off-fiber. */
static int local_set(lua_State *L)
{
    lkey *k = check_key(L, "local:set");
    lua_settop(L, 2);
    if (in_cb) {
        lua_pushliteral(L, "local:set: cannot set a fiber-local value in an inherit or "
                        "destroy function");
        push_error_msg(L, PX_EPERM);
        return lua_error(L);
    }
    if (px_self() == 0)
        return raise_code(L, PX_ENOFIBER, "local:set");
    lbox *old = px_local_get(k->k), *nb = NULL;
    if (old != NULL) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, old->vref);
        int same = lua_rawequal(L, -1, 2);
        lua_pop(L, 1);
        if (same)
            return 0;
    }
    if (!lua_isnil(L, 2)) {
        lua_pushvalue(L, 2);
        int ref = luaL_ref(L, LUA_REGISTRYINDEX);
        if ((nb = malloc(sizeof *nb)) == NULL) {
            luaL_unref(L, LUA_REGISTRYINDEX, ref);
            return raise_code(L, PX_ENOMEM, "local:set");
        }
        nb->vref = ref;
        nb->ki = k->ki;
        nb->ki->refs++;
    }
    lua_State *cb = cb_L;
    cb_L = L;
    int rc = px_local_set(k->k, nb);
    cb_L = cb;
    if (rc != 0) {
        if (nb != NULL) {
            luaL_unref(L, LUA_REGISTRYINDEX, nb->vref);
            kinfo_unref(L, nb->ki);
            free(nb);
        }
        return raise_code(L, rc, "local:set");
    }
    return 0;
}

static int local_gc(lua_State *L)
{
    lkey *k = luaL_testudata(L, 1, LOCAL_MT);   /* see sync_gc */
    if (k == NULL)
        return 0;
    if (k->k != NULL)
        px_local_free(k->k);                      /* the fibers keep their values */
    k->k = NULL;
    if (k->ki != NULL)
        kinfo_unref(L, k->ki);
    k->ki = NULL;
    return 0;
}

/* -- The module table ------------------------------------------------------ */

static int any_tostring(lua_State *L)
{
    lua_pushfstring(L, "%s: %p", luaL_optstring(L, lua_upvalueindex(1), "?"),
                    lua_touserdata(L, 1));
    return 1;
}

/* Makes metatable `mt` with the methods as its __index and the given __gc;
** leaves the methods table at the top, stored in `out` (at -2) as `name`. */
static void new_class(lua_State *L, const char *mt, const char *name,
                      const luaL_Reg *methods, lua_CFunction gc)
{
    luaL_newmetatable(L, mt);
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "__index");
    if (gc != NULL) {
        lua_pushcfunction(L, gc);
        lua_setfield(L, -3, "__gc");
    }
    lua_pushstring(L, mt);
    lua_pushcclosure(L, any_tostring, 1);
    lua_setfield(L, -3, "__tostring");
    lua_setfield(L, -3, name);    /* out[name] = methods */
    lua_pop(L, 1);                /* the metatable */
}

int pxlua_fibers(lua_State *L)
{
    static const luaL_Reg fns[] = {
        { "run", l_run }, { "spawn", l_spawn }, { "self", l_self },
        { "sleep", l_sleep }, { "yield", l_yield }, { "yield_status", l_yield_status },
        { "push_timeout", l_push_timeout }, { "push_cancel", l_push_cancel },
        { "pop", l_pop }, { "token", l_token },
        { "mutex", l_mutex }, { "rwlock", l_rwlock }, { "waitgroup", l_waitgroup },
        { "barrier", l_barrier }, { "once", l_once }, { "semaphore", l_semaphore },
        { "event", l_event }, { "channel", l_channel },
        { "select", l_select }, { "readable", l_readable }, { "writable", l_writable },
        { "deadline", l_deadline },
        { "future", l_future }, { "wait_all", l_wait_all }, { "wait_any", l_wait_any },
        { "group", l_group }, { "run_with", l_run_with },
        { "set_name", l_set_name }, { "name", l_name }, { "number", l_number },
        { "spawn_named", l_spawn_named }, { "dump", l_dump },
        { "dump_signal", l_dump_signal }, { "fiber_local", l_fiber_local },
        { NULL, NULL }
    };
    static const luaL_Reg fiber_m[] = {
        { "join", fiber_join }, { "id", fiber_id }, { "done", fiber_done },
        { "name", fiber_name }, { "set_name", fiber_set_name }, { "number", fiber_number },
        { NULL, NULL } };
    static const luaL_Reg local_m[] = {
        { "get", local_get }, { "set", local_set }, { NULL, NULL } };
    static const luaL_Reg future_m[] = {
        { "set", future_set }, { "fail", future_fail }, { "wait", future_wait },
        { "done", future_done }, { NULL, NULL } };
    static const luaL_Reg group_m[] = {
        { "spawn", group_spawn }, { "cancel", group_cancel }, { "cancelled", group_cancelled },
        { "live", group_live }, { "_fail", group_fail }, { "_failures", group_failures },
        { "_push_scope", group_push_scope }, { "_wait", group_wait }, { NULL, NULL } };
    static const luaL_Reg token_m[] = {
        { "cancel", token_cancel }, { "cancelled", token_cancelled }, { NULL, NULL } };
    static const luaL_Reg mutex_m[] = {
        { "lock", mutex_lock }, { "trylock", mutex_trylock }, { "unlock", mutex_unlock },
        { "owner", mutex_owner }, { "waiters", mutex_waiters }, { NULL, NULL } };
    static const luaL_Reg rwlock_m[] = {
        { "rdlock", rwlock_rdlock }, { "wrlock", rwlock_wrlock },
        { "tryrdlock", rwlock_tryrdlock }, { "trywrlock", rwlock_trywrlock },
        { "rdunlock", rwlock_rdunlock }, { "wrunlock", rwlock_wrunlock },
        { "readers", rwlock_readers }, { "writer", rwlock_writer },
        { "waiters", rwlock_waiters }, { NULL, NULL } };
    static const luaL_Reg waitgroup_m[] = {
        { "add", waitgroup_add }, { "done", waitgroup_done }, { "wait", waitgroup_wait },
        { "count", waitgroup_count }, { NULL, NULL } };
    static const luaL_Reg barrier_m[] = {
        { "arrive_and_wait", barrier_arrive }, { "phase", barrier_phase },
        { "waiting", barrier_waiting }, { NULL, NULL } };
    static const luaL_Reg once_m[] = {
        { "begin", once_begin }, { "finish", once_finish }, { "done", once_done },
        { NULL, NULL } };
    static const luaL_Reg sem_m[] = {
        { "acquire", sem_acquire }, { "tryacquire", sem_tryacquire },
        { "release", sem_release }, { "value", sem_value }, { "waiters", sem_waiters },
        { "acquire_case", sem_acquire_case },
        { NULL, NULL } };
    static const luaL_Reg event_m[] = {
        { "set", event_set }, { "clear", event_clear }, { "is_set", event_is_set },
        { "wait", event_wait }, { "waiters", event_waiters },
        { "wait_case", event_wait_case }, { NULL, NULL } };
    static const luaL_Reg chan_m[] = {
        { "send", chan_send }, { "recv", chan_recv }, { "trysend", chan_trysend },
        { "tryrecv", chan_tryrecv }, { "close", chan_close }, { "len", chan_len },
        { "cap", chan_cap }, { "waiters", chan_waiters },
        { "recv_case", chan_recv_case }, { "send_case", chan_send_case }, { NULL, NULL } };

    luaL_newlib(L, fns);
    if (luaL_newmetatable(L, ERROR_MT)) {
        lua_pushcfunction(L, error_tostring);
        lua_setfield(L, -2, "__tostring");
    }
    lua_setfield(L, -2, "Error");
    new_class(L, FIBER_MT, "Fiber", fiber_m, NULL);
    lua_getfield(L, LUA_REGISTRYINDEX, FIBER_MT);
    lua_pushcfunction(L, fiber_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &fiber_mt);
    new_class(L, TOKEN_MT, "Token", token_m, token_gc);
    new_class(L, MUTEX_MT, "Mutex", mutex_m, mutex_gc);
    new_class(L, RWLOCK_MT, "RwLock", rwlock_m, rwlock_gc);
    new_class(L, WAITGROUP_MT, "WaitGroup", waitgroup_m, waitgroup_gc);
    new_class(L, BARRIER_MT, "Barrier", barrier_m, barrier_gc);
    new_class(L, ONCE_MT, "Once", once_m, once_gc);
    new_class(L, SEM_MT, "Semaphore", sem_m, sem_gc);
    new_class(L, EVENT_MT, "Event", event_m, event_gc);
    new_class(L, CHAN_MT, "Channel", chan_m, chan_gc);
    new_class(L, FUTURE_MT, "Future", future_m, future_gc);
    luaL_getmetatable(L, FUTURE_MT);
    lua_pushcfunction(L, future_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
    new_class(L, GROUP_MT, "Group", group_m, group_gc);
    luaL_getmetatable(L, GROUP_MT);             /* fibers.lua adds __close */
    lua_setfield(L, -2, "GroupMeta");
    new_class(L, LOCAL_MT, "FiberLocal", local_m, local_gc);
    add_naming(L, "Mutex", MUTEX_MT, "mutex");
    add_naming(L, "RwLock", RWLOCK_MT, "rwlock");
    add_naming(L, "WaitGroup", WAITGROUP_MT, "waitgroup");
    add_naming(L, "Barrier", BARRIER_MT, "barrier");
    add_naming(L, "Once", ONCE_MT, "once");
    add_naming(L, "Semaphore", SEM_MT, "semaphore");
    add_naming(L, "Event", EVENT_MT, "event");
    add_naming(L, "Channel", CHAN_MT, "channel");
    add_naming(L, "Future", FUTURE_MT, "future");
    luaL_newmetatable(L, SELECT_CASE_MT);       /* a select case: a plain table */
    lua_pop(L, 1);
    pxlua_exec_open(L);             /* px.scheduler() (pxlua_exec.c) */
    return 1;
}
