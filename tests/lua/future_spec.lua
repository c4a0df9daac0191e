-- Futures: px.future(), fu:set / fu:fail / fu:wait / fu:done, px.wait_all,
-- px.wait_any, a Fiber as a future -- the conformance specs of
-- tests/c/sync/future.c, under their names.
--
-- A settlement from another thread comes from px_foreign (tests/lua/foreign.c),
-- a test-only C module: a Lua state has one thread.  Fibers synchronize on
-- observable state (a fiber parked in its wait), never on sleeps.

-- px_foreign links no copy of the library: see tests/lua/two_schedulers_spec.lua.
local core = package.searchpath("parataxis_core", package.cpath)
core = core and core:gsub("([^/]*)$", "./%1")
local foreign = core and package.loadlib(core, "*") and select(2, pcall(require, "px_foreign"))
if type(foreign) ~= "table" then foreign = nil end

local px = require "parataxis"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local raised, spawn_waiting = h.raised, h.spawn_waiting

local function run(body) return px.run(body) end

describe("future", function()
  it("wait_returns_the_value", function()
    run(function()
      local fu = px.future()
      assert.is_false(fu:done())
      local f = spawn_waiting(function() return fu:wait() end)
      assert.is_true(fu:set({ answer = 42 }))
      assert.is_true(fu:done())
      assert.same({ answer = 42 }, f:join())
      assert.same({ answer = 42 }, fu:wait())        -- settled: at once, any number of times
      local none = px.future()
      none:set(nil)                                  -- nil is a value
      assert.is_nil(none:wait())
      assert.is_true(none:done())
    end)
    local fu = px.future()                           -- a settled future answers off-fiber
    fu:set("off")
    assert.equal("off", fu:wait())
    assert.equal("off", px.wait_all{ fu }[1])
    assert.same({ 1, "off" }, { px.wait_any{ fu, px.future() } })
    run(function()                                   -- and in a coroutine inside a fiber
      local co = coroutine.wrap(function()
        local pending_fu = px.future()
        assert.equal("ENOFIBER", raised(pending_fu.wait, pending_fu).code)
        assert.equal("ENOFIBER", raised(px.wait_any, { pending_fu }).code)
        return fu:wait(), px.wait_all{ fu }[1], select(2, px.wait_any{ pending_fu, fu })
      end)
      assert.same({ "off", "off", "off" }, { co() })
    end)
  end)

  it("an_error_fails_every_wait", function()
    run(function()
      local fu, e = px.future(), { why = "a table error" }
      local fs = {}
      for i = 1, 3 do
        fs[i] = spawn_waiting(function() return pcall(fu.wait, fu) end)
      end
      assert.is_true(fu:fail(e))
      for i = 1, 3 do
        local ok, err = fs[i]:join()
        assert.is_false(ok)
        assert.equal(e, err)                         -- the value itself, unchanged
      end
      assert.equal(e, raised(fu.wait, fu))
      local s = px.future()
      s:fail("a string")
      assert.equal("a string", raised(s.wait, s))
    end)
  end)

  it("a_second_settlement_is_refused", function()
    run(function()
      local fu = px.future()
      fu:set(1)
      local err = raised(fu.set, fu, 2)
      assert.equal("EBUSY", err.code)
      assert.equal("EBUSY", raised(fu.fail, fu, "late").code)
      assert.equal(1, fu:wait())                     -- nothing changed
      local bad = px.future()
      bad:fail("first")
      assert.equal("EBUSY", raised(bad.set, bad, 1).code)
      assert.equal("first", raised(bad.wait, bad))
    end)
  end)

  it("many_fibers_wait_for_one_future", function()
    run(function()
      local fu, got = px.future(), {}
      local fs = {}
      for i = 1, 100 do
        fs[i] = px.spawn(function() got[i] = fu:wait() end)
      end
      px.yield()                                     -- all of them wait
      for i = 1, 100 do assert.is_false(fs[i]:done()) end
      fu:set("v")
      for i = 1, 100 do fs[i]:join() end
      for i = 1, 100 do assert.equal("v", got[i]) end
    end)
  end)

  it("settled_from_another_thread", function()
    if not foreign then pending("px_foreign is built only with the C tests") return end
    run(function()
      -- a result: no Lua value crosses threads, so the wait gets nil
      local fu = px.future()
      local t = foreign.later("future_set", fu)
      local f = spawn_waiting(function() return true, fu:wait() end)
      foreign.go(t)
      local ok, v = f:join()                         -- the run waits for the thread's wake
      assert.is_true(ok)
      assert.is_nil(v)
      assert.equal(0, foreign.join(t))
      assert.is_true(fu:done())
      assert.equal("EBUSY", raised(fu.set, fu, 1).code)
      -- an error status: the wait raises the error object of its code
      local bad = px.future()
      t = foreign.later("future_fail", bad, 1000, -6)   -- PX_EPERM
      f = spawn_waiting(function() return pcall(bad.wait, bad) end)
      foreign.go(t)
      local ok2, err = f:join()
      assert.is_false(ok2)
      assert.equal("EPERM", err.code)
      assert.equal(0, foreign.join(t))
      -- and racing a settlement of this thread: exactly one wins
      for _ = 1, 50 do
        local r = px.future()
        t = foreign.later("future_set", r, 100)
        foreign.go(t)
        local mine = pcall(r.set, r, "lua")
        local theirs = foreign.join(t)
        assert.is_true(mine ~= (theirs == 0))
        assert.equal(mine and "lua" or nil, r:wait())
      end
    end)
  end)

  it("wait_all_returns_values_in_input_order", function()
    run(function()
      local fus = {}
      for i = 1, 5 do fus[i] = px.future() end
      local f = spawn_waiting(function() return px.wait_all(fus) end)
      for _, i in ipairs({ 4, 2, 5, 1, 3 }) do       -- settled out of order
        fus[i]:set(i * 10)
        px.yield()
      end
      local r = f:join()
      assert.same({ 10, 20, 30, 40, 50, n = 5 }, r)
      local empty = px.wait_all{}                    -- nothing to wait for
      assert.same({ n = 0 }, empty)
      local holes = { px.future(), px.future() }
      holes[1]:set(nil)
      holes[2]:set("b")
      assert.same({ nil, "b", n = 2 }, px.wait_all(holes))
    end)
  end)

  it("wait_all_fails_on_the_first_error", function()
    run(function()
      local a, b, c = px.future(), px.future(), px.future()
      local f = spawn_waiting(function() return pcall(px.wait_all, { a, b, c }) end)
      c:fail("c failed")                             -- the first to fail
      b:fail("b failed")
      local ok, err = f:join()                       -- it did not wait for a
      assert.is_false(ok)
      assert.equal("c failed", err)
      assert.is_false(a:done())
      -- settled already, in another order than the list's: still the first to come
      local x, y = px.future(), px.future()
      y:fail("y first")
      x:fail("x second")
      assert.equal("y first", raised(px.wait_all, { x, y }))
    end)
  end)

  it("wait_any_returns_the_first_settled", function()
    run(function()
      local a, b, c = px.future(), px.future(), px.future()
      local f = spawn_waiting(function() return px.wait_any{ a, b, c } end)
      b:set("bee")
      c:set("sea")
      local i, v = f:join()
      assert.equal(2, i)
      assert.equal("bee", v)
      assert.equal(3, (px.wait_any{ a, c, b }))      -- of the settled ones, the first settled
      local bad = px.future()
      bad:fail("bad")
      assert.equal("bad", raised(px.wait_any, { a, bad }))   -- its error
    end)
  end)

  -- A thread settles b after a random spin while the fiber waits for a or b
  -- under a timeout of 0 to 80 us: one or the other wins, nothing else.
  it("wait_any_settlement_races_a_timeout", function()
    if not foreign then pending("px_foreign is built only with the C tests") return end
    run(function()
      local settled, timed_out = 0, 0
      for round = 1, 400 do
        local a, b = px.future(), px.future()
        local t = foreign.later("future_set", b, math.random(0, 20000))
        foreign.go(t)
        local r, err = px.timeout(0.00002 * (round % 5), px.wait_any, { a, b })
        if r == nil then
          assert.equal("ETIMEDOUT", err.code)
          timed_out = timed_out + 1
        else
          assert.equal(2, r)
          settled = settled + 1
        end
        assert.equal(0, foreign.join(t))
        assert.is_true(b:done())
        assert.is_false(a:done())
        assert.equal(2, (px.wait_any{ a, b }))      -- settled: at once, for everyone
      end
      assert.equal(400, settled + timed_out)
    end)
  end)

  it("a_scope_ends_the_wait", function()
    run(function()
      local fu = px.future()
      local r, err = px.timeout(0.001, fu.wait, fu)
      assert.is_nil(r)
      assert.equal("ETIMEDOUT", err.code)
      local _, e2 = px.timeout(0.001, px.wait_all, { fu, px.future() })
      assert.equal("ETIMEDOUT", e2.code)
      local _, e3 = px.timeout(0.001, px.wait_any, { fu })
      assert.equal("ETIMEDOUT", e3.code)
      local tok = px.token()
      local f = spawn_waiting(function() return px.with_cancel(tok, fu.wait, fu) end)
      tok:cancel()
      local _, e4 = f:join()
      assert.equal("ECANCELED", e4.code)
      fu:set("later")                                -- the future is untouched
      assert.equal("later", fu:wait())
    end)
  end)

  it("a_fiber_s_end_settles_its_future", function()
    run(function()
      local ev = px.event()
      local slow = px.spawn(function() ev:wait(); return "slow", "second result" end)
      local quick = px.spawn(function() return "quick" end)
      local fu = px.future()
      local f = spawn_waiting(function() return px.wait_all{ slow, quick, fu } end)
      fu:set("fu")
      px.yield()
      assert.is_false(f:done())
      ev:set()
      assert.same({ "slow", "quick", "fu", n = 3 }, f:join())   -- a fiber's first result
      local failing = px.spawn(function() error("fiber failed", 0) end)
      local pev = px.event()
      local parked = px.spawn(function() pev:wait() end)
      local i, v = px.wait_any{ parked, quick }      -- quick ended already
      assert.equal(2, i)
      assert.equal("quick", v)
      assert.equal("fiber failed", raised(px.wait_all, { failing, quick }))
      assert.equal("fiber failed", raised(px.wait_any, { failing }))
      assert.equal("fiber failed", raised(failing.join, failing))   -- join still tells it
      local ended = px.spawn(function() return "ended" end)
      ended:join()
      assert.same({ "ended", n = 1 }, px.wait_all{ ended })
      local r, err = px.timeout(0.001, px.wait_any, { parked })
      assert.is_nil(r)
      assert.equal("ETIMEDOUT", err.code)
      pev:set()
      assert.equal(1, (px.wait_any{ parked }))
    end)
  end)

  it("hostile_arguments", function()
    local function code(...) return raised(...).code end
    assert.equal("EINVAL", code(px.wait_all))
    assert.equal("EINVAL", code(px.wait_all, "futures"))
    assert.equal("EINVAL", code(px.wait_all, { 1 }))
    assert.equal("EINVAL", code(px.wait_all, { px.future(), {} }))
    assert.equal("EINVAL", code(px.wait_any, {}))     -- nothing could ever settle
    assert.equal("EINVAL", code(px.wait_any, { px.event() }))
    local fu = px.future()
    assert.equal("EINVAL", code(fu.set, px.event(), 1))
    assert.equal("EINVAL", code(fu.set, nil, 1))
    assert.equal("EINVAL", code(fu.fail, fu))         -- an error needs a value
    assert.equal("EINVAL", code(fu.wait, "x"))
    assert.equal("EINVAL", code(fu.done, {}))
    assert.is_false(fu:done())                        -- nothing settled it
    assert.equal("ENOFIBER", code(fu.wait, fu))        -- off-fiber while unsettled
    assert.equal("ENOFIBER", code(px.wait_all, { fu }))
    getmetatable(fu).__gc(fu)                          -- a finalizer called by hand
    getmetatable(fu).__gc(fu)
    getmetatable(fu).__gc(px.event())
    assert.equal("EINVAL", code(fu.wait, fu))          -- freed: refused, no crash
    -- a fiber cancelled with its run: its future tells its error after the run
    local stuck
    pcall(px.run, function()
      stuck = px.spawn(function() px.event():wait() end)
      px.yield()
      error("end the run")
    end)
    assert.is_true(stuck:done())
    assert.equal("ECANCELED", raised(px.wait_all, { stuck }).code)
    local kept
    px.run(function()
      kept = px.spawn(function() return "kept" end)
      assert.equal("kept", px.wait_all{ kept }[1])
    end)
    assert.equal("kept", px.wait_all{ kept }[1])       -- ended: answers after its run
    assert.equal("kept", tostring(px.wait_all{ kept }[1]))
    assert.truthy(tostring(px.future()):find("pending", 1, true))
  end)

  -- The binding's own: a wake nobody granted (px._wake) leaves each wait of a
  -- future parked until the settlement.
  it("a_stray_wake_keeps_the_waits_waiting", function()
    run(function()
      local fu, other = px.future(), px.future()
      local w = spawn_waiting(function() return fu:wait() end)
      local all = spawn_waiting(function() return px.wait_all{ fu, other } end)
      local any = spawn_waiting(function() return px.wait_any{ other, fu } end)
      for _ = 1, 3 do
        for _, f in ipairs({ w, all, any }) do assert.is_true(px._wake(f:id())) end
        px.yield(); px.yield()
        for _, f in ipairs({ w, all, any }) do assert.is_false(f:done()) end
      end
      fu:set("fu")
      assert.equal("fu", w:join())
      assert.same({ 2, "fu" }, { any:join() })
      px._wake(all:id())                             -- still one to come
      px.yield()
      assert.is_false(all:done())
      other:set("other")
      assert.same({ "fu", "other", n = 2 }, all:join())
    end)
  end)
end)
