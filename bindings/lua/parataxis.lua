--- parataxis -- timers for Lua: a thread-safe timer queue whose handlers run
-- exactly once, on the Lua thread.
--
--   local parataxis = require "parataxis"
--   local q <close> = parataxis.TimerQueue()
--   q:add(0.010, function(aborted) print(aborted and "aborted" or "expired") end)
--   q:run(0.1)          -- waits up to 0.1 s, runs the handlers that are due
--   q:run()             -- waits until a call is due (returns 0 if none is owed)
--
-- The queue's worker thread never touches the Lua state: it hands each due
-- timer to a queue that `run` and `drain` empty on the calling thread, one call
-- at a time (its `fileno()` is readable exactly while calls wait to be run, for an
-- event loop).  A handler is called with `aborted` = false when its timer
-- expired and true when it was cancelled first; a periodic handler once per
-- tick and a last time with true.  An error in a handler propagates out of
-- `run`/`drain`, and the calls not yet run stay queued (the descriptor stays
-- readable) for the next one; `close` runs them all, then re-raises.  A queue
-- dropped without `close` is closed by the collector (see docs/lua.md).
local core = require "parataxis_core"

local M = { version = core.version(), now = core.now }

local TimerQueue = {}
TimerQueue.__index = TimerQueue

local fibers = require "parataxis.fibers"
local Error = fibers.Error

-- A method called on something other than a TimerQueue (q.add(x) for
-- q:add(x), or another value entirely) raises EINVAL, as every method of the
-- fibers and the sync family does.
local function check_self(self, name)
  if getmetatable(self) ~= TimerQueue or type(rawget(self, "core")) ~= "userdata" then
    error(setmetatable({ code = "EINVAL", message = string.format(
      "TimerQueue:%s: bad argument #1 (self): a TimerQueue expected, got %s (use q:%s)",
      name, type(self), name) }, Error), 3)
  end
end

--- A new timer queue (with its worker thread).  TimerQueue{ executor =
-- px.scheduler() } starts each handler call as a new fiber of that running
-- px.run (the handler may lock, wait, sleep), and holds the run while a call is
-- owed to it; once that run is over its calls come aborted, here, as a plain
-- queue's do (q:run, drain, close).
function M.TimerQueue(opts)
  local sched
  if opts ~= nil then
    if type(opts) ~= "table" then
      error("parataxis: TimerQueue: options must be a table, got " .. type(opts), 2)
    end
    sched = opts.executor
    if sched ~= nil and not fibers.is_scheduler(sched) then
      error("parataxis: TimerQueue: executor must be px.scheduler(), got " .. type(sched), 2)
    end
  end
  local q = sched and core.queue_on(sched) or core.TimerQueue()
  if q == nil then error("parataxis: out of memory or threads", 2) end
  -- fns: key -> handler of every timer whose last call is still owed (owed of them);
  -- ended: key -> when a periodic timer's handler last returned (run_one);
  -- on a scheduler, held: key -> true while that call holds the run, and
  -- ticking: key -> 0 while a tick's handler runs, or the status of the final
  -- call owed to its end (dispatch)
  return setmetatable({ core = q, fns = {}, owed = 0, next_key = 0, sched = sched,
                        ended = {}, held = sched and {}, ticking = sched and {},
                        qid = sched and q:ident() }, TimerQueue)
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

-- On a scheduler, a queue owed a call is kept by the run's table of queues
-- (dispatch finds it there, and it is not collected with calls in flight), and
-- each owed call holds the run until its final call starts.
local function register(self, fn)
  local key = self.next_key
  self.next_key = key + 1
  self.fns[key] = fn
  self.owed = self.owed + 1
  local s = self.sched
  if s ~= nil then
    if self.owed == 1 then s:queues()[self.qid] = self end
    if s:hold() then self.held[key] = true end
  end
  return key
end

local function unregister(self, key)
  self.fns[key] = nil
  self.ended[key] = nil
  self.owed = self.owed - 1
  local s = self.sched
  if s ~= nil then
    if self.held[key] then self.held[key] = nil; s:unhold() end
    if self.owed == 0 then s:queues()[self.qid] = nil end
  end
end

--- Calls fn(aborted) once, `delay` seconds from now; returns the timer's id.
function TimerQueue:add(delay, fn)
  check_self(self, "add"); check_open(self); check_delay(delay, "delay"); check_fn(fn)
  local key = register(self, fn)
  local id = self.core:add(delay, key)
  if id == 0 then unregister(self, key); error("parataxis: cannot add the timer: out of memory", 2) end
  return id
