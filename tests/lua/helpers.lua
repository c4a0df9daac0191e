-- The helpers the Lua specs share.  A spec loads this file from its own
-- folder, so that it runs wherever busted starts (the checkout, or the
-- scratch directory of tests/install/lua.sh):
--
--   local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local px = require "parataxis"
local assert = require "luassert"   -- busted's assert (a spec's global, not this file's)

local h = {}

-- The error object `fn` raises (fails if it returns).
function h.raised(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return err
end

-- On a fiber: yields until cond() holds (bounded: fails instead of spinning
-- for ever), as YIELD_UNTIL of tests/c/sync/spec.h.
function h.yield_until(cond)
  for _ = 1, 10000 do
    if cond() then return end
    px.yield()
  end
  error("condition not reached")
end

-- On a fiber: spawns fn and yields once; the fiber must be parked then (in
-- the wait a spec is about).
function h.spawn_waiting(fn)
  local f = px.spawn(fn)
  px.yield()
  assert.is_false(f:done(), "the waiter should be parked")
  return f
end

-- Runs the TimerQueue q until cond() holds; fails instead of hanging
-- (margins are generous).
function h.run_until(q, cond)
  for _ = 1, 400 do
    if cond() then return end
    q:run(0.05)
  end
  error("condition not reached in 20 s")
end

-- Waits, without running anything, until n calls of the TimerQueue q are due
-- (queued for run or drain); fails instead of hanging.
function h.wait_due(q, n)
  local deadline = px.now() + 20
  while q.core:size() < n and px.now() < deadline do q.core:wait(0.01) end
  assert.equal(n, q.core:size())
end

-- Spins (no sleep: a Lua state has no other way to wait without running
-- anything) for `s` seconds.
function h.spin(s)
  local until_ = px.now() + s
  while px.now() < until_ do end
end

-- code, preceded by the assignments that give a child interpreter this
-- run's package.path and package.cpath.
function h.with_paths(code)
  return string.format("package.cpath = %q package.path = %q ", package.cpath, package.path) .. code
end

-- Runs the Lua chunk `code` in a fresh lua5.4; its stdout and stderr
-- together, with a last line "status=N" (its exit status).
function h.lua_child(code)
  local p = assert(io.popen(string.format("lua5.4 -e %q 2>&1; echo \"status=$?\"", code)))
  local out = p:read("a")
  p:close()
  return out
end

-- A deadlock report or dump with the fibers' names taken out: `fiber 3
-- "worker"` becomes `fiber 3` (every fiber the report prints has a name,
-- its function's file:line by default), for specs about the rest of a line.
function h.unnamed(report)
  return (report:gsub('(fiber %d+) "[^"]*"', "%1"))
end

return h
