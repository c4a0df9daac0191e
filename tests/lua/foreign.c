/*
** foreign.c -- a test-only Lua module, px_foreign: a second scheduler, on a
** thread of its own, using a sync object of the Lua state's run, for the
** specs of "one scheduler at a time" (a Lua state runs one scheduler, so
** Lua alone cannot make the second).  Built only with PARATAXIS_TESTS.
**
**   local h = foreign.park(kind, obj)
**       The thread's run arms obj and parks a fiber on it (as
**       tests/c/sync/family.c does), then blocks its thread in its main
**       fiber; returns once the fiber is parked.  Kinds "rwlock_read" and
**       "mutex_held" park nobody: the main fiber holds a read hold, or the
**       mutex.
**   local h = foreign.use(kind, obj)
**       The same run, but it uses obj once first (arms it, parks a fiber on
**       it and lets it through), then blocks its thread in its main fiber
**       holding nothing and with nobody waiting; returns then.
**   local wait_rc, run_rc = foreign.finish(h)
**       Lets the parked fiber through, ends the run and joins the thread;
**       returns what the fiber's wait returned and what px_run returned
**       (0 and 0 when nothing of the other side disturbed them).
**
**   local t = foreign.later(what, obj [, spin [, status]])
**       A thread that waits for foreign.go(t), spins `spin` iterations, then
**       acts on obj from that thread: "group_cancel" (px_group_cancel of a
**       px.group()), "future_set" (px_future_set_result, value NULL) or
**       "future_fail" (px_future_set_error with `status`) of a px.future().
**   foreign.go(t)      lets it act.
**   local rc = foreign.join(t)
**       Joins the thread; what its px call returned.
**
** obj is the userdata of a px.mutex(), ...: the C object is its first field.
** The module links no copy of the library: load parataxis_core.so with
** package.loadlib(path, "*") before requiring it, so that its px_ calls
** reach the copy of the Lua run (the scheduler registry, the thread-local
** current scheduler).
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>

#include "parataxis.h"

typedef struct kind {
    const char *name;
    int (*arm)(void *o);       /* on the main fiber, before the waiter (or NULL) */
    int (*block)(void *o);     /* the waiter's wait (NULL: no waiter) */
    int (*leave)(void *o);     /* what the waiter does once its wait returned 0 */
    int (*release)(void *o);   /* on the main fiber: lets the waiter through */
} kind;

static void *got;
static int mutex_lock(void *o) { return px_mutex_lock(o); }
static int mutex_unlock(void *o) { return px_mutex_unlock(o); }
static int wrlock(void *o) { return px_rwlock_wrlock(o); }
static int wrunlock(void *o) { return px_rwlock_wrunlock(o); }
static int rdlock(void *o) { return px_rwlock_rdlock(o); }
static int rdunlock(void *o) { return px_rwlock_rdunlock(o); }
static int wg_add(void *o) { return px_waitgroup_add(o, 1); }
static int wg_wait(void *o) { return px_waitgroup_wait(o); }
static int wg_done(void *o) { return px_waitgroup_done(o); }
static int arrive(void *o) { return px_barrier_arrive_and_wait(o); }
static int arrive_last(void *o) { return px_barrier_arrive_and_wait(o) == 1 ? 0 : -1; }
static int once_begin(void *o) { return px_once_begin(o); }
static int once_run(void *o) { return px_once_begin(o) == 1 ? 0 : -1; }
static int once_end(void *o) { return px_once_end(o); }
static int sem_acquire(void *o) { return px_sem_acquire(o); }
static int sem_release(void *o) { return px_sem_release(o); }
static int ev_wait(void *o) { return px_event_wait(o); }
static int ev_set(void *o) { return px_event_set(o) == 1 ? 0 : -1; }
static int recv_any(void *o) { return px_chan_recv(o, &got); }
static int send77(void *o) { return px_chan_send(o, (void *)(uintptr_t)77); }
static int send5(void *o) { return px_chan_send(o, (void *)(uintptr_t)5); }
static int recv5(void *o)
{
    void *v = NULL;
    int rc = px_chan_recv(o, &v);
    return rc != 0 ? rc : (uintptr_t)v == 5 ? 0 : -1;
}