end

--- Calls fn(false) every `period` seconds from `first` on, then fn(true) once
-- when cancelled; returns the id.
function TimerQueue:add_periodic(first, period, fn)
  check_self(self, "add_periodic"); check_open(self); check_delay(first, "first"); check_delay(period, "period"); check_fn(fn)
  if period == 0 then error("parataxis: period must be > 0", 2) end
  local key = register(self, fn)
  local id = self.core:add_periodic(first, period, key)
  if id == 0 then unregister(self, key); error("parataxis: cannot add the timer: out of memory", 2) end
  return id
end

--- true when this call cancelled the timer (its handler will run with true),
-- false when it had started, finished or was already cancelled.
function TimerQueue:cancel(id)
  check_self(self, "cancel")
  if math.type(id) ~= "integer" then error("parataxis: an id is an integer", 2) end
  return self.core:cancel(id) == 1
end

--- Cancels every pending timer; returns how many.
function TimerQueue:cancel_all() check_self(self, "cancel_all"); return self.core:cancel_all() end

--- How many timers are pending.
function TimerQueue:pending() check_self(self, "pending"); return self.core:pending() end

--- A file descriptor readable exactly while handler calls wait to be run.
function TimerQueue:fileno() check_self(self, "fileno"); return self.core:fileno() end

-- Runs the handler of the call (key, status) that the core recorded.
local function run_call(self, key, status)
  local periodic = key < 0
  if periodic then key = -1 - key end
  local fn = self.fns[key]
  if not periodic or status ~= 0 then unregister(self, key) end
  return fn(status ~= 0)
end

-- Takes the next queued call and runs its handler: true, and whether a
-- handler ran; false when none waits.  A periodic tick's handler runs after
-- its C call returned, and the worker arms the next tick then: a tick it
-- queued (`posted`, pxswig.c) before the timer's last handler returned is
-- one C's worker would have skipped, so it is coalesced here (its handler
-- does not run), and the next tick keeps the phase.
local function run_one(self)
  local key, status, posted = self.core:take()
  if key == nil then return false end
  if key >= 0 or status ~= 0 then
    run_call(self, key, status)
    return true, true
  end
  local k, ended = -1 - key, self.ended
  if ended[k] ~= nil and posted < ended[k] then return true, false end
  local ok, err = pcall(run_call, self, key, status)
  if self.fns[k] ~= nil then ended[k] = core.now() end
  if not ok then error(err, 0) end
  return true, true
end

local function call_in_fiber(q, key, status)
  local ok, err = pcall(run_call, q, key, status)
  if not ok then pcall(warn, "parataxis: a timer handler's fiber raised: ", tostring(err)) end
end

-- The body of the fiber a call into px.scheduler() starts (pxlua_exec.c): an
-- error in the handler goes to warn(), as nobody joins the fiber.  A tick is
-- over for the timer queue before its fiber starts, and its handler may wait:
-- a tick that comes while one of the same timer runs is coalesced (skipped),
-- and a final call that comes then is made when the running tick returns --
-- ticks never overlap, and the final call is never lost nor early.
fibers._set_dispatch(function(queues, qid, key, status)
  local q = queues[qid]
  if q == nil then return end            -- cannot be: a queue owed a call is kept there
  if key >= 0 then return call_in_fiber(q, key, status) end
  local ticking, k = q.ticking, -1 - key
  if ticking[k] ~= nil then              -- a tick of this timer runs
    if status ~= 0 then ticking[k] = status end
    return
  end
  if status ~= 0 then return call_in_fiber(q, key, status) end
  ticking[k] = 0
  call_in_fiber(q, key, 0)
  local final = ticking[k]
  ticking[k] = nil
  if final ~= 0 then call_in_fiber(q, key, final) end
end)

--- Runs the handler calls waiting now (those they cause wait for the next
-- drain); returns how many ran.
function TimerQueue:drain()
  check_self(self, "drain")
  local budget, taken, ran = self.core:size(), 0, 0
  while taken < budget do
    local got, made = run_one(self)
    if not got then break end
    taken = taken + 1
    if made then ran = ran + 1 end
  end
  return ran
end

-- C's rule, in every binding: a duration of 2^63 ns or more (about
-- 9223372036.85 s, 292 years; math.huge too) does not fit the C side's int64
-- nanoseconds and means "never": a timer that never fires (pxswig.c, to_ns), a
-- wait without a bound.
local NS_LIMIT = 2.0 ^ 63

