/*
** pxlua_fiber.h -- the hand-written native half of the Lua fibers: hosted fibers
** on coroutines and the synchronization family, as plain lua_CFunctions (a
** SWIG wrapper cannot yield).  parataxis.i registers pxlua_fibers with %native
** as parataxis_core.fibers; bindings/lua/parataxis/fibers.lua builds the API
** over the table it returns.
*/
#ifndef PXLUA_FIBER_H
#define PXLUA_FIBER_H

#include <lua.h>

/* Returns a table of the native functions and of the method tables of the
** fiber, token and sync object metatables. */
int pxlua_fibers(lua_State *L);

/* -- For the binding's other native files (pxlua_io.c) ----------------------- */

/*
** A call that may wait: call() makes the px call from the arguments on the
** stack; when it answers PX_EYIELD the fiber's coroutine yields, and once the
** scheduler resumed it, again() collects the outcome (PX_EYIELD again after a
** stray wake: it yields again); done() pushes the results or raises.  The
** stack is kept across the yield, so all three read the same arguments (and
** whatever call() pushed above them).
*/
typedef struct pxlua_wait_op {
    const char *name;
    int (*call)(lua_State *L);
    int (*again)(lua_State *L);
    int (*done)(lua_State *L, int rc, const char *name);
} pxlua_wait_op;

/* Runs op: first raises ENOFIBER where only the fiber's own coroutine, at a
** point where it can yield, may wait.  Returns what done() returns. */
int pxlua_wait(lua_State *L, const pxlua_wait_op *op);

/* The module's error object {code, message = "<where>: <what rc means>"}:
** pushed, or raised. */
void pxlua_push_error(lua_State *L, int rc, const char *where);
int pxlua_raise(lua_State *L, int rc, const char *where);

/* Raises EINVAL: "<where>: bad argument #<arg> (<name>): <expected> expected,
** got <type>". */
int pxlua_arg_error(lua_State *L, const char *where, int arg, const char *name,
                    const char *expected);

#endif