static const kind kinds[] = {
    { "mutex", mutex_lock, mutex_lock, mutex_unlock, mutex_unlock },
    { "rwlock", wrlock, rdlock, rdunlock, wrunlock },
    { "rwlock_read", rdlock, NULL, NULL, rdunlock },
    { "mutex_held", mutex_lock, NULL, NULL, mutex_unlock },
    { "waitgroup", wg_add, wg_wait, NULL, wg_done },
    { "barrier", NULL, arrive, NULL, arrive_last },
    { "once", once_run, once_begin, NULL, once_end },
    { "sem", NULL, sem_acquire, NULL, sem_release },
    { "event", NULL, ev_wait, NULL, ev_set },
    { "chan_recv", NULL, recv_any, NULL, send77 },
    { "chan_send", NULL, send5, NULL, recv5 },
};

typedef struct home {
    const kind *k;
    px_fiber_fn main;                   /* home_main (park) or used_main (use) */
    void *obj;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, parked, go;
    int wait_rc, run_rc, step_rc;
} home;

static void *waiter(void *arg)
{
    home *h = arg;
    h->entered = 1;
    h->wait_rc = h->k->block(h->obj);
    if (h->wait_rc == 0 && h->k->leave && h->k->leave(h->obj) != 0)
        h->wait_rc = -1;
    return NULL;
}

/* Sets *flag under h->mu and wakes whoever waits for it. */
static void raise_flag(home *h, int *flag)
{
    pthread_mutex_lock(&h->mu);
    *flag = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* Waits (30 s at most) until *flag is set; 1 when it is. */
static int wait_flag(home *h, const int *flag)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&h->mu);
    int timed_out = 0;
    while (!*flag && !timed_out)
        timed_out = pthread_cond_timedwait(&h->cv, &h->mu, &until) != 0;
    int set = *flag;
    pthread_mutex_unlock(&h->mu);
    return set;
}

static void *home_main(void *arg)
{
    home *h = arg;
    px_fiber *w = NULL;
    if (h->k->arm && (h->step_rc = h->k->arm(h->obj)) < 0)
        return NULL;
    if (h->k->block) {
        if ((w = px_spawn(waiter, h)) == NULL)
            return NULL;
        for (int i = 0; !h->entered && i < 1000; i++)
            px_yield();                 /* it runs up to its park */
    }
    raise_flag(h, &h->parked);
    wait_flag(h, &h->go);               /* blocks this run's thread */
    h->step_rc = h->k->release(h->obj);
    if (w) {
        px_join(w, NULL);
        px_fiber_release(w);
    }
    return NULL;
}

/* foreign.use: one use of obj (armed, the waiter parked and let through),
** then the run stays alive holding nothing, its thread blocked. */
static void *used_main(void *arg)
{
    home *h = arg;
    px_fiber *w = NULL;
    if (h->k->arm && (h->step_rc = h->k->arm(h->obj)) < 0)
        goto alive;
    if ((w = px_spawn(waiter, h)) == NULL)
        goto alive;
    for (int i = 0; !h->entered && i < 1000; i++)
        px_yield();                     /* it runs up to its park */
    h->step_rc = h->k->release(h->obj);
    px_join(w, NULL);
    px_fiber_release(w);
alive:
    raise_flag(h, &h->parked);
    wait_flag(h, &h->go);               /* blocks this run's thread */
    return NULL;
}

static void *home_thread(void *arg)
{
    home *h = arg;
    h->run_rc = px_run(h->main, h, NULL);
    raise_flag(h, &h->parked);          /* should the run end early */
    return NULL;
}

