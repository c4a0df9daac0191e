/*
** pxlua_io.h -- the native half of the Lua fibers' I/O: fd waits, the sockets'
** wait, DNS and files on the blocking pool, as plain lua_CFunctions that yield
** (pxlua_fiber.h's pxlua_wait).  parataxis.i registers pxlua_io with %native as
** parataxis_core.io; bindings/lua/parataxis/io.lua and socket.lua build the
** API over the table it returns.
*/
#ifndef PXLUA_IO_H
#define PXLUA_IO_H

#include <lua.h>

/* Returns a table of the native functions. */
int pxlua_io(lua_State *L);

/* The fd at `arg`: an integer >= 0, or what its getfd() method answers;
** raises EINVAL naming `where` for anything else (px.readable's check). */
int pxlua_check_fd(lua_State *L, int arg, const char *where);

#endif
