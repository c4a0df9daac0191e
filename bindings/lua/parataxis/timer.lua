--- parataxis.timer -- luv-style timer objects over a TimerQueue:
--
--   local t = px.timer(q)
--   t:start(0.5, 0.1, function(t) ... end)   -- first after 0.5 s, then every 0.1 s
--   t:stop(); t:again(); t:set_repeat(0.2); t:get_repeat(); t:get_due_in()
--   t:is_active(); t:close()
--
-- The semantics are libuv's uv_timer_*, in seconds: a repeating timer is rearmed
-- `repeat` seconds after the moment its call runs (before the handler is
-- called), so it drifts by the handler's lateness instead of catching up.
--
-- Each expiry is one one-shot timer of the queue, whose queue handler (called
-- exactly once, on the Lua thread, by q:run / q:drain) calls the user's handler
-- at most once.  An arming is identified by `gen`: stop, start and again move it
-- on, so a queue call of an earlier arming -- already due, not yet run -- finds
-- itself stale and calls nothing.  stop() thus wins over a call already due until
-- that call has started; a handler that has started is not affected.
local core = require "parataxis_core"

local Timer = {}
Timer.__index = Timer

-- A duration of 2^63 ns or more (math.huge too) is "never", as in C: the
-- queue's timer for it never fires (parataxis.lua, NS_LIMIT).
local function check_seconds(s, fname, what)
  if type(s) ~= "number" or s ~= s or s < 0 then
    error("parataxis: timer:" .. fname .. ": " .. what .. " must be a number >= 0, got "
          .. tostring(s), 3)
  end
end

local Error = require("parataxis.fibers").Error

-- A method called on something other than a timer raises EINVAL, as every
-- method of the fibers and the sync family does.
local function check_timer(self, fname)
  if getmetatable(self) ~= Timer then
    error(setmetatable({ code = "EINVAL", message = "parataxis: timer:" .. fname ..
      ": called without a timer (use t:" .. fname .. "), got " .. type(self) }, Error), 3)
  end
end

local function check_usable(self, fname)
  check_timer(self, fname)
  if self.closed then error("parataxis: timer:" .. fname .. ": the timer is closed", 3) end
  if self.q.core:closed() ~= 0 then
    error("parataxis: timer:" .. fname .. ": the timer queue is closed", 3)
  end
end

-- Cancels the current arming (its queue call, if still to come, calls nothing).
local function disarm(self)
  self.gen = self.gen + 1
  if self.id then
    self.q:cancel(self.id)       -- false when already due: the gen check drops it
    self.id, self.due = nil, nil
  end
end

local arm

-- The queue's handler of one arming: runs once, on the Lua thread.
local function expiry(self, gen)
  return function(aborted)
    if gen ~= self.gen then return end   -- stopped or restarted since
    self.id, self.due = nil, nil
    if aborted then return end            -- the queue aborted it: closed, cancel_all
    -- Rearmed before the call, as libuv does; not on a queue closed meanwhile.
    if self.rep > 0 and self.q.core:closed() == 0 then arm(self, self.rep) end
    self.fn(self)
  end
end

arm = function(self, timeout)
  local gen = self.gen
  self.due = core.now() + timeout
  self.id = self.q:add(timeout, expiry(self, gen))
end

--- Starts the timer: fn(t) after `timeout` seconds, then every `rep` seconds
-- if `rep` > 0.  An active timer is restarted (its call still to come is
-- dropped).  Returns 0, as luv does.
function Timer:start(timeout, rep, fn)
  check_usable(self, "start")
  check_seconds(timeout, "start", "timeout")
  check_seconds(rep, "start", "repeat")
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    error("parataxis: timer:start: the handler must be callable, got " .. type(fn), 2)
  end
  disarm(self)
  self.fn, self.rep = fn, rep
  arm(self, timeout)
  return 0
end

--- Stops the timer: its handler is not called again, also not for an expiry
-- already due whose call has not started.  Stopping a stopped or closed timer
-- does nothing.  Returns 0.
function Timer:stop()
  check_timer(self, "stop")
  if not self.closed then disarm(self) end
  return 0
end

--- Stops the timer and, if its repeat is > 0, starts it again with the repeat
-- as the timeout.  Raises if it was never started.  Returns 0.
function Timer:again()
  check_usable(self, "again")
  if self.fn == nil then error("parataxis: timer:again: the timer was never started", 2) end
  disarm(self)
  if self.rep > 0 then arm(self, self.rep) end
  return 0
end

--- Sets the repeat interval; it takes effect at the next arming (the next
-- expiry of a repeating timer, or again()), not on the one now due.
function Timer:set_repeat(rep)
  check_usable(self, "set_repeat")
  check_seconds(rep, "set_repeat", "repeat")
  self.rep = rep
end

--- The repeat interval in seconds (0: one-shot).
function Timer:get_repeat() check_timer(self, "get_repeat"); return self.rep end

--- Seconds until the timer fires; 0 when it is not active or already due.
function Timer:get_due_in()
  check_timer(self, "get_due_in")
  if self.due == nil then return 0 end
  local d = self.due - core.now()
  return d > 0 and d or 0
end

--- true from start (or again) until its one-shot call runs or it is stopped.
function Timer:is_active() check_timer(self, "is_active"); return self.id ~= nil end

--- Stops the timer for good: later start, again and set_repeat raise.  Twice
-- is harmless.
function Timer:close()
  check_timer(self, "close")
  if self.closed then return end
  disarm(self)
  self.closed, self.fn = true, nil
end

Timer.__close = Timer.close
Timer.__name = "parataxis.timer"

--- Returns px.timer: new timers on a queue of class TimerQueue.
return function(TimerQueue)
  return function(q)
    if getmetatable(q) ~= TimerQueue then
      error(setmetatable({ code = "EINVAL", message =
        "parataxis: timer: argument #1 must be a TimerQueue, got " .. type(q) }, Error), 2)
    end
    return setmetatable({ q = q, gen = 0, rep = 0 }, Timer)
  end
end
