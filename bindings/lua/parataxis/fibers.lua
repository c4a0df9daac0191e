--- parataxis.fibers -- fibers on coroutines and the synchronization family; the
-- parataxis module re-exports all of it (px.run, px.spawn, px.mutex, ...).
--
-- The native half is bindings/lua/src/pxlua_fiber.c (parataxis_core.fibers()): every
-- call that may wait is a C function that yields the fiber's coroutine to the
-- C scheduler and collects its outcome once resumed.  This file adds what is
-- plain Lua: the scopes (px.timeout, px.with_cancel), the guards, Once:call,
-- Channel:values, what a group's end returns or raises (px.group) and px.map.
--
-- One rule for errors: every error the API raises is an error object, a table
-- { code = "ETIMEDOUT", message = "..." } whose tostring is "message (code)".
-- Waits interrupted by a scope, and misuse (a relock, an unlock by a
-- non-owner, a wait off-fiber, bad arguments: code "EINVAL"), raise it;
-- px.timeout and px.with_cancel turn their own scope's interrupt into the
-- return values nil, err.  Outcomes a caller is meant to handle are returned:
-- `true, err` from a lock that took over a dead owner's hold ("EOWNERDEAD"),
-- `nil, err` from a try form that would wait ("EBUSY") and from a channel that
-- is closed ("ECLOSED").
local core = require "parataxis_core"

local N = core.fibers()
local Error = N.Error

local M = {
  run = N.run, spawn = N.spawn, self = N.self, sleep = N.sleep, yield = N.yield,
  token = N.token, mutex = N.mutex, rwlock = N.rwlock, waitgroup = N.waitgroup,
  barrier = N.barrier, once = N.once, semaphore = N.semaphore, event = N.event,
  channel = N.channel, Error = Error,
  -- select: px.select{ ch:recv_case(), ..., default = true } and the cases
  -- that are not a sync object's method
  select = N.select, readable = N.readable, writable = N.writable, deadline = N.deadline,
  -- futures: px.future(), px.wait_all{...}, px.wait_any{...}
  future = N.future, wait_all = N.wait_all, wait_any = N.wait_any,
  -- px.scheduler(): the running run's Scheduler, for TimerQueue{ executor = ... }
  scheduler = N.scheduler,
  _set_dispatch = N.set_dispatch,        -- for parataxis.lua, not exported
  -- px._wake(id): px_wake of fiber `id`, true when it was parked; a test hook
  -- (a wake nobody granted: every wait of the library waits on, tests/lua/stray_wake_spec.lua)
  _wake = N.wake,
  -- seeing into a run (docs/lua.md, "Seeing into a run"): names, the dump,
  -- fiber-local values
  spawn_named = N.spawn_named, set_name = N.set_name, name = N.name, number = N.number,
  dump = N.dump, dump_signal = N.dump_signal, fiber_local = N.fiber_local,
  FiberLocal = N.FiberLocal,
}

--- true when v is a Scheduler (px.scheduler()).
local Scheduler = N.Scheduler
function M.is_scheduler(v)
  local mt = type(v) == "userdata" and getmetatable(v)
  return mt and mt.__index == Scheduler or false
end

--- true when v is one of the API's error objects (with code `code`, if given).
function M.is_error(v, code)
  return getmetatable(v) == Error and (code == nil or v.code == code)
end

local function raise_arg(where, arg, name, expected, got)
  error(setmetatable({ code = "EINVAL", message = string.format(
    "%s: bad argument #%d (%s): %s expected, got %s", where, arg, name, expected,
    type(got)) }, Error), 3)
end

local function check_callable(fn, where, arg)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    raise_arg(where, arg, "fn", "a function", fn)
  end
end

-- Closes the scope that px.timeout / px.with_cancel opened and returns fn's
-- results; an error that is this scope's own interrupt becomes nil, err.
local pop = N.pop
local function close_scope(ok, ...)
  local fired = pop()
  if ok then return ... end
  local err = ...
  if fired ~= nil and getmetatable(err) == Error and err.code == fired then
    return nil, err
  end
  error(err, 0)
end

--- Runs fn(...) with every wait inside bounded by `seconds` from now: fn's
-- results, or nil, err (err.code == "ETIMEDOUT") when the deadline interrupted it.
function M.timeout(seconds, fn, ...)
  check_callable(fn, "px.timeout", 2)
  N.push_timeout(seconds)
  return close_scope(pcall(fn, ...))
end

