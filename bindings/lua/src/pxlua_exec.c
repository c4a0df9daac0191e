/*
** pxlua_exec.c -- px.scheduler(): the run under way as an executor, so that
** each handler call of a TimerQueue{ executor = px.scheduler() } starts as a
** new fiber of the run, which may lock, wait and sleep.
**
** The executor, its reference count and its hold ledger are the bindings'
** shared layer's (pxhost.h: the run as an executor); this file gives it the
** Lua side.  The worker thread never touches the Lua state.  Its post
** (through the queue's own executor in pxswig.c) hands the call to the run,
** which spawns for it, on the Lua thread, a hosted fiber (the stub) whose only
** turn runs on the scheduler's own stack, where Lua may be called: it makes
** the call (the queue's trampoline records which handler fired, and how) and
** spawns the Lua fiber that runs the handler (parataxis.lua's dispatch
** function).  A call that cannot start as a fiber goes back to its queue.
**
** Holds: the Lua side takes one (s:hold()) when it adds a timer and lets go of
** it when the handler's final call starts as a fiber, so the run neither ends
** nor reports a deadlock while a call is owed to it.  A cancelled run lets go
** of every hold and takes no more.  When the run is over the executor is
** closed before the scheduler is freed (a call posted and not yet started runs
** the scheduler again first): later calls go back to their queue's own handler
** queue, aborted, for q:run(), drain() or close() on the Lua thread -- never
** lost, never into a freed scheduler.
*/
#include <lauxlib.h>
#include <lua.h>

#include <stdint.h>
#include <stdlib.h>

#include "parataxis.h"
#include "pxhost.h"
#include "pxlua_exec.h"
#include "pxswig.h"

#define SCHED_MT "parataxis.Scheduler"
#define DISPATCH_KEY "parataxis.dispatch"

/* One handler call on its way into the run: a pxhost_call (exec, fn, arg,
** status), then what the Lua side needs of it. */
typedef struct call {
    pxhost_call head;        /* fn: the queue's trampoline: call it exactly once */
    TimerQueue *t;
    int made;                /* fn was called: what it recorded is key, st */
    long long key;
    int st;
    int tries;               /* turns whose start of the handler's fiber failed */
} call;

/* Turns the stub tries to start the handler's fiber before it runs the
** handler in place: a failure may pass (memory freed, a hook that raised). */
enum { START_TRIES = 3 };

/* The executor of the run on this thread, and its Scheduler (a registry ref). */
static _Thread_local pxhost_exec *run_exec;
static _Thread_local int sched_ref = LUA_NOREF;

typedef struct lsched { pxhost_exec *x; } lsched;

static int raise_code(lua_State *L, int rc, const char *msg)
{
    lua_createtable(L, 0, 2);
    lua_pushstring(L, px_errname(rc));
    lua_setfield(L, -2, "code");
    lua_pushstring(L, msg);
    lua_setfield(L, -2, "message");
    luaL_setmetatable(L, "parataxis.Error");
    return lua_error(L);
}

pxhost_exec *pxlua_exec_arg(lua_State *L, int idx)
{
    lsched *u = luaL_testudata(L, idx, SCHED_MT);
    if (u == NULL || u->x == NULL) {      /* x: NULL once finalized (sched_gc) */
        lua_pushfstring(L, "TimerQueue: bad executor: px.scheduler() expected, got %s",
                        luaL_typename(L, idx));
        raise_code(L, PX_EINVAL, lua_tostring(L, -1));
    }
    return u->x;
}

/* -- the way of a call -------------------------------------------------------- */

/* The call cannot become a fiber: back to its queue, aborted (Lua thread). */
static void give_back(call *c)
{
    pxswig_give_back(c->t, c->head.fn, c->head.arg);
}

/* Pushes dispatch, queues, qid, key, status (the last three: arguments 1-3)
** and returns the index of dispatch. */
static int push_dispatch(lua_State *L)
{
    int base = lua_gettop(L) + 1;
    lua_getfield(L, LUA_REGISTRYINDEX, DISPATCH_KEY);
    lua_rawgeti(L, LUA_REGISTRYINDEX, sched_ref);
    lua_getiuservalue(L, -1, 1);
    lua_remove(L, -2);
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    return base;
}

/* Spawns dispatch(queues, qid, key, status) as a fiber of the run. */
static int spawn_dispatch(lua_State *L)
{
    int rc = pxlua_spawn(L, push_dispatch(L));
    if (rc != 0)
        return raise_code(L, rc, "a timer handler's fiber");
    return 0;
}

