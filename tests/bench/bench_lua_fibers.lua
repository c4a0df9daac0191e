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
-- channel:    ping-pong over two unbuffered channels;
-- group:      a px.group of 1,000 members (spawn, run, wait), per member, vs a
--             loop of 1,000 px.spawn then 1,000 joins (tests/bench/bench_structure.cc
--             does the same in C);
-- select:     a consumer selecting over two channels that two producers fill
--             (capacity 64 each), per value received, as bench_structure.cc;
-- map:        px.map of a trivial function over 1,000 items, 16 at once, per item;
-- copas:      the rows copas has an equivalent for, when it is installed
--             (Debian's lua-copas, or a luarocks copas), else a note.
--
-- Ends with one "lua target" line per target, PASS or MISS (tests/bench/run.sh
-- greps them): yield <= 2x a raw resume/yield, spawn+join <= 3x a raw
-- create + resume.
local px = require "parataxis"
local core = require "parataxis_core"
local rounds = tonumber(arg and arg[1]) or 7
local clock = os.clock

-- copas: Debian's lua-copas installs only for Lua 5.1 and 5.2 (pure Lua, it
-- runs on 5.4 with lua-socket and lua-coxpcall); look there too.
local function load_copas()
  local ok, c = pcall(require, "copas")
  if ok then return c end
  package.path = package.path .. ";/usr/share/lua/5.3/?.lua;/usr/share/lua/5.2/?.lua"
  ok, c = pcall(require, "copas")
  return ok and c or nil, c
end
local copas, copas_err = load_copas()

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

local function members() end
local GROUP = 1000

local function px_group_1000()
  return px.run(function()
    local reps = N // GROUP // 4
    local t = clock()
    for _ = 1, reps do
      px.group(function(g) for _ = 1, GROUP do g:spawn(members) end end)
    end
    return (clock() - t) / (reps * GROUP)
  end)
end

local function px_spawn_loop_1000()
  return px.run(function()
    local reps, fs, spawn = N // GROUP // 4, {}, px.spawn
    local t = clock()
    for _ = 1, reps do
      for i = 1, GROUP do fs[i] = spawn(members) end
      for i = 1, GROUP do fs[i]:join() end
    end
    return (clock() - t) / (reps * GROUP)
  end)
end

