--- parataxis.fibers -- fibers on coroutines and the synchronization family; the
-- parataxis module re-exports all of it (px.run, px.spawn, px.mutex, ...).
--
-- The native half is bindings/lua/src/pxlua_fiber.c (parataxis_core.fibers()): every
-- call that may wait is a C function that yields the fiber's coroutine to the
-- C scheduler and collects its outcome once resumed.  This file adds what is
-- plain Lua: the scopes (px.timeout, px.with_cancel), the guards, Once:call and
-- Channel:values.
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
  -- px.scheduler(): the running run's Scheduler, for TimerQueue{ executor = ... }
  scheduler = N.scheduler,
  _set_dispatch = N.set_dispatch,        -- for parataxis.lua, not exported
  -- px._wake(id): px_wake of fiber `id`, true when it was parked; a test hook
  -- (a wake nobody granted: every wait of the library waits on, tests/lua/stray_wake_spec.lua)
  _wake = N.wake,
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

return M