--- Runs fn(...) with every wait inside interrupted once `tok` is cancelled:
-- fn's results, or nil, err (err.code == "ECANCELED").
function M.with_cancel(tok, fn, ...)
  check_callable(fn, "px.with_cancel", 2)
  N.push_cancel(tok)
  return close_scope(pcall(fn, ...))
end

-- Guards: to-be-closed values that release what their call acquired.
local function guard_class(release)
  return { __close = function(g) local obj = g[1]; g[1] = nil; if obj then release(obj) end end,
           __name = "parataxis.Guard" }
end

local Mutex, RwLock, Sem = N.Mutex, N.RwLock, N.Semaphore
-- The guards call the C methods themselves, not self:lock(): those check
-- self (EINVAL for anything else), where a method lookup on another value
-- would fail as "attempt to call a nil value".
local lock, rdlock, wrlock, acquire = Mutex.lock, RwLock.rdlock, RwLock.wrlock, Sem.acquire
local MutexGuard = guard_class(Mutex.unlock)
local ReadGuard = guard_class(RwLock.rdunlock)
local WriteGuard = guard_class(RwLock.wrunlock)
local SemGuard = guard_class(Sem.release)

--- local g <close>, dead = m:guard(): locks m until g goes out of scope
-- (dead is the EOWNERDEAD error when a dead owner left it).
function Mutex:guard()
  local _, dead = lock(self)
  return setmetatable({ self }, MutexGuard), dead
end

function RwLock:read_guard()
  local _, dead = rdlock(self)
  return setmetatable({ self }, ReadGuard), dead
end

function RwLock:write_guard()
  local _, dead = wrlock(self)
  return setmetatable({ self }, WriteGuard), dead
end

function Sem:guard()
  acquire(self)
  return setmetatable({ self }, SemGuard)
end

-- Once:call(fn, ...): the caller that runs the action gets fn's results; the
-- others wait for it to end and get nothing.  An action that raised is done
-- (never retried) and its error propagates from the call that ran it.
local Once = N.Once
local begin, finish = Once.begin, Once.finish
Once.begin, Once.finish = nil, nil
local function finish_once(o, ok, ...)
  finish(o)
  if not ok then error((...), 0) end
  return ...
end

function Once:call(fn, ...)
  check_callable(fn, "once:call", 2)
  if not begin(self) then return end
  return finish_once(self, pcall(fn, ...))
end

--- for v in ch:values() do ... end: receives until the channel is closed and drained.
local Channel = N.Channel
local recv = Channel.recv
local function next_value(ch) return (recv(ch)) end
function Channel:values() return next_value, self end

-- Groups: px.group(fn, ...) and `local g <close> = px.group()`.  The C half
-- (pxlua_fiber.c) spawns the members, records each failure's value in the
-- group's list as it comes (a member's error, or the block's: _fail) and
-- waits (_wait); this half decides what the block's end returns or raises.
local Group, GroupMeta = N.Group, N.GroupMeta
local gfail, gfailures, gpush, gwait = Group._fail, Group._failures, Group._push_scope, Group._wait
Group._fail, Group._failures, Group._push_scope, Group._wait = nil, nil, nil, nil
local new_group = N.group
local finished = setmetatable({}, { __mode = "k" })   -- groups whose end was handled

local function show(v)
  local ok, s = pcall(tostring, v)
  return ok and s or "(an error value that tostring cannot show)"
end

local function scope_interrupt(err)
  return getmetatable(err) == Error and (err.code == "ECANCELED" or err.code == "ETIMEDOUT")
end

