-- Stray wakes, over one table of every wait of the family (and fiber:join,
-- sync_kinds.lua), as tests/c/sync/stray_wake.c does from C.
--
-- px._wake(id) is px_wake: a wake nobody granted.  A waiter woken so keeps
-- waiting, with its place in the queue, and gets what it waited for only when
-- it is handed over.  (The interrupted waits of the same table are in
-- family_spec.lua.)
local px = require "parataxis"
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or ""
local spawn_waiting = dofile(dir .. "helpers.lua").spawn_waiting
local kit = dofile(dir .. "sync_kinds.lua")
local kinds, waiter = kit.kinds, kit.waiter

describe("stray_wake", function()
  for _, k in ipairs(kinds) do
    it(k.stray, function()
      px.run(function()
        local h = k.make()
        if k.arm then k.arm(h) end
        local log = {}
        local a = spawn_waiting(waiter(k, h, log, "a"))
        local b = k.queues ~= false and spawn_waiting(waiter(k, h, log, "b")) or nil
        assert.is_true(px._wake(a:id()))      -- a wake nobody granted
        px.yield(); px.yield()
        assert.is_false(a:done())             -- still waiting ...
        assert.same({}, log)
        if k.queued then assert.equal(b and 2 or 1, k.queued(h)) end   -- ... still queued
        k.release(h)                          -- to a, first in line still
        px._wake(a:id())                      -- granted, not yet run: stray again
        assert.equal("a", a:join())
        if b then
          assert.equal("a", log[1])
          if not k.chains and not k.wakes_all then k.release(h) end
          assert.equal("b", b:join())
        end
      end)
    end)
  end

  it("a_stray_wake_does_not_end_a_sleep", function()
    -- a sleep is no park: the wake does nothing, the sleep lasts its time
    local slept = px.run(function()
      local s = px.spawn(function()
        local t0 = px.now()
        px.sleep(0.05)
        return px.now() - t0
      end)
      px.yield()
      for _ = 1, 5 do
        assert.is_false(px._wake(s:id()))
        px.yield()
      end
      return s:join()
    end)
    assert.is_true(slept >= 0.05)
  end)

  it("a_stray_wake_of_an_ended_or_unknown_fiber_does_nothing", function()
    px.run(function()
      local f = px.spawn(function() end)
      f:join()
      assert.is_false(px._wake(f:id()))
      assert.is_false(px._wake(0))
      assert.is_false(px._wake(1 << 40))
    end)
  end)

  it("a_stray_wake_does_not_end_a_mutex_lock", function()
    px.run(function()
      local m, lock_result = px.mutex(), nil
      m:lock()
      local l = px.spawn(function()
        lock_result = m:lock()
        assert.equal(px.self(), m:owner())
        m:unlock()
      end)
      px.yield()                                    -- it queues
      assert.is_true(px._wake(l:id()))              -- a wake nobody granted
      px.yield(); px.yield()
      assert.is_nil(lock_result)                    -- still waiting ...
      assert.equal(1, m:waiters())                  -- ... and still queued
      m:unlock()
      l:join()
      assert.is_true(lock_result)
    end)
  end)

  it("a_stray_wake_does_not_end_a_join", function()
    px.run(function()
      local c = px.spawn(function() px.yield(); px.yield(); px.yield(); return 7 end)
      local j = px.spawn(function() return c:join() end)
      px.yield()                                    -- the joiner parks
      assert.is_true(px._wake(j:id()))
      assert.equal(7, j:join())                     -- it waited for the real end
      assert.equal(7, c:join())
    end)
  end)

  it("a_joiner_woken_as_its_fiber_ends_returns_once", function()
    px.run(function()
      local go, runs = px.event(), 0
      local b = px.spawn(function() go:wait(); return 9 end)
      local j = px.spawn(function()
        runs = runs + 1
        assert.equal(9, b:join())
        return 5
      end)
      px.yield()                                    -- b waits, j joins b
      assert.equal(1, go:set())                     -- b is ready ...
      assert.is_true(px._wake(j:id()))              -- ... and j behind it: b ends
                                                    -- while j is ready already
      assert.equal(5, j:join())
      for _ = 1, 4 do px.yield() end                -- nothing runs j again
      assert.equal(1, runs)
      assert.equal(9, b:join())
    end)
  end)

  -- Every Lua fiber is hosted: a stray wake makes the binding call its wait
  -- again, which parks again (PX_EYIELD) with the fiber's place kept.
  it("a_hosted_waiter_woken_stray_calls_again_and_still_gets_the_unit", function()
    px.run(function()
      local s, got = px.semaphore(0), false
      local w = px.spawn(function() s:acquire(); got = true end)
      px.yield()
      assert.equal(1, s:waiters())                  -- it waits
      assert.is_true(px._wake(w:id()))
      px.yield(); px.yield()
      assert.is_false(got)                          -- it called again: still waiting,
      assert.equal(1, s:waiters())                  -- still queued
      assert.is_true(px._wake(w:id()))
      s:release()                                   -- before it runs
      assert.equal(0, s:value())                    -- the unit is its own
      w:join()
      assert.is_true(got)
      assert.equal(0, s:value())
    end)
  end)
end)
