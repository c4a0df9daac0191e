-- One scheduler at a time (docs/sync.md): while fibers of another run wait
-- on a sync object or hold it, a call that would wait beside them, take a
-- hold beside them or hand something over to them is the ETHREAD error and
-- changes nothing.  A Lua state runs one scheduler, so the other run comes
-- from px_foreign (tests/lua/foreign.c), a test-only C module that runs one
-- on a thread of its own, on the same object, as tests/c/sync/family.c does.

-- px_foreign links no copy of the library: the copy in parataxis_core.so,
-- its symbols made global first, is the one its calls reach.  An earlier spec
-- of the same busted run has loaded that file already, with local symbols,
-- and package.loadlib keeps the handle it got under the path it was given:
-- given the same file under another path ("dir/./name"), it calls dlopen
-- again, which promotes the loaded copy to global symbols (dlopen(3)).
local core = package.searchpath("parataxis_core", package.cpath)
core = core and core:gsub("([^/]*)$", "./%1")
local foreign = core and package.loadlib(core, "*") and select(2, pcall(require, "px_foreign"))
if type(foreign) ~= "table" then foreign = nil end
local px = require "parataxis"

local function ethread(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected the ETHREAD error")
  assert.equal("ETHREAD", type(err) == "table" and err.code or err)
end

-- Each row: a fresh object, what px_foreign parks on it, the state a refused
-- call must leave as it was, the calls (on a fiber of the Lua run) that would
-- wait or hand over, and those that need no fiber (made off-fiber).
local rows = {
  { "mutex", px.mutex, "mutex",
    function(m) return m:owner(), m:waiters() end,
    { function(m) return m:lock() end,
      function(m) local g <close> = m:guard() end }, {} },
  { "rwlock", px.rwlock, "rwlock",
    function(l) return l:readers(), l:writer(), l:waiters() end,
    { function(l) return l:rdlock() end, function(l) return l:wrlock() end }, {} },
  { "waitgroup", px.waitgroup, "waitgroup",
    function(wg) return wg:count() end,
    { function(wg) return wg:wait() end, function(wg) return wg:done() end },
    { function(wg) return wg:done() end } },
  { "barrier", function() return px.barrier(2) end, "barrier",
    function(b) return b:phase(), b:waiting() end,
    { function(b) return b:arrive_and_wait() end }, {} },
  { "once", px.once, "once",
    function(o) return o:done() end,
    { function(o) return o:call(error, "the action ran twice") end }, {} },
  { "sem", function() return px.semaphore(0) end, "sem",
    function(s) return s:value(), s:waiters() end,
    { function(s) return s:acquire() end, function(s) return s:release() end },
    { function(s) return s:release() end } },
  { "event", px.event, "event",
    function(e) return e:is_set() end,
    { function(e) return e:wait() end, function(e) return e:set() end },
    { function(e) return e:set() end } },
  { "chan", function() return px.channel(1) end, "chan_recv",
    function(c) return c:len() end,
    { function(c) return c:send(1) end, function(c) return c:recv() end,
      function(c) return c:trysend(1) end, function(c) return c:close() end },
    { function(c) return c:trysend(1) end, function(c) return c:close() end } },
  { "chan", function() return px.channel(0) end, "chan_send",
    function(c) return c:len() end,
    { function(c) return c:send(1) end, function(c) return c:recv() end,
      function(c) return c:tryrecv() end, function(c) return c:close() end },
    { function(c) return c:tryrecv() end, function(c) return c:close() end } },
}

local function state(row, obj) return table.pack(row[4](obj)) end

local function refused(row, obj, calls)
  local before = state(row, obj)
  for _, call in ipairs(calls) do
    ethread(call, obj)
    assert.same(before, state(row, obj))
  end
end

-- px_foreign parks a fiber of its run on a fresh object of the row; the
-- calls of this thread's run, and those off-fiber, are refused and change
-- nothing; the other run then goes on and its waiter gets what it waited for.
local function two_schedulers(row)
  local _, make, parks, _, on_fiber, off_fiber = table.unpack(row)
  local obj = make()
  local h = foreign.park(parks, obj)
  local ok, err = pcall(function()
    refused(row, obj, off_fiber)              -- this thread runs no scheduler now
    px.run(function() refused(row, obj, on_fiber) end)
  end)
  local wait_rc, run_rc = foreign.finish(h)   -- the other run goes on
  assert(ok, err)
  assert.equal(0, wait_rc)
  assert.equal(0, run_rc)
end

-- One test an area, over its rows (chan: a parked receiver, a parked sender).
local areas, by_area = {}, {}
for _, row in ipairs(rows) do
  local area = row[1]
  if not by_area[area] then areas[#areas + 1] = area; by_area[area] = {} end
  table.insert(by_area[area], row)
end

for _, area in ipairs(areas) do
  describe(area, function()
    it("two_schedulers_at_once_is_ethread_and_changes_nothing", function()
      if not foreign then pending("px_foreign is built only with the C tests") return end
      for _, row in ipairs(by_area[area]) do two_schedulers(row) end
    end)
  end)
end

-- The same rule seen from the other side: px_foreign's run used the object
-- (armed it, parked a fiber on it and let it through) and is still alive,
-- but none of its fibers waits on it or holds it: this run uses it as its
-- own, and the other run ends well.
local spawn_waiting = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
  .spawn_waiting
local uses = {   -- one use on a fiber of this run, by what px_foreign did
  mutex = function(m)
    m:lock()
    local w = spawn_waiting(function() m:lock(); m:unlock() end)
    m:unlock(); w:join()
  end,
  rwlock = function(l)
    l:wrlock()
    local w = spawn_waiting(function() l:rdlock(); l:rdunlock() end)
    l:wrunlock(); w:join()
  end,
  waitgroup = function(wg)
    wg:add(1)
    local w = spawn_waiting(function() wg:wait() end)
    wg:done(); w:join()
  end,
  barrier = function(b)
    local w = spawn_waiting(function() b:arrive_and_wait() end)
    b:arrive_and_wait(); w:join()
  end,
  once = function(o)                          -- done by the other run: at once
    assert.is_true(o:done())
    o:call(error, "the action ran twice")
  end,
  sem = function(s)
    local w = spawn_waiting(function() s:acquire() end)
    s:release(); w:join()
  end,
  event = function(e)
    e:clear()                                 -- the other run's set left it set
    local w = spawn_waiting(function() e:wait() end)
    e:set(); w:join()
  end,
  chan_recv = function(c)
    local w = spawn_waiting(function() return (c:recv()) end)
    assert.is_true(c:send("v")); assert.equal("v", w:join())
  end,
  chan_send = function(c)
    local w = spawn_waiting(function() assert.is_true(c:send("v")) end)
    assert.equal("v", c:recv()); w:join()
  end,
}

for _, area in ipairs(areas) do
  describe(area, function()
    it("an_object_no_fiber_waits_on_or_holds_works_in_any_run", function()
      if not foreign then pending("px_foreign is built only with the C tests") return end
      for _, row in ipairs(by_area[area]) do
        local obj = row[2]()
        local h = foreign.use(row[3], obj)
        local ok, err = pcall(px.run, function() uses[row[3]](obj) end)
        local wait_rc, run_rc = foreign.finish(h)
        assert(ok, err)
        assert.equal(0, wait_rc)
        assert.equal(0, run_rc)
      end
    end)
  end)
end

-- px_foreign's run holds obj (kind: "rwlock_read", "mutex_held"), with
-- nobody waiting; body runs as a run of this thread meanwhile; then the other
-- run lets go and ends: it waited for nothing, and ended well.
local function beside_a_foreign_hold(kind, obj, body)
  local h = foreign.park(kind, obj)
  local ok, err = pcall(px.run, body)
  local wait_rc, run_rc = foreign.finish(h)
  assert(ok, err)
  assert.equal(1, wait_rc)                        -- no waiter: nothing waited
  assert.equal(0, run_rc)
end

describe("rwlock", function()
  it("read_hold_beside_another_schedulers_readers_is_ethread", function()
    if not foreign then pending("px_foreign is built only with the C tests") return end
    local l = px.rwlock()
    beside_a_foreign_hold("rwlock_read", l, function()
      ethread(l.rdlock, l)
      ethread(l.tryrdlock, l)
      ethread(l.wrlock, l)
      local got, busy = l:trywrlock()
      assert.is_nil(got); assert.equal("EBUSY", busy.code)
      assert.equal(1, l:readers()); assert.equal(0, l:waiters())
    end)
    assert.equal(0, l:readers())
  end)
end)

describe("mutex", function()
  it("lock_held_by_a_fiber_of_another_scheduler_is_ethread", function()
    if not foreign then pending("px_foreign is built only with the C tests") return end
    local m = px.mutex()
    beside_a_foreign_hold("mutex_held", m, function()   -- its main fiber holds m
      ethread(m.lock, m)                            -- would park on a foreign holder
      local got, busy = m:trylock()
      assert.is_nil(got); assert.equal("EBUSY", busy.code)
      local unlocked, perm = pcall(m.unlock, m)
      assert.is_false(unlocked); assert.equal("EPERM", perm.code)
    end)
    assert.equal(0, m:owner())
  end)
end)
