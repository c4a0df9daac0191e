-- The rules every primitive of the sync family keeps, checked once over the
-- table of sync_kinds.lua, under the names of tests/c/sync/family.c: each
-- rule is `it(<rule>)` in `describe(<area>)` for every area the rule is for,
-- and runs over the area's rows (rwlock: its writer and reader waits; chan:
-- recv and send).  What is one primitive's own behaviour is in sync_spec.lua.
local px = require "parataxis"
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or ""
local helpers = dofile(dir .. "helpers.lua")
local kit = dofile(dir .. "sync_kinds.lua")
local raised, spawn_waiting, yield_until = helpers.raised, helpers.spawn_waiting, helpers.yield_until
local kinds, waiter = kit.kinds, kit.waiter

-- The areas in the order of their first row; rows[area] = its rows.
local areas, rows = {}, {}
for _, k in ipairs(kinds) do
  if not rows[k.area] then
    areas[#areas + 1] = k.area
    rows[k.area] = {}
  end
  table.insert(rows[k.area], k)
end

-- The rules: each takes one row.  sync = true: for the family's rows only
-- (not fiber:join); areas: only for these areas.  more[area]: what that area's test asserts besides.
local rules, more = {}, {}

-- A wait off-fiber is ENOFIBER; the wait's method given nil or an object of
-- another kind in place of its own is EINVAL.
rules[#rules + 1] = { name = "off_fiber_calls_are_enofiber_and_null_is_einval", sync = true,
  check = function(k)
    local h = k.make()
    assert.equal("ENOFIBER", raised(k.block, h).code)
    local method, other = k.method(), k.area == "event" and px.mutex() or px.event()
    assert.equal("EINVAL", raised(method, nil).code)
    assert.equal("EINVAL", raised(method, other).code)
  end }

-- The waiter interrupted (by a cancelled token or a timeout): nothing is left
-- queued, nothing taken, and a fresh waiter gets the next release.
local function interrupted(k, scope, code)
  px.run(function()
    local h = k.make()
    if k.arm then k.arm(h) end
    local tok = px.token()
    local a = spawn_waiting(function() return scope(tok, function() k.block(h) end) end)
    if k.queued then assert.equal(1, k.queued(h)) end
    tok:cancel()
    local r, err = a:join()
    assert.is_nil(r)
    assert.equal(code, err.code)
    if k.queued then assert.equal(0, k.queued(h)) end    -- nothing left queued
    if k.after_interrupt then k.after_interrupt(h) end
    local log = {}
    local b = spawn_waiting(waiter(k, h, log, "b"))
    k.release(h)
    assert.equal("b", b:join())
  end)
end

rules[#rules + 1] = { name = "timed_out_or_cancelled_wait_leaves_nothing_queued",
  check = function(k)
    interrupted(k, px.with_cancel, "ECANCELED")
    interrupted(k, function(_, fn) return px.timeout(0.02, fn) end, "ETIMEDOUT")
  end }

-- The same on the waiter's own fiber, one wait after the other, the mutex
-- held by main throughout: it stays main's, and is free once main unlocks.
more["mutex.timed_out_or_cancelled_wait_leaves_nothing_queued"] = function()
  px.run(function()
    local m = px.mutex()
    m:lock()
    local f = px.spawn(function()
      local _, e1 = px.timeout(0.01, function() m:lock() end)
      local tok = px.token()
      px.spawn(function() tok:cancel() end)
      local _, e2 = px.with_cancel(tok, function() m:lock() end)
      return e1.code, e2.code, m:waiters()
    end)
    assert.same({ "ETIMEDOUT", "ECANCELED", 0 }, { f:join() })
    assert.equal(0, m:waiters())
    m:unlock()
    assert.equal(0, m:owner())
  end)
end

-- Cancel, then release at once: the interrupted waiter is leaving but has not
-- run yet, and the release goes past it to the next one.  (The mutex's and
-- the semaphore's are in sync_spec.lua; a barrier of two holds one waiter.)
rules[#rules + 1] = { name = "release_right_after_an_interrupt_goes_past_it_to_the_next_waiter",
  areas = { rwlock = true, waitgroup = true, once = true, event = true, chan = true },
  check = function(k)
    px.run(function()
      local h = k.make()
      if k.arm then k.arm(h) end
      local tok = px.token()
      local a = spawn_waiting(function()
        return select(2, px.with_cancel(tok, function() k.block(h) end)).code
      end)
      local b = spawn_waiting(waiter(k, h, {}, "b"))
      if k.queued then assert.equal(2, k.queued(h)) end
      tok:cancel()                                        -- a is leaving, not yet run
      k.release(h)
      if k.holder then assert.equal(b:id(), k.holder(h)) end
      assert.equal("ECANCELED", a:join())
      assert.equal("b", b:join())
      if k.queued then assert.equal(0, k.queued(h)) end
      if k.after_interrupt then k.after_interrupt(h) end
    end)
  end }

-- Five waiters queue; each release (or the one before them, where a
-- waiter's leave passes it on, or one release admits them all) goes to them
-- in the order they came.  (The mutex's and the semaphore's are in
-- sync_spec.lua.)
rules[#rules + 1] = { name = "hands_off_in_fifo_order",
  areas = { rwlock = true, chan = true },
  check = function(k)
    px.run(function()
      local h = k.make()
      if k.arm then k.arm(h) end
      local log, fibers = {}, {}
      for i = 1, 5 do fibers[i] = spawn_waiting(waiter(k, h, log, i)) end
      if k.queued then assert.equal(5, k.queued(h)) end
      for i = 1, 5 do
        if i == 1 or not (k.chains or k.wakes_all) then k.release(h) end
        yield_until(function() return #log >= i end)
      end
      for i = 1, 5 do assert.equal(i, fibers[i]:join()) end
      assert.same({ 1, 2, 3, 4, 5 }, log)
    end)
  end }

-- Eight waiters park; one call lets them all through (a barrier: of nine
-- parties, the ninth arrival leads; a once: the runner's end).  (The
-- event's and the waitgroup's are in sync_spec.lua.)
rules[#rules + 1] = { name = "one_call_wakes_every_waiter",
  areas = { barrier = true, once = true },
  check = function(k)
    px.run(function()
      local h = k.area == "barrier" and px.barrier(9) or k.make()
      if k.arm then k.arm(h) end
      local log, fibers = {}, {}
      for i = 1, 8 do fibers[i] = spawn_waiting(waiter(k, h, log, i)) end
      if k.queued then assert.equal(8, k.queued(h)) end
      assert.same({}, log)
      k.release(h)
      for i = 1, 8 do assert.equal(i, fibers[i]:join()) end
      assert.equal(8, #log)
      if k.area == "barrier" then assert.equal(1, h:phase()) end
    end)
  end }

-- A wait in a scope that fired before it (a cancelled token, a zero
-- timeout), on a fiber that does not hold it, fails at once and queues
-- nothing; a fresh waiter gets the next release.  (The mutex's, the barrier's
-- and the waitgroup's are in sync_spec.lua.)
rules[#rules + 1] = { name = "wait_in_a_fired_scope_fails_at_once_without_queueing",
  areas = { rwlock = true, once = true, sem = true, event = true, chan = true },
  check = function(k)
    px.run(function()
      local h = k.make()
      if k.arm then k.arm(h) end
      local tok = px.token()
      assert.is_true(tok:cancel())                        -- fired before the wait
      local f = px.spawn(function()
        local r1, e1 = px.with_cancel(tok, function() k.block(h) end)
        local r2, e2 = px.timeout(0, function() k.block(h) end)
        return r1, e1.code, r2, e2.code
      end)
      assert.same({ nil, "ECANCELED", nil, "ETIMEDOUT" }, { f:join() })
      if k.queued then assert.equal(0, k.queued(h)) end
      local b = spawn_waiting(waiter(k, h, {}, "b"))
      k.release(h)
      assert.equal("b", b:join())
    end)
  end }

-- Nothing can run: the run raises EDEADLK, and the waiter's own line of the
-- report names its wait and the primitive (and, where the primitive has one,
-- the fiber that holds it); an armer parked elsewhere does not stand in for it.
rules[#rules + 1] = { name = "deadlock_report_names_the_wait_and_the_primitive", sync = true,
  check = function(k)
    local armer_id, waiter_id
    local err = raised(px.run, function()
      local h, never = k.make(), px.event()
      if k.arm then
        local armed = false
        px.spawn(function() armer_id = px.number(); k.arm(h); armed = true; never:wait() end)
        repeat px.yield() until armed   -- a join of w would hand w the turn first
      end
      local w = px.spawn(function() waiter_id = px.number(); k.block(h) end)
      w:join()
    end)
    assert.equal("EDEADLK", err.code)
    local line = helpers.unnamed(err.message):match("\n%s*(fiber " .. waiter_id .. ": [^\n]*)")
    assert.truthy(line, err.message)
    local named = string.format('fiber %d: parked on "%s", waits on %s@', waiter_id, k.reason, k.tag)
    assert.equal(named, line:sub(1, #named))
    assert.equal(k.held == true, line:find(" held by fiber ", 1, true) ~= nil, line)
    if k.holder then
      assert.truthy(line:find(" held by fiber " .. armer_id, 1, true), line)
    end
  end }

-- Every Lua fiber is hosted: its wait parks through EYIELD, and the binding
-- calls it again once woken.  The release lets the waiter through (and, where
-- the primitive names a holder, makes the waiter the holder before it runs).
rules[#rules + 1] = { name = "hosted_fiber_waits_through_eyield_and_a_recall", sync = true,
  check = function(k)
    px.run(function()
      local h = k.make()
      if k.arm then k.arm(h) end
      local w = spawn_waiting(waiter(k, h, {}, "through"))
      k.release(h)
      if k.holder then assert.equal(w:id(), k.holder(h)) end   -- owner before it runs
      assert.equal("through", w:join())
      if k.holder then assert.equal(0, k.holder(h)) end
    end)
  end }

for _, area in ipairs(areas) do
  describe(area, function()
    for _, rule in ipairs(rules) do
      local these = {}
      if rule.areas and not rule.areas[area] then goto next_rule end
      for _, k in ipairs(rows[area]) do
        if not (rule.sync and k.not_sync) then these[#these + 1] = k end
      end
      if #these > 0 then
        it(rule.name, function()
          for _, k in ipairs(these) do rule.check(k) end
          local extra = more[area .. "." .. rule.name]
          if extra then extra() end
        end)
      end
      ::next_rule::
    end
  end)
end
