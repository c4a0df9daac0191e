--- timer_demo.lua -- the timer queue doing its job from Lua.
--
-- Run:  make demo   (or, from a build tree:
--   LUA_CPATH="build/bindings/?.so;;" LUA_PATH="bindings/lua/?.lua;;" lua5.4 docs/examples/timer_demo.lua)
--
-- Three one-shot timers, one cancelled; a periodic timer cancelled after three
-- ticks.  The worker thread never touches Lua: handlers run here, in q:run().
local parataxis = require "parataxis"

local clock = parataxis.now          -- the library's monotonic clock, seconds
local t0 = clock()
local done = 0

local function say(what)
  return function(aborted)
    done = done + 1
    print(string.format("%7.1f ms  %-28s %s", (clock() - t0) * 1e3, what,
                        aborted and "aborted" or "expired"))
  end
end

print("parataxis " .. parataxis.version .. " from Lua")
local q <close> = parataxis.TimerQueue()
q:add(0.030, say("one-shot, 30 ms"))
q:add(0.010, say("one-shot, 10 ms"))
local doomed = q:add(0.020, say("one-shot, 20 ms, cancelled"))
print(string.format("%7.1f ms  cancel the 20 ms timer: %s", (clock() - t0) * 1e3,
                    tostring(q:cancel(doomed))))

local ticks = 0
local periodic
periodic = q:add_periodic(0.005, 0.015, function(aborted)
  if aborted then return say("periodic, final call")(true) end
  ticks = ticks + 1
  print(string.format("%7.1f ms  periodic, tick %d", (clock() - t0) * 1e3, ticks))
  if ticks == 3 then q:cancel(periodic) end
end)

while done < 4 do q:run() end           -- sleeps until the next call is due
print(string.format("%7.1f ms  every handler ran exactly once; %d pending",
                    (clock() - t0) * 1e3, q:pending()))