/* dispatch(queues, qid, key, status) in place, on the scheduler's stack: the
** handler runs, but not as a fiber (a wait raises, and dispatch warns). */
static int run_dispatch(lua_State *L)
{
    push_dispatch(L);
    lua_call(L, 4, 0);
    return 0;
}

/* f(qid, key, st) under lua_pcall on L: LUA_OK, or the error's status with
** its value on top. */
static int call_with(lua_State *L, lua_CFunction f, const call *c)
{
    lua_pushcfunction(L, f);
    lua_pushinteger(L, (lua_Integer)(intptr_t)c->t);
    lua_pushinteger(L, (lua_Integer)c->key);
    lua_pushinteger(L, c->st);
    return lua_pcall(L, 3, 0, 0);
}

/* Warns "parataxis: <what> (<the error on top>)<then>" and pops the error.
** Only raw reads of the value: nothing here may raise, outside any pcall. */
static void warn_error(lua_State *L, const char *what, const char *then)
{
    int below = lua_gettop(L) - 1;
    const char *text = NULL;
    if (lua_type(L, -1) == LUA_TSTRING) {
        text = lua_tostring(L, -1);
    } else if (lua_type(L, -1) == LUA_TTABLE) {  /* a parataxis.Error */
        lua_pushliteral(L, "message");
        if (lua_rawget(L, -2) == LUA_TSTRING)
            text = lua_tostring(L, -1);
    }
    lua_warning(L, "parataxis: ", 1);
    lua_warning(L, what, 1);
    lua_warning(L, " (", 1);
    lua_warning(L, text != NULL ? text : "an error value that is not a string", 1);
    lua_warning(L, ")", 1);
    lua_warning(L, then, 0);
    lua_settop(L, below);
}

/*
** The hosted fiber's turns, on the scheduler's stack: the call (the first
** turn), then the Lua fiber of the handler.  The call is out of its queue once
** made, so its handler must run from here: when its fiber cannot start (no
** memory, an error from a hook on the run's thread) the stub warns with the
** reason and tries again on its next turns, then runs the handler in place
** with the thread's hook off for that call.  Only an error there too (no
** memory) loses the call, and says so.  A Ctrl-C not acted on yet is first:
** its hook would raise in these calls (pxlua_run_see_sigint).
*/
static int stub_resume(void *ctx)
{
    call *c = ctx;
    lua_State *L = pxlua_run_state();
    if (!c->made) {
        c->made = 1;
        pxhost_call *h = &c->head;
        if (!pxswig_deliver(c->t, h->fn, h->arg, h->status, &c->key, &c->st) || L == NULL)
            return PX_HOST_DONE;
    }
    if (L == NULL || !lua_checkstack(L, 8))
        return PX_HOST_DONE;
    pxlua_run_see_sigint();
    if (c->tries < START_TRIES) {
        if (call_with(L, spawn_dispatch, c) == LUA_OK)
            return PX_HOST_DONE;
        c->tries++;
        warn_error(L, "a timer handler's fiber could not start",
                   c->tries < START_TRIES ? ": trying again" : ": its handler runs in place");
        if (c->tries < START_TRIES)
            return 0;          /* a yield: the next turn tries again */
    }
    lua_Hook hook = lua_gethook(L);
    int mask = lua_gethookmask(L), count = lua_gethookcount(L);
    lua_sethook(L, NULL, 0, 0);
    if (call_with(L, run_dispatch, c) != LUA_OK)
        warn_error(L, "a timer handler could not run", ": its call is lost");
    lua_sethook(L, hook, mask, count);
    return PX_HOST_DONE;
}

static void stub_release(void *ctx)
{
    call *c = ctx;
    if (!c->made)
        give_back(c);
    free(c);
}

static const px_host_ops STUB_OPS = { stub_resume, NULL, stub_release };

/* Off-fiber (pxhost.h): the call goes back to its queue, aborted. */
static void cannot_start(pxhost_call *head, int over)
{
    (void)over;
    call *c = (call *)head;
    give_back(c);
    free(c);
}

static const pxhost_exec_ops EXEC_OPS = { &STUB_OPS, cannot_start };

int pxlua_exec_post(pxhost_exec *x, TimerQueue *t, px_handler_fn fn, void *arg, int status)
{
    call *c = calloc(1, sizeof *c);
    if (c == NULL)
        return PX_ENOMEM;
    c->head.fn = fn;
    c->head.arg = arg;
    c->t = t;
    int rc = pxhost_exec_post(x, &c->head, status);
    if (rc != 0)
        free(c);
    return rc;
}

/* -- the run's side ------------------------------------------------------------ */

void pxlua_exec_cancelled(void)
{
    if (run_exec != NULL)
        pxhost_exec_cancel(run_exec);
}

