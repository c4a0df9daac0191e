#!/bin/sh
# The Lua module as users install it, two ways, each into a scratch directory:
#   1. `luarocks make` of the rockspec into a scratch tree (--tree), then the
#      smoke script and every busted spec with that tree's paths only
#      (`luarocks path`), run outside the checkout; the build must print no
#      CMake warning;
#   2. `cmake --install` (component lua) of the build tree $1 into a scratch
#      prefix, then the smoke script with Lua's default layout under it.
# It also checks that this layout under /usr/local is in the interpreter's
# built-in path and cpath, where a plain `cmake --install` puts the module, so
# that `require "parataxis"` works there with no LUA_PATH or LUA_CPATH.
set -eu
build=${1:-build}
src=$(cd "$(dirname "$0")/../.." && pwd)
case $build in /*) ;; *) build=$src/$build ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
smoke=$src/tests/install/lua_smoke.lua
unset LUA_PATH LUA_CPATH LUA_PATH_5_4 LUA_CPATH_5_4

echo "== luarocks make into $work/tree"
# --deps-mode=none: LuaSocket, the rockspec's dependency, is Debian's lua-socket
# here (.ci/deps), a system package that luarocks does not see.
(cd "$src" && luarocks --lua-version 5.4 --tree="$work/tree" make --deps-mode=none \
     >"$work/rock.log" 2>&1) ||
    { cat "$work/rock.log"; exit 1; }
# A warning of CMake's (an unused -D of the rockspec, a deprecated call) is a
# defect a user would see on every install: the build must be clean.
if grep -q "CMake Warning\|CMake Deprecation Warning" "$work/rock.log"; then
    cat "$work/rock.log"
    echo "lua install test: luarocks make printed a CMake warning" >&2
    exit 1
fi
(
    eval "$(luarocks --lua-version 5.4 --tree="$work/tree" path --no-bin)"
    # As Lua 5.4's own variables: busted starts under the system's `lua`
    # (Debian: 5.1), which must keep its own paths, then runs lua5.4.
    export LUA_PATH_5_4="$LUA_PATH" LUA_CPATH_5_4="$LUA_CPATH"
    unset LUA_PATH LUA_CPATH
    cd "$work"
    lua5.4 "$smoke" "$work/tree"
    busted --lua=lua5.4 "$src/tests/lua"
)

echo "== cmake --install into $work/prefix"
cmake --install "$build" --prefix "$work/prefix" --component lua >/dev/null
(
    cd "$work"
    LUA_PATH="$work/prefix/share/lua/5.4/?.lua;;" LUA_CPATH="$work/prefix/lib/lua/5.4/?.so;;" \
        lua5.4 "$smoke" "$work/prefix"
)
lua5.4 -e '
    assert(package.cpath:find("/usr/local/lib/lua/5.4/?.so", 1, true), package.cpath)
    assert(package.path:find("/usr/local/share/lua/5.4/?.lua", 1, true), package.path)'
echo "lua install test: ok"
