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

#endif
