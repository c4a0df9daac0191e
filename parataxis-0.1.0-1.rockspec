-- `luarocks make` (in this directory) builds the Lua module with the project's
-- CMake and installs it into the Lua tree: parataxis_core.so (the SWIG module,
-- the core C library linked in statically) into the tree's cpath, parataxis.lua
-- and bindings/lua/parataxis/*.lua into its path.  What is built and installed
-- is the CMake project's (bindings/lua/CMakeLists.txt, component lua), so new C
-- or Lua files of the binding need no edit here.  Needs cmake, a C compiler,
-- SWIG 4 and the Lua headers (Debian: cmake gcc swig liblua5.4-dev luarocks).
rockspec_format = "3.0"
package = "parataxis"
version = "0.1.0-1"

source = {
  -- luarocks make builds the checkout it runs in; this is not fetched then.
  url = "git+file://.",
}

description = {
  summary = "Timer queue, fibers, sync family and fiber I/O for Lua 5.4",
  detailed = [[
    The Lua binding of Parataxis, a C11 library: a thread-safe timer queue whose
    handlers run exactly once on the Lua thread, luv-style timer objects, fibers
    on coroutines with the synchronization family, and fibers that do I/O
    (LuaSocket sockets that park only their fiber, DNS and files on a pool).
  ]],
  license = "MIT",
}

-- LuaSocket is px.socket's and px.serve's socket layer (loaded on their first
-- use).  Where a system package provides it (Debian: lua-socket), which
-- luarocks does not see, `luarocks make --deps-mode=none` skips the fetch.
dependencies = {
  "lua >= 5.4",
  "luasocket >= 3.0",
}

build = {
  -- "command", not "cmake": the cmake back end would build every target and
  -- install every component (the C library and headers too) into the rock.
  type = "command",
  build_command = [[
    $(CMAKE) -S . -B build.luarocks -DCMAKE_BUILD_TYPE=Release \
      -DPARATAXIS_TESTS=OFF -DPARATAXIS_LUA_REQUIRED=ON \
      "-DPX_LUA_INCLUDE=$(LUA_INCDIR)" \
      "-DPARATAXIS_LUA_CMOD=$(LIBDIR)" "-DPARATAXIS_LUA_LMOD=$(LUADIR)" &&
    $(CMAKE) --build build.luarocks --target parataxis_lua
  ]],
  install_command = [[$(CMAKE) --install build.luarocks --component lua]],
}
