--- fiber_demo.lua -- the fiber engine and the sync family doing their job from Lua.
--
-- Run:  make demo   (or, from a build tree:
--   LUA_CPATH="build/bindings/?.so;;" LUA_PATH="bindings/lua/?.lua;;" lua5.4 docs/examples/fiber_demo.lua)
--
-- Fibers are coroutines scheduled by the C scheduler: a producer and two
-- consumers on a channel, a mutex handed over in FIFO order, a timeout that
-- fires at the interrupted wait, timer handlers delivered as fibers, and a
-- deadlock the engine explains -- a dump of the named fibers while they wait,
-- then the report: who waits on whom.
local px = require "parataxis"

local t0 = px.now()

local function say(what)
  print(string.format("%7.1f ms  fiber %d: %s", (px.now() - t0) * 1e3, px.number(), what))
end

local function pipeline()
  local ch = px.channel(2)
  px.spawn(function()
    for i = 0, 4 do ch:send(i) end
    ch:close()
  end)
  local function consume(name)
    local total = 0
    for v in ch:values() do          -- until closed and drained
      say(name .. " got " .. v)
      total = total + v
      px.yield()
    end
    return total
  end
  local a, b = px.spawn(consume, "left"), px.spawn(consume, "right")
  return a:join() + b:join()
end

local function hand_off()
  local m, order, workers = px.mutex(), {}, {}
  for i = 1, 4 do
    workers[i] = px.spawn(function()
      local g <close> = m:guard()    -- unlocks at the end of the scope
      order[#order + 1] = i
      px.sleep(0.001)
    end)
  end
  for _, f in ipairs(workers) do f:join() end
  say("the mutex went to the fibers in the order they asked: " .. table.concat(order, ", "))
end

local function timeouts_and_timers()
  local _, err = px.timeout(0.02, function() px.event():wait() end)   -- nobody sets it
  say("px.timeout(0.02) fired at the interrupted wait: " .. err.code)

  local done, m = px.waitgroup(), px.mutex()
  local function handler(aborted)   -- runs as a fiber of this run: it may lock and wait
    local g <close> = m:guard()
    say("timer handler " .. (aborted and "aborted" or "fired") .. " in a fiber")
    done:done()
  end
  local q <close> = px.TimerQueue{ executor = px.scheduler() }
  for _, delay in ipairs({ 0.03, 0.01 }) do
    done:add()
    q:add(delay, handler)
  end
  done:wait()
end

px.run(function()
  say("pipeline total = " .. pipeline())
  hand_off()
  timeouts_and_timers()
end)

local ok, err = pcall(px.run, function()
  local a, b = px.mutex(), px.mutex()
  a:set_name("account a"); b:set_name("account b")
  local x = px.spawn_named("transfer a->b", function()
    local ga <close> = a:guard(); px.yield()
    local gb <close> = b:guard()
  end)
  local y = px.spawn_named("transfer b->a", function()
    local gb <close> = b:guard(); px.yield()
    local ga <close> = a:guard()
  end)
  px.yield()   -- each takes its first mutex
  px.yield()   -- and parks on its second
  print("px.dump() while they wait:")
  io.stdout:flush()
  px.dump(io.stdout)
  x:join(); y:join()
end)
assert(not ok and err.code == "EDEADLK")
print("px.run raised EDEADLK; the engine's report:")
for line in err.message:gmatch("[^\n]+") do print("    " .. line) end
