/*
** pxswig_check.h -- what keeps the SWIG module parataxis_core from reading a
** foreign value as one of its own (pxswig_check.c).  SWIG's Lua runtime takes
** any full userdata for its object header and nil or a light userdata for a
** NULL pointer; parataxis.i checks every TimerQueue argument with these
** instead, and names a bad argument's type without reading it.
*/
#ifndef PXSWIG_CHECK_H
#define PXSWIG_CHECK_H

#include <lua.h>

/* 1 when the value at idx is a TimerQueue object of this module, else 0. */
int pxswig_check_queue(lua_State *L, int idx);

/* Raises "Error in <fn> (arg <argnum>), expected '<expected>' got '<type>'",
** naming the type of the value at argnum without reading a foreign userdata
** (SWIG_fail_arg's text, made safe).  Does not return. */
int pxswig_check_refuse(lua_State *L, const char *fn, int argnum, const char *expected);

/* From the module's init, with TimerQueue's metatable at mt and the module
** table at mod: remembers the metatable, makes its __eq and SWIG's global
** swig_type and swig_equals answer for foreign values without reading them,
** drops the ownership switch __disown, and hides the module's metatables from
** getmetatable (their functions read their first argument as SWIG's own). */
void pxswig_check_init(lua_State *L, int mt, int mod);

#endif