--- Waits up to `timeout` seconds for handler calls, then runs them; returns how
-- many ran.  With no timeout (or math.huge, or any of 2^63 ns or more) it waits
-- until a call is due; it returns 0 at once when no call is owed at all.
function TimerQueue:run(timeout)
  check_self(self, "run")
  local core = self.core
  if timeout ~= nil then check_delay(timeout, "timeout") end
  if self.sched ~= nil and self.sched:alive() then
    error("parataxis: TimerQueue:run: its calls start as fibers of the running px.run; "
          .. "wait for what the handlers do instead", 2)
  end
  if core:closed() ~= 0 then return 0 end
  if timeout == nil or timeout * 1e9 >= NS_LIMIT then
    if self.owed == 0 then return 0 end
    -- 0 is a signal: loop here, in Lua, so that a hook (Ctrl-C) can act.
    local r
    repeat r = core:wait(-1) until r ~= 0
    if r < 0 then error("parataxis: waiting on the queue's descriptor failed", 2) end
  else
    core:wait(timeout)
  end
  return self:drain()
end

-- Aborts every pending timer, runs every call owed whatever a handler raises
-- (each error goes to on_error), and frees the queue.
local function finish(self, on_error)
  self.core:shutdown()         -- every call it owed is now queued
  while true do
    local ok, more = pcall(run_one, self)
    if ok and not more then break end
    if not ok then on_error(more) end
  end
  self.core:close()
end

--- Aborts every pending timer, runs every call owed (the aborted ones with
-- true), and frees the queue.  A handler's error does not stop it: once every
-- call ran, the first error is raised again, and each further one is reported
-- with warn().  Closing twice does nothing.
function TimerQueue:close()
  check_self(self, "close")
  if self.closing or self.core:closed() ~= 0 then return end
  self.closing = true          -- a handler that closes the queue again: a no-op
  local failed, first = 0, nil
  finish(self, function(err)
    failed = failed + 1
    if failed == 1 then first = err
    else warn("parataxis: a further handler error during close: ", tostring(err)) end
  end)
  self.closing = nil
  if failed > 0 then error(first, 0) end
end

TimerQueue.__close = TimerQueue.close

-- What a collected queue's core becomes: closed, owing nothing, shared.
local CLOSED = core.closed_queue()

local function show(err)
  local ok, s = pcall(tostring, err)
  return ok and s or "(an error value that tostring cannot show)"
end

-- Dropping a queue closes it: the collector calls this once the queue is
-- unreachable (its handlers may capture it: the table fns is all that holds
-- them, and a cycle is collected like any garbage).  It runs every owed call,
-- aborted, here and now; a finalizer cannot raise, so each handler error goes
-- to warn().  A close interrupted for good (a handler yielded out of it, in a
-- coroutine since collected) is finished here too.  A handler that keeps the
-- queue alive finds it closed: its core is CLOSED, not the C object the
-- collector frees next.
TimerQueue.__gc = function(self)
  if getmetatable(self) ~= TimerQueue then return end   -- called by hand, on another value
  local c = rawget(self, "core")
  if c == nil or c == CLOSED then return end
  finish(self, function(err)
    pcall(warn, "parataxis: a handler error while a dropped TimerQueue was collected: ",
          show(err))
  end)
  self.core = CLOSED
  self.closing = nil
end

--- px.timer(q): a luv-style timer object on q (bindings/lua/parataxis/timer.lua).
M.timer = require("parataxis.timer")(TimerQueue)

-- Fibers and the sync family: px.run, px.spawn, px.mutex, ... (parataxis/fibers.lua).
for k, v in pairs(fibers) do M[k] = v end
M._set_dispatch = nil

-- Fibers doing I/O (bindings/lua/src/pxlua_io.c): waits on any fd, DNS and
-- whole files on the blocking pool.
local IO = core.io()
M.wait_readable, M.wait_writable = IO.wait_readable, IO.wait_writable
M.notify_closing, M.getaddrinfo = IO.notify_closing, IO.getaddrinfo
M.read_file, M.write_file = IO.read_file, IO.write_file

-- px.socket and px.serve (parataxis/socket.lua) are loaded on first use: only
-- they need LuaSocket.
setmetatable(M, { __index = function(t, k)
  if k ~= "socket" and k ~= "serve" then return nil end
  local sock = require "parataxis.socket"
  rawset(t, "socket", sock)
  rawset(t, "serve", sock.serve)
  return rawget(t, k)
end })

return M
