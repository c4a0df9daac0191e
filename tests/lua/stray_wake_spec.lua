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
end)
