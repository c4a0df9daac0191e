-- One hot path of the Lua binding, N times, for tests/bench/prof_binding.sh:
--   lua5.4 prof_lua.lua CASE N
-- spawn (+ join), yield, mutex (a hand-off between two fibers), chan (an
-- unbuffered send and recv), timeout (a px.timeout that does not fire).
local px = require "parataxis"
local what, n = arg[1], tonumber(arg[2])
local fn = function() return 1 end
local cases = {
  spawn = function() for _ = 1, n do px.spawn(fn):join() end end,
  yield = function() for _ = 1, n do px.yield() end end,
  mutex = function()
    local m = px.mutex()
    local g = px.spawn(function() for _ = 1, n do m:lock(); px.yield(); m:unlock() end end)
    for _ = 1, n do m:lock(); px.yield(); m:unlock() end
    g:join()
  end,
  chan = function()
    local ch = px.channel()
    local g = px.spawn(function() for i = 1, n do ch:send(i) end end)
    for _ = 1, n do ch:recv() end
    g:join()
  end,
  timeout = function() for _ = 1, n do px.timeout(10, function() end) end end,
}
px.run(assert(cases[what], "no such case"))
