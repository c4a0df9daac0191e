--- parataxis -- timers for Lua: a thread-safe timer queue whose handlers run
-- exactly once, on the Lua thread.
--
--   local parataxis = require "parataxis"
--   local q <close> = parataxis.TimerQueue()
--   q:add(0.010, function(aborted) print(aborted and "aborted" or "expired") end)
--   q:run(0.1)          -- waits up to 0.1 s, runs the handlers that are due
--
-- The queue's worker thread never touches the Lua state: it hands each due
-- timer to a queue that `run` and `drain` empty on the calling thread (its
-- `fileno()` is readable while calls wait, for an event loop).  A handler is
-- called with `aborted` = false when its timer expired and true when it was
-- cancelled first; a periodic handler once per tick and a last time with
-- true.  An error in a handler propagates out of `run`, and the remaining
-- calls of that drain stay queued for the next one.
local core = require "parataxis_core"

local M = { version = core.version(), now = core.now }

local TimerQueue = {}
TimerQueue.__index = TimerQueue

--- A new timer queue (with its worker thread).
function M.TimerQueue()
  local q = core.TimerQueue()
  if q == nil then error("parataxis: out of memory or threads", 2) end
  return setmetatable({ core = q, fns = {}, next_key = 0, backlog = {} }, TimerQueue)
end

local function check_open(self)
  if self.core:closed() ~= 0 then error("parataxis: the timer queue is closed", 3) end
end

local function check_fn(fn)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    error("parataxis: the handler must be callable, got " .. type(fn), 3)
  end
end

local function check_delay(s, what)
  if type(s) ~= "number" or s ~= s or s < 0 then
    error("parataxis: " .. what .. " must be a number >= 0, got " .. tostring(s), 3)
  end
end

local function register(self, fn)
  local key = self.next_key
  self.next_key = key + 1
  self.fns[key] = fn
  return key
end

--- Calls fn(aborted) once, `delay` seconds from now; returns the timer's id.
function TimerQueue:add(delay, fn)
  check_open(self); check_delay(delay, "delay"); check_fn(fn)
  local key = register(self, fn)
  local id = self.core:add(delay, key)
  if id == 0 then self.fns[key] = nil; error("parataxis: delay out of range", 2) end
  return id
end

--- Calls fn(false) every `period` seconds from `first` on, then fn(true) once
-- when cancelled; returns the id.
function TimerQueue:add_periodic(first, period, fn)
  check_open(self); check_delay(first, "first"); check_delay(period, "period"); check_fn(fn)
  if period == 0 then error("parataxis: period must be > 0", 2) end
  local key = register(self, fn)
  local id = self.core:add_periodic(first, period, key)
  if id == 0 then self.fns[key] = nil; error("parataxis: delay out of range", 2) end
  return id
end

--- true when this call cancelled the timer (its handler will run with true),
-- false when it had started, finished or was already cancelled.
function TimerQueue:cancel(id)
  if math.type(id) ~= "integer" then error("parataxis: an id is an integer", 2) end
  return self.core:cancel(id) == 1
end

--- Cancels every pending timer; returns how many.
function TimerQueue:cancel_all() return self.core:cancel_all() end

--- How many timers are pending.
function TimerQueue:pending() return self.core:pending() end

--- A file descriptor readable while handler calls wait.
function TimerQueue:fileno() return self.core:fileno() end

--- Runs the handler calls waiting now; returns how many ran.
function TimerQueue:drain()
  local backlog = self.backlog
  if #backlog == 0 then
    local n = self.core:drain()
    for i = 0, n - 1 do
      backlog[#backlog + 1] = { self.core:fired_key(i), self.core:fired_status(i) }
    end
  end
  local ran = 0
  while #backlog > 0 do
    local call = table.remove(backlog, 1)
    local key, status = call[1], call[2]
    local periodic = key < 0
    if periodic then key = -1 - key end
    local fn = self.fns[key]
    if not periodic or status ~= 0 then self.fns[key] = nil end
    ran = ran + 1
    fn(status ~= 0)
  end
  return ran
end

--- Waits up to `timeout` seconds (default 0) for handler calls, then runs
-- them; returns how many ran.
function TimerQueue:run(timeout)
  timeout = timeout or 0
  check_delay(timeout, "timeout")
  if #self.backlog == 0 and self.core:closed() == 0 then self.core:wait(timeout) end
  if self.core:closed() ~= 0 and #self.backlog == 0 then return 0 end
  return self:drain()
end

--- Aborts every pending timer, runs their handlers with true, and frees the
-- queue.  Closing twice does nothing.
function TimerQueue:close()
  if self.core:closed() ~= 0 then return end
  self.core:shutdown()       -- every call it owed is now queued for drain
  self:drain()
  self.core:close()
end

TimerQueue.__close = TimerQueue.close
TimerQueue.__gc = function(self) if self.core then self.core:close() end end

return M