static int start(lua_State *L, px_fiber_fn main)
{
    const char *name = luaL_checkstring(L, 1);
    void **ud = lua_touserdata(L, 2);
    luaL_argcheck(L, ud != NULL && *ud != NULL, 2, "a px sync object");
    const kind *k = NULL;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i].name, name) == 0)
            k = &kinds[i];
    luaL_argcheck(L, k != NULL, 1, "a kind of px_foreign");
    home *h = calloc(1, sizeof *h);
    if (h == NULL)
        return luaL_error(L, "px_foreign: out of memory");
    h->k = k;
    h->main = main;
    h->obj = *ud;
    h->wait_rc = 1;                     /* "still waiting" until it returns */
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    if (pthread_create(&h->thread, NULL, home_thread, h) != 0) {
        free(h);
        return luaL_error(L, "px_foreign: no thread");
    }
    if (!wait_flag(h, &h->parked))
        return luaL_error(L, "px_foreign: the other run never got ready");
    lua_pushlightuserdata(L, h);
    return 1;
}

static int l_park(lua_State *L) { return start(L, home_main); }
static int l_use(lua_State *L) { return start(L, used_main); }

static int l_finish(lua_State *L)
{
    home *h = lua_touserdata(L, 1);
    luaL_argcheck(L, h != NULL, 1, "what park returned");
    raise_flag(h, &h->go);
    pthread_join(h->thread, NULL);
    lua_pushinteger(L, h->wait_rc);
    lua_pushinteger(L, h->run_rc != 0 ? h->run_rc : h->step_rc);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
    return 2;
}

/* -- foreign.later: one call from a thread of its own ------------------------- */

typedef struct later {
    pthread_t thread;
    const char *what;
    void *obj;
    long spin;
    int status, rc;
    atomic_int go;
} later;

static void *later_thread(void *arg)
{
    later *t = arg;
    while (!atomic_load(&t->go))
        ;
    for (volatile long i = t->spin; i > 0; i--)
        ;
    if (strcmp(t->what, "group_cancel") == 0)
        t->rc = px_group_cancel(t->obj);
    else if (strcmp(t->what, "future_set") == 0)
        t->rc = px_future_set_result(t->obj, NULL);
    else
        t->rc = px_future_set_error(t->obj, t->status);
    return NULL;
}

static int l_later(lua_State *L)
{
    static const char *const whats[] = { "group_cancel", "future_set", "future_fail", NULL };
    int w = luaL_checkoption(L, 1, NULL, whats);
    void **ud = lua_touserdata(L, 2);
    luaL_argcheck(L, ud != NULL && *ud != NULL, 2, "a px.group() or px.future()");
    later *t = calloc(1, sizeof *t);
    if (t == NULL)
        return luaL_error(L, "px_foreign: out of memory");
    t->what = whats[w];
    t->obj = *ud;
    t->spin = (long)luaL_optinteger(L, 3, 0);
    t->status = (int)luaL_optinteger(L, 4, PX_ECANCELED);
    atomic_init(&t->go, 0);
    if (pthread_create(&t->thread, NULL, later_thread, t) != 0) {
        free(t);
        return luaL_error(L, "px_foreign: no thread");
    }
    lua_pushlightuserdata(L, t);
    return 1;
}

static int l_go(lua_State *L)
{
    later *t = lua_touserdata(L, 1);
    luaL_argcheck(L, t != NULL, 1, "what later returned");
    atomic_store(&t->go, 1);
    return 0;
}

static int l_join(lua_State *L)
{
    later *t = lua_touserdata(L, 1);
    luaL_argcheck(L, t != NULL, 1, "what later returned");
    atomic_store(&t->go, 1);
    pthread_join(t->thread, NULL);
    lua_pushinteger(L, t->rc);
    free(t);
    return 1;
}

int luaopen_px_foreign(lua_State *L);

int luaopen_px_foreign(lua_State *L)
{
    static const luaL_Reg fns[] = { { "park", l_park }, { "use", l_use }, { "finish", l_finish },
                                    { "later", l_later }, { "go", l_go }, { "join", l_join },
                                    { NULL, NULL } };
    luaL_newlib(L, fns);
    return 1;
}