local function px_select2()
  return px.run(function()
    local a, b, n = px.channel(64), px.channel(64), N
    local function producer(ch) for i = 1, n // 2 do ch:send(i) end end
    local t = clock()
    px.spawn(producer, a)
    px.spawn(producer, b)
    local cases, sum, select = { a:recv_case(), b:recv_case() }, 0, px.select
    for _ = 1, n do
      local _, v = select(cases)
      sum = sum + v
    end
    assert(sum == 2 * ((n // 2) * (n // 2 + 1) // 2))
    return (clock() - t) / n
  end)
end

local function px_map_1000()
  return px.run(function()
    local items, reps = {}, N // GROUP // 4
    for i = 1, GROUP do items[i] = i end
    local f, opts = function(x) return x end, { concurrency = 16 }
    local t = clock()
    for _ = 1, reps do px.map(f, items, opts) end
    return (clock() - t) / (reps * GROUP)
  end)
end

-- 100 fibers sleep an hour 100 times each on the virtual clock (issue 24):
-- the real time a sleep costs when time jumps.
local function px_virtual_sleep()
  local fibers, sleeps = 100, 100
  local t = clock()
  px.run_with({ clock = px.VirtualClock() }, function()
    local fs = {}
    for i = 1, fibers do
      fs[i] = px.spawn(function() for _ = 1, sleeps do px.sleep(3600) end end)
    end
    for i = 1, fibers do fs[i]:join() end
  end)
  return (clock() - t) / (fibers * sleeps)
end

-- copas 1.x (Debian's 1.2.0 package is Copas 1.1.7): addthread creates the
-- coroutine and runs it at once, to its end here, as a socket-less thread;
-- its function gets the socket (nil) first.
local function copas_spawn()
  local add = copas.addthread
  local f = function(_, x) return x end
  local t = clock()
  for i = 1, N do add(f, i) end
  return (clock() - t) / N
end

-- copas >= 2 runs threads from copas.loop, which returns once all ended;
-- copas.pause (4.x; copas.sleep before) yields to the other threads.  These
-- two rows follow copas 4's manual; Debian bookworm's copas (1.1.7) has
-- neither call, so they have not been run against a real copas here.
local function copas_yield()
  local pause = copas.pause or copas.sleep
  local dt
  copas.addthread(function()
    local t = clock()
    for _ = 1, N do pause(0) end
    dt = (clock() - t) / N
  end)
  copas.loop()
  return dt
end

-- copas >= 3: copas.lock; two threads hand it to each other.
local function copas_mutex()
  local m, n, pause, dt = copas.lock.new(), N // 2, copas.pause or copas.sleep, nil
  copas.addthread(function()
    m:get()
    copas.addthread(function() for _ = 1, n do m:get(); m:release() end end)
    local t = clock()
    pause(0)
    for _ = 1, n do m:release(); m:get() end
    m:release()
    dt = (clock() - t) / N
  end)
  copas.loop()
  return dt
end

local cells = {
  { "yield round trip: raw coroutine", raw_yield },
  { "yield round trip: px.yield (C, lua_yieldk)", px_yield },
  { "yield round trip: Lua layer (status + coroutine.yield)", px_yield_lua },
  { "spawn+join: coroutine.create + resume", raw_spawn },
  { "spawn+join: px.spawn + join", px_spawn },
  { "mutex hand-off (per hand-off)", px_mutex },
  { "channel ping-pong (per round trip)", px_channel },
  { "group of 1,000: px.group + g:spawn (per member)", px_group_1000 },
  { "1,000 px.spawn then 1,000 joins (per fiber)", px_spawn_loop_1000 },
  { "select over 2 channels, 2 producers (per value)", px_select2 },
  { "px.map over 1,000 items, 16 at once (per item)", px_map_1000 },
  { "a one-hour px.sleep on px.VirtualClock (100 x 100)", px_virtual_sleep },
}
local copas_rows, copas_lacks = {}, {}
if copas then
  -- copas 1.x's loop never returns: its threads are run by addthread only.
  local looping = (copas.pause or copas.sleep) ~= nil
  if looping then
    table.insert(copas_rows, { "yield round trip: copas.pause(0)", copas_yield })
  else
    table.insert(copas_lacks, "yield (no copas.pause / copas.sleep)")
  end
  table.insert(copas_rows, { "spawn+join: copas.addthread (run to its end)", copas_spawn })
  if looping and type(copas.lock) == "table" then
    table.insert(copas_rows, { "mutex hand-off: copas.lock", copas_mutex })
  else
    table.insert(copas_lacks, "mutex hand-off (no copas.lock)")
  end
  table.insert(copas_lacks, "channel ping-pong (no channel)")
  for _, c in ipairs(copas_rows) do table.insert(cells, c) end
end
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
print(string.format("group of 1,000 / spawn loop with joins: %.2fx", med[8] / med[9]))
if copas then
  print(string.format("copas: %s (%s); rows it has no equivalent for: %s",
    copas._VERSION or "?", package.searchpath("copas", package.path) or "?",
    #copas_lacks > 0 and table.concat(copas_lacks, ", ") or "none"))
else
  print("copas: not installed (apt-get install lua-copas, or luarocks install copas): no copas rows")
end
local function target(what, q, bound)
  print(string.format("lua target  %-46s %.2fx <= %gx  %s", what, q, bound,
    q <= bound and "PASS" or "MISS"))
end
target("yield: px.yield / raw coroutine", med[2] / med[1], 2)
target("spawn+join: px.spawn + join / create + resume", med[5] / med[4], 3)
