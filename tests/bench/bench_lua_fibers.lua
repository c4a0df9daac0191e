-- bench_lua_fibers.lua -- Lua fibers beside raw coroutines, in one process,
-- interleaved rounds, medians (this machine drifts between processes):
--
--   LUA_CPATH="build/bindings/?.so;;" LUA_PATH="bindings/lua/?.lua;;" \
--       lua5.4 tests/bench/bench_lua_fibers.lua [rounds]
--
-- yield:      px.yield() round trip (the scheduler resumes the coroutine, the
--             C function yields it back) vs coroutine.resume/yield;
-- yield-lua:  the same through a Lua layer (core.yield_status + coroutine.yield),
--             the other way the binding could be built;
-- spawn+join: px.spawn(fn):join() vs coroutine.create + resume to its end;
-- mutex:      two fibers handing a mutex to each other (FIFO hand-off);
-- channel:    ping-pong over two unbuffered channels.
local px = require "parataxis"
local core = require "parataxis_core"
local rounds = tonumber(arg and arg[1]) or 7
local clock = os.clock

local N = 200000

local function raw_yield()
  local co = coroutine.wrap(function() while true do coroutine.yield() end end)
  local t = clock()
  for _ = 1, N do co() end
  return (clock() - t) / N
end

local function px_yield()
  return px.run(function()
    local y = px.yield
    local t = clock()
    for _ = 1, N do y() end
    return (clock() - t) / N
  end)
end

local EYIELD = -10
local N_ = core.fibers()
local function px_yield_lua()
  return px.run(function()
    local status, cy = N_.yield_status, coroutine.yield
    local t = clock()
    for _ = 1, N do if status() == EYIELD then cy() end end
    return (clock() - t) / N
  end)
end

local function raw_spawn()
  local f = function(x) return x end
  local t = clock()
  for i = 1, N do local co = coroutine.create(f); coroutine.resume(co, i) end
  return (clock() - t) / N
end

local function px_spawn()
  return px.run(function()
    local f, spawn = function(x) return x end, px.spawn
    local t = clock()
    for i = 1, N do spawn(f, i):join() end
    return (clock() - t) / N
  end)
end

local function px_mutex()
  return px.run(function()
    local m, n = px.mutex(), N // 2
    m:lock()
    local other = px.spawn(function()
      for _ = 1, n do m:lock(); m:unlock() end
    end)
    local t = clock()
    px.yield()
    for _ = 1, n do m:unlock(); m:lock() end
    m:unlock()
    other:join()
    return (clock() - t) / N
  end)
end

local function px_channel()
  return px.run(function()
    local ping, pong, n = px.channel(0), px.channel(0), N // 2
    local other = px.spawn(function()
      for _ = 1, n do pong:send(ping:recv()) end
    end)
    local t = clock()
    for i = 1, n do ping:send(i); pong:recv() end
    other:join()
    return (clock() - t) / n
  end)
end

local cells = {
  { "yield round trip: raw coroutine", raw_yield },
  { "yield round trip: px.yield (C, lua_yieldk)", px_yield },
  { "yield round trip: Lua layer (status + coroutine.yield)", px_yield_lua },
  { "spawn+join: coroutine.create + resume", raw_spawn },
  { "spawn+join: px.spawn + join", px_spawn },
  { "mutex hand-off (per hand-off)", px_mutex },
  { "channel ping-pong (per round trip)", px_channel },
}
local samples = {}
for _ = 1, rounds do
  for i, c in ipairs(cells) do
    samples[i] = samples[i] or {}
    collectgarbage()
    table.insert(samples[i], c[2]())
  end
end
local med = {}
for i, c in ipairs(cells) do
  table.sort(samples[i])
  med[i] = samples[i][(#samples[i] + 1) // 2]
  print(string.format("%-58s %8.1f ns", c[1], med[i] * 1e9))
end
print(string.format("px.yield / raw: %.2fx (target <= 2); Lua layer / raw: %.2fx; spawn+join / raw: %.2fx (target <= 3)",
  med[2] / med[1], med[3] / med[1], med[5] / med[4]))