int pxlua_exec_close(lua_State *L, int force)
{
    pxhost_exec *x = run_exec;
    if (x == NULL)
        return 1;
    if (!pxhost_exec_close(x, force))
        return 0;
    run_exec = NULL;
    luaL_unref(L, LUA_REGISTRYINDEX, sched_ref);
    sched_ref = LUA_NOREF;
    pxhost_exec_unref(x);      /* the run's */
    return 1;
}

/* -- the Lua functions --------------------------------------------------------- */

/* px.scheduler(): the running run's Scheduler, the same one for the whole run. */
static int l_scheduler(lua_State *L)
{
    px_sched *s = pxlua_run_sched();
    if (s == NULL)
        return raise_code(L, PX_ENOFIBER, "px.scheduler: outside px.run");
    if (sched_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, sched_ref);
        return 1;
    }
    lsched *u = lua_newuserdatauv(L, sizeof *u, 1);
    u->x = NULL;
    luaL_setmetatable(L, SCHED_MT);
    lua_newtable(L);                      /* queues: qid -> queue owed a call */
    lua_setiuservalue(L, -2, 1);
    pxhost_exec *x = pxhost_exec_new(s, &EXEC_OPS);
    if (x == NULL)
        return raise_code(L, PX_ENOMEM, "px.scheduler: no memory");
    pxhost_exec_ref(x);                   /* the run's and the userdata's */
    u->x = x;
    lua_pushvalue(L, -1);
    sched_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    run_exec = x;
    return 1;
}

/* set_dispatch(fn): fn(queues, qid, key, status) runs each call's handler. */
static int l_set_dispatch(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_settop(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, DISPATCH_KEY);
    return 0;
}

/* The executor of the Scheduler at 1; EINVAL once it was finalized (its
** __gc called by hand, or from another finalizer that kept it). */
static pxhost_exec *self_exec(lua_State *L)
{
    pxhost_exec *x = ((lsched *)luaL_checkudata(L, 1, SCHED_MT))->x;
    if (x == NULL)
        raise_code(L, PX_EINVAL, "Scheduler: finalized already");
    return x;
}

/* s:hold() -> true when the run is held for a call owed to it (false once it
** is cancelled or over). */
static int sched_hold(lua_State *L)
{
    lua_pushboolean(L, pxhost_exec_hold(self_exec(L)));
    return 1;
}

/* s:unhold(): lets go of one hold that hold() gave (nothing once dropped). */
static int sched_unhold(lua_State *L)
{
    pxhost_exec_unhold(self_exec(L));
    return 0;
}

static int sched_queues(lua_State *L)
{
    (void)self_exec(L);
    lua_getiuservalue(L, 1, 1);
    return 1;
}

/* s:alive() -> true until the run is over. */
static int sched_alive(lua_State *L)
{
    lua_pushboolean(L, !pxhost_exec_closed(self_exec(L)));
    return 1;
}

static int sched_gc(lua_State *L)
{
    lsched *u = luaL_testudata(L, 1, SCHED_MT);   /* called by hand, on anything */
    if (u == NULL)
        return 0;
    pxhost_exec_unref(u->x);
    u->x = NULL;
    return 0;
}

static int sched_tostring(lua_State *L)
{
    lsched *u = luaL_checkudata(L, 1, SCHED_MT);
    int alive = u->x != NULL && !pxhost_exec_closed(u->x);
    lua_pushfstring(L, "parataxis.Scheduler: %p (%s)", (void *)u, alive ? "running" : "done");
    return 1;
}

/* wake(id) -> px_wake(id) == 1: a wake nobody granted, for the stray-wake
** specs (px._wake, a test hook: a library wait must take it for a "look again"). */
static int l_wake(lua_State *L)
{
    lua_Integer id = luaL_checkinteger(L, 1);
    lua_pushboolean(L, id > 0 && px_wake((uint64_t)id) == 1);
    return 1;
}

void pxlua_exec_open(lua_State *L)
{
    lua_pushcfunction(L, l_wake);
    lua_setfield(L, -2, "wake");
    static const luaL_Reg methods[] = {
        { "hold", sched_hold }, { "unhold", sched_unhold }, { "queues", sched_queues },
        { "alive", sched_alive }, { NULL, NULL } };
    lua_pushcfunction(L, l_scheduler);
    lua_setfield(L, -2, "scheduler");
    lua_pushcfunction(L, l_set_dispatch);
    lua_setfield(L, -2, "set_dispatch");
    luaL_newmetatable(L, SCHED_MT);
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "__index");
    lua_setfield(L, -3, "Scheduler");   /* out.Scheduler = methods */
    lua_pushcfunction(L, sched_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, sched_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
}
