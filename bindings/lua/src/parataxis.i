/*
** parataxis.i -- the SWIG interface of the bindings.  Lua is its target today:
** `parataxis_core`, the low-level module under bindings/lua/parataxis.lua.
**
** A Lua state is never touched from another thread, so timer handlers do not
** call into Lua: the timer queue's executor is a px_queue, emptied on the Lua
** thread one call at a time by TimerQueue:take(), and each handler only records
** (key, status) for the Lua side to dispatch.  Keys name the Lua functions (kept
** in a Lua table), so no Lua value crosses into C.  Taking one call at a time
** keeps every call the Lua side has not run inside the px_queue, whose
** descriptor is therefore readable exactly while calls wait to be run -- also
** after a Lua handler raised.
** A queue made by queue_on(px.scheduler()) hands its calls to that run instead
** (pxlua_exec.c), to start as fibers on the Lua thread; once the run is over
** they come to its px_queue as above, aborted.
**
** A queue the Lua side never closes -- os.exit(code) skips every finalizer, and
** a queue made while lua_close runs the finalizers gets none -- would keep its
** worker running past the end: at exit(), or when lua_close unloads this module
** and with it the worker's code, the exit hook stops it and says on stderr what
** it owed.
**
** The C that does all this is pxswig.c (declared in pxswig.h), compiled with the
** project's warnings; this file only says what SWIG wraps, and how.
*/
%module parataxis_core

%{
#include "parataxis.h"
#include "pxswig.h"
#include "pxswig_check.h"
#include "pxlua_fiber.h"
#include "pxlua_io.h"
#include "pxlua_exec.h"

/* SWIG names a bad argument's type by reading any userdata as its own
** object: pxswig_check.c names it without reading it. */
#undef SWIG_fail_arg
#define SWIG_fail_arg(func_name, argnum, type) \
    { pxswig_check_refuse(L, func_name, argnum, type); goto fail; }
%}


/* The module table is on top: guard what SWIG's runtime left open. */
%init %{
  SWIG_Lua_get_class_metatable(L, "TimerQueue");
  pxswig_check_init(L, -1, -2);
  lua_pop(L, 1);
%}

/* The fibers and the sync family, and their I/O: hand-written lua_CFunctions
** (pxlua_fiber.c, pxlua_io.c), since a SWIG wrapper cannot yield; fibers()
** and io() return their tables. */
%native(fibers) int pxlua_fibers(lua_State *L);
%native(io) int pxlua_io(lua_State *L);

/* Ids and keys are 64-bit: Lua integers, never floats (an id above 2^53
** would not survive a double). */
%typemap(in, checkfn="lua_isinteger") long long %{ $1 = (long long)lua_tointeger(L, $input); %}
%typemap(out) long long %{ lua_pushinteger(L, (lua_Integer)$1); SWIG_arg++; %}
%typemap(out) int %{ lua_pushinteger(L, (lua_Integer)$1); SWIG_arg++; %}

/* take() returns the recorded call as three values, key, status and the time
** the worker queued it (math.huge: not known), or nothing. */
%typemap(in, numinputs=0) (long long *key, int *status, double *posted)
    (long long k = 0, int st = 0, double at = 0)
%{ $1 = &k; $2 = &st; $3 = &at; %}
%typemap(argout) (long long *key, int *status, double *posted)
%{ if (result) {
    lua_pushinteger(L, (lua_Integer)*$1);
    lua_pushinteger(L, (lua_Integer)*$2);
    lua_pushnumber(L, (lua_Number)*$3);
    SWIG_arg += 3;
} %}
%typemap(out) int take %{ %}

%rename(version) px_version;
%rename(strerror) px_strerror;
const char *px_version(void);
const char *px_strerror(int code);

/* The functions below are pxswig.c's; pxswig.h says what each one does. */
%rename(now) pxswig_now;
double pxswig_now(void);

/* Every TimerQueue argument (a method's self included) is this module's
** TimerQueue object: SWIG's own check takes any userdata, nil and a light
** userdata (pxswig_check.c).  Given before the struct is declared, or
** SWIG does not use it for self. */
%typemap(in) struct TimerQueue * %{
  if (!pxswig_check_queue(L, $input))
    return pxswig_check_refuse(L, "$symname", $argnum, "TimerQueue");
  if (!SWIG_IsOK(SWIG_ConvertPtr(L, $input, (void **)&$1, $descriptor, 0)) || $1 == NULL)
    SWIG_fail_ptr("$symname", $argnum, $descriptor);
%}

typedef struct TimerQueue {} TimerQueue;

%newobject pxswig_closed_queue;
%rename(closed_queue) pxswig_closed_queue;
TimerQueue *pxswig_closed_queue(void);

/* queue_on(px.scheduler()): a queue whose handler calls start as fibers of
** that run (pxlua_exec.c); the argument is checked by pxlua_exec_arg. */
%typemap(in, checkfn="lua_isuserdata") pxhost_exec *x %{ $1 = pxlua_exec_arg(L, $input); %}
%newobject pxswig_queue_on;
%rename(queue_on) pxswig_queue_on;
TimerQueue *pxswig_queue_on(pxhost_exec *x);

/* Declared without bodies: SWIG calls new_TimerQueue, TimerQueue_add, ... */
%extend TimerQueue {
    TimerQueue();
    ~TimerQueue();
    long long add(double delay_s, long long key);
    long long add_periodic(double first_s, double period_s, long long key);
    int cancel(long long id);
    int cancel_all();
    int pending();
    int fileno();
    int wait(double timeout_s);
    int size();
    int take(long long *key, int *status, double *posted);
    int closed();
    long long ident();
    void shutdown();
    void close();
}
