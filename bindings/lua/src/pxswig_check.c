/*
** pxswig_check.c -- the module parataxis_core refuses what is not its own
** (pxswig_check.h).  SWIG's Lua runtime reads any full userdata as its own
** object header (a type pointer, an ownership flag, a pointer), and takes nil
** and a light userdata for a NULL pointer: io.stdout, a px.mutex() or a
** px.token() passed as a queue's self made it read another library's memory
** as a type and call through it.  An object is this module's TimerQueue when
** its metatable is the one SWIG made for the class, which Lua code cannot
** give to a userdata: only C can, and getmetatable does not show it.
*/
#include <lauxlib.h>
#include <lua.h>

#include "pxswig_check.h"

/* The registry key of TimerQueue's metatable. */
static const char queue_mt_key = 0;

int pxswig_check_queue(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx))
        return 0;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &queue_mt_key);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same;
}

/* A name for the type of the value at idx that reads no foreign userdata:
** its metatable's __name when it has one (io.stdout: FILE*). */
static const char *type_name(lua_State *L, int idx)
{
    if (pxswig_check_queue(L, idx))
        return "TimerQueue";
    if (lua_type(L, idx) == LUA_TUSERDATA) {
        int t = luaL_getmetafield(L, idx, "__name");
        if (t == LUA_TSTRING)
            return lua_tostring(L, -1);   /* left on the stack: kept alive */
        if (t != LUA_TNIL)
            lua_pop(L, 1);
    }
    return luaL_typename(L, idx);
}

int pxswig_check_refuse(lua_State *L, const char *fn, int argnum, const char *expected)
{
    const char *got = argnum <= lua_gettop(L) ? type_name(L, argnum) : "no value";
    return luaL_error(L, "Error in %s (arg %d), expected '%s' got '%s'", fn, argnum,
                      expected, got);
}

/* __eq and swig_equals: SWIG's comparison (upvalue 1) for two queues, false
** for anything else, which it would read as queues. */
static int equal_guard(lua_State *L)
{
    if (!pxswig_check_queue(L, 1) || !pxswig_check_queue(L, 2)) {
        lua_pushboolean(L, 0);
        return 1;
    }
    lua_settop(L, 2);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, 2, 1);
    return 1;
}

/* swig_type: SWIG's answer (upvalue 1) for a queue; for any other userdata
** the name SWIG gives one it does not know, without reading it. */
static int type_guard(lua_State *L)
{
    if (pxswig_check_queue(L, 1)) {
        lua_settop(L, 1);
        lua_pushvalue(L, lua_upvalueindex(1));
        lua_insert(L, 1);
        lua_call(L, 1, 1);
        return 1;
    }
    int t = lua_type(L, 1);
    lua_pushstring(L, t == LUA_TUSERDATA || t == LUA_TLIGHTUSERDATA
                          ? "userdata (unknown type)" : luaL_typename(L, 1));
    return 1;
}

/* t[name] = guard, with the function t[name] had as its upvalue (when it
** has one). */
static void guard_field(lua_State *L, int t, const char *name, lua_CFunction guard)
{
    lua_pushstring(L, name);
    lua_rawget(L, t);
    if (!lua_isfunction(L, -1)) {
        lua_pop(L, 1);
        return;
    }
    lua_pushcclosure(L, guard, 1);
    lua_pushstring(L, name);
    lua_insert(L, -2);
    lua_rawset(L, t);
}

/* getmetatable(v) answers a name instead of the metatable of the table or
** userdata at idx (its functions take their first argument for SWIG's own). */
static void hide_metatable(lua_State *L, int idx)
{
    if (!lua_getmetatable(L, idx))
        return;
    lua_pushliteral(L, "parataxis_core");
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
}

void pxswig_check_init(lua_State *L, int mt, int mod)
{
    mt = lua_absindex(L, mt);
    mod = lua_absindex(L, mod);
    lua_pushvalue(L, mt);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &queue_mt_key);
    guard_field(L, mt, "__eq", equal_guard);
    lua_pushglobaltable(L);
    guard_field(L, lua_gettop(L), "swig_equals", equal_guard);
    guard_field(L, lua_gettop(L), "swig_type", type_guard);
    lua_pop(L, 1);
    /* q.core.__disown(v) clears the flag at v's second word, whatever v is;
    ** nothing here gives a queue up to C. */
    if (lua_getfield(L, mt, ".fn") == LUA_TTABLE) {
        lua_pushnil(L);
        lua_setfield(L, -2, "__disown");
    }
    lua_pop(L, 1);
    lua_pushliteral(L, "parataxis_core");
    lua_setfield(L, mt, "__metatable");
    hide_metatable(L, mod);
    if (lua_getfield(L, mod, "TimerQueue") == LUA_TTABLE)
        hide_metatable(L, lua_gettop(L));
    lua_pop(L, 1);
}
