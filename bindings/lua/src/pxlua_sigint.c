/*
** pxlua_sigint.c -- Ctrl-C during px.run (pxlua_sigint.h).
**
** The lua5.4 interpreter answers SIGINT by setting a hook on its main state
** that raises "interrupted!" at the next Lua instruction there.  During
** px.run that state is inside a C call, and the fibers run on coroutines,
** whose hooks are their own: the interrupt waited for the run to end, for
** ever with fibers that loop.  So for as long as the run runs, our handler
** comes first:
**
** - it records the signal (a sig_atomic_t) and sets the interpreter's kind of
**   hook on the coroutine running then, if any, which stops a fiber that
**   never waits;
** - it wakes the run (px_sched_wake, async-signal-safe): a wait in the
**   kernel ends -- also one that had not begun when the signal came, after
**   the on_wait hook looked -- and the hook, called again, sees the record:
**   it posts a function that cancels the run (px_sched_post is allowed
**   there; from the handler it is not async-signal-safe);
** - a fiber's resume that returns sees it too (pxlua_fiber.c);
** - it calls the handler it stands in front of, which stays in charge: the
**   interpreter's sets SIGINT back to the default action, so a second Ctrl-C
**   ends the process, as it does outside px.run.
**
** The run then cancels every fiber and, as it does, takes off the hook the
** interpreter's handler set (pxlua_sigint_disarm: never from the handler,
** which must leave the interpreter's answer as it made it); each fiber
** unwinds through its <close> variables -- which may start fibers, a timer
** handler's too -- and px.run raises "interrupted!".  A SIGINT delivered to another
** thread (a timer queue's worker) is sent on to the run's thread, whose wait
** it must end.
*/
#define _POSIX_C_SOURCE 200809L     /* sigaction, pthread_kill */

#include <lauxlib.h>
#include <lua.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "pxlua_sigint.h"

static atomic_flag taken = ATOMIC_FLAG_INIT;    /* a run has SIGINT */
static struct sigaction before;                 /* what it had */
static pthread_t run_thread;
static px_sched *run_sched;                     /* the run to wake */
volatile sig_atomic_t pxlua_sigint_came;        /* a SIGINT came during the run */
lua_State *volatile pxlua_sigint_running;       /* the coroutine resumed now */
static int posted;                              /* interrupt() was posted */
/* The hooks, at the start, of the thread that called px.run and of the
** state's main thread, where the interpreter's handler sets its own. */
typedef struct saved_hook { lua_State *L; lua_Hook fn; int mask, count; } saved_hook;
static saved_hook saved[2];

/* The interpreter's own answer, in the fiber that was running. */
static void stop_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

static void on_sigint(int sig, siginfo_t *info, void *uctx)
{
    int saved_errno = errno;
    if (!pthread_equal(pthread_self(), run_thread)) {
        (void)pthread_kill(run_thread, sig);    /* its wait must end */
        errno = saved_errno;
        return;
    }
    pxlua_sigint_came = 1;
    (void)px_sched_wake(run_sched);
    lua_State *co = pxlua_sigint_running;
    if (co != NULL)
        lua_sethook(co, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
    if (before.sa_flags & SA_SIGINFO)
        before.sa_sigaction(sig, info, uctx);
    else
        before.sa_handler(sig);
    errno = saved_errno;
}

static int is_handler(const struct sigaction *sa)
{
    if (sa->sa_flags & SA_SIGINFO)
        return sa->sa_sigaction != NULL;
    return sa->sa_handler != SIG_DFL && sa->sa_handler != SIG_IGN;
}

static void save_hook(saved_hook *h, lua_State *L)
{
    h->L = L;
    h->fn = lua_gethook(L);
    h->mask = lua_gethookmask(L);
    h->count = lua_gethookcount(L);
}

/* The hook the interpreter's handler set goes: it would raise "interrupted!"
** a second time, at the next instruction of the caller (and after a pcall
** that caught ours) -- and, while the run unwinds, in the calls the run makes
** on its thread (a timer handler's fiber starting, pxlua_exec.c) and in every
** coroutine made there, which takes that thread's hook. */
static void restore_hook(const saved_hook *h)
{
    if (h->L != NULL && lua_gethook(h->L) != h->fn)
        lua_sethook(h->L, h->fn, h->mask, h->count);
}

int pxlua_sigint_begin(lua_State *L, px_sched *s)
{
    if (atomic_flag_test_and_set(&taken))
        return 0;
    struct sigaction now;
    if (sigaction(SIGINT, NULL, &now) != 0 || !is_handler(&now)) {
        atomic_flag_clear(&taken);
        return 0;
    }
    before = now;
    run_thread = pthread_self();
    run_sched = s;
    pxlua_sigint_came = 0;
    pxlua_sigint_running = NULL;
    posted = 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    lua_State *main_thread = lua_tothread(L, -1);
    lua_pop(L, 1);
    save_hook(&saved[0], L);
    save_hook(&saved[1], main_thread);
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_sigint;
    ours.sa_mask = before.sa_mask;
    ours.sa_flags = SA_SIGINFO | (before.sa_flags & SA_RESTART);
    if (sigaction(SIGINT, &ours, NULL) != 0) {
        atomic_flag_clear(&taken);
        return 0;
    }
    return 1;
}

int pxlua_sigint_end(void)
{
    struct sigaction now;
    if (sigaction(SIGINT, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) &&
        now.sa_sigaction == on_sigint)
        (void)sigaction(SIGINT, &before, NULL);
    int interrupted = pxlua_sigint_came;
    pxlua_sigint_disarm();
    pxlua_sigint_came = 0;
    atomic_flag_clear(&taken);
    return interrupted;
}

void pxlua_sigint_disarm(void)
{
    if (!pxlua_sigint_came)
        return;
    restore_hook(&saved[0]);
    restore_hook(&saved[1]);
}

void pxlua_sigint_unhook(lua_State *co)
{
    if (lua_gethook(co) == stop_hook)
        lua_sethook(co, NULL, 0, 0);
}

void pxlua_sigint_on_wait(px_sched *s, px_fiber_fn interrupt, void *ctx)
{
    /* Before the wait (a signal came already) and after it. */
    if (pxlua_sigint_came && !posted && px_sched_post(s, interrupt, ctx) == 0)
        posted = 1;
}