-- Ends g's block: `err`, the error that ends the block (when failed), cancels the
-- group when it is a scope's interrupt and fails it otherwise; then waits for
-- every member.  Raises the EGROUP error when anything failed; else returns
-- the error of the caller's scope that fired during the wait, or nil.
local function finish_group(g, failed, err)
  if finished[g] then return nil end
  if failed then
    if scope_interrupt(err) then g:cancel() else gfail(g, err) end
  end
  local werr = gwait(g)
  finished[g] = true
  local fails = gfailures(g)
  if #fails > 0 then
    local errors = table.move(fails, 1, #fails, 1, {})
    error(setmetatable({ code = "EGROUP", errors = errors, message = string.format(
      "px.group: %d failure%s, the first: %s", #errors, #errors == 1 and "" or "s",
      show(errors[1])) }, Error), 0)
  end
  return werr
end

local function group_end(g, ok, ...)
  local fired = pop()
  local err = not ok and (...) or nil
  local werr = finish_group(g, not ok, err)
  if ok then
    if werr ~= nil then error(werr, 0) end    -- a scope of the caller fired meanwhile
    return ...
  end
  if getmetatable(err) == Error and err.code == "ECANCELED" and (fired ~= nil or g:cancelled()) then
    return nil, err                           -- g:cancel() interrupted the block
  end
  error(err, 0)
end

--- px.group(fn, ...): runs fn(g, ...) with g a new group, whose members
-- (g:spawn(f, ...)) it waits for before it returns fn's results.  The first
-- failure (a member's error, or fn's) cancels the group -- every member's
-- waits and fn's own -- and the group raises the EGROUP error, whose `errors`
-- holds every failure's value in the order they came.  g:cancel() makes it
-- return nil, err (ECANCELED).  px.group() without fn: a group for a
-- `<close>` variable, whose end waits (docs/lua.md).
function M.group(fn, ...)
  if fn == nil and select("#", ...) == 0 then return new_group() end
  check_callable(fn, "px.group", 1)
  local g = new_group()
  gpush(g)
  return group_end(g, pcall(fn, g, ...))
end

local function close_group(g, err)
  if getmetatable(g) ~= GroupMeta then
    raise_arg("group:close", 1, "self", "a group", g)
  end
  local werr = finish_group(g, err ~= nil, err)
  if werr ~= nil and err == nil then error(werr, 0) end
end
GroupMeta.__close = close_group
Group.close = function(g) return close_group(g, nil) end

-- The clocks of px.run_with: px.RealClock() (the default) and
-- px.VirtualClock(), a clock of the run's own that stands still while any
-- fiber can run and jumps to the next deadline when every fiber waits on time
-- alone (C's PX_CLOCK_VIRTUAL; docs/lua.md, "The virtual clock").
local Clock = { __name = "parataxis.Clock" }
Clock.__index = Clock
function Clock.__tostring(c) return "parataxis." .. c.kind end
local REAL, VIRTUAL = setmetatable({ kind = "RealClock", code = 0 }, Clock),
                      setmetatable({ kind = "VirtualClock", code = 1 }, Clock)
function M.RealClock() return REAL end
function M.VirtualClock() return VIRTUAL end

local run_with = N.run_with
--- px.run_with(opts, main, ...): px.run(main, ...) with options; opts.clock
-- is px.RealClock() or px.VirtualClock().  Anything else raises EINVAL.
function M.run_with(opts, main, ...)
  local clock = 0
  if opts ~= nil then
    if type(opts) ~= "table" then raise_arg("px.run_with", 1, "opts", "a table", opts) end
    for k in pairs(opts) do
      if k ~= "clock" then
        error(setmetatable({ code = "EINVAL", message = string.format(
          "px.run_with: unknown option %s (clock)", tostring(k)) }, Error), 2)
      end
    end
    local c = opts.clock
    if c ~= nil then
      if getmetatable(c) ~= Clock then
        error(setmetatable({ code = "EINVAL", message = string.format(
          "px.run_with: unknown clock %s: px.RealClock() or px.VirtualClock() expected",
          tostring(c)) }, Error), 2)
      end
      clock = c.code
    end
  end
  check_callable(main, "px.run_with", 2)
  return run_with(clock, main, ...)
end

--- px.map(fn, items [, {concurrency = n}]): fn(item) for every item of the
-- list, at most n calls at once (0 or none: all at once), in a group; the
-- results in input order (a list with n).  The first error cancels the calls
-- still running, starts no more, and is raised unchanged.
function M.map(fn, items, opts)
  check_callable(fn, "px.map", 1)
  if type(items) ~= "table" then raise_arg("px.map", 2, "items", "a list", items) end
  local conc = 0
  if opts ~= nil then
    if type(opts) ~= "table" then raise_arg("px.map", 3, "opts", "a table", opts) end
    conc = opts.concurrency
    if conc == nil then conc = 0 end
    if math.type(conc) ~= "integer" or conc < 0 then
      raise_arg("px.map", 3, "concurrency", "an integer >= 0", conc)
    end
  end
  local n = #items
  local results = { n = n }
  if n == 0 then return results end
  if conc == 0 or conc > n then conc = n end
  local taken = 0
  local function worker(g)
    while not g:cancelled() do
      taken = taken + 1
      local i = taken
      if i > n then return end
      results[i] = fn(items[i])
    end
  end
  local ok, err = pcall(M.group, function(g) for _ = 1, conc do g:spawn(worker, g) end end)
  if not ok then
    if getmetatable(err) == Error and err.code == "EGROUP" then error(err.errors[1], 0) end
    error(err, 0)
  end
  return results
end

return M
