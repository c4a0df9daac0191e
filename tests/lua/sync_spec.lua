-- The synchronization family from Lua fibers: the C conformance contracts
-- (tests/c/sync/*.c), under the SPEC names of the C suite.
local px = require "parataxis"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local raised, yield_until, spawn_waiting = h.raised, h.yield_until, h.spawn_waiting

-- Runs body as a fiber program (px.run), for a spec's body.
local function run(body) return px.run(body) end

-- Nobody holds l (what tests/c/sync/rwlock.c checks after each run), and
-- nobody waits on it.
local function unheld(l)
  assert.equal(0, l:readers())
  assert.equal(0, l:writer())
  assert.equal(0, l:waiters())
end

-- A xorshift generator of integers from seed (non-zero), for the randomized
-- specs: rng() % n is in [0, n).
local function xorshift(seed)
  local x = seed
  return function()
    x = x ~ (x << 13); x = x ~ (x >> 7); x = x ~ (x << 17)
    return x
  end
end

describe("mutex", function()
  it("no_lost_updates_with_10_fibers", function()
    run(function()
      local m, n, wg = px.mutex(), 0, px.waitgroup()
      for _ = 1, 10 do
        wg:add(1)
        px.spawn(function()
          for _ = 1, 100 do
            local g <close> = m:guard()
            local v = n; px.yield(); n = v + 1
          end
          wg:done()
        end)
      end
      wg:wait()
      assert.equal(1000, n)
    end)
  end)

  it("hands_off_in_fifo_order", function()
    run(function()
      local m, order = px.mutex(), {}
      m:lock()
      local fs = {}
      for i = 1, 5 do
        fs[i] = px.spawn(function() m:lock(); order[#order + 1] = i; m:unlock() end)
        px.yield()                                  -- each queues in turn
      end
      assert.equal(5, m:waiters())
      m:unlock()
      for i = 1, 5 do fs[i]:join() end
      assert.same({ 1, 2, 3, 4, 5 }, order)
    end)
  end)

  it("unlock_makes_the_first_waiter_owner_before_it_wakes", function()
    run(function()
      local m = px.mutex()
      m:lock()
      local f = px.spawn(function() m:lock(); m:unlock() end)
      px.yield()
      m:unlock()
      assert.equal(f:id(), m:owner())
      assert.is_nil((m:trylock()))                 -- nobody barges in
      f:join()
    end)
  end)

  it("trylock_never_steals_from_a_queued_waiter", function()
    run(function()
      local m = px.mutex()
      local holder = px.spawn(function() m:lock(); px.sleep(0.01); m:unlock() end)
      px.yield()
      local waiter = px.spawn(function() m:lock(); m:unlock() end)
      px.yield()
      local ok, err = m:trylock()
      assert.is_nil(ok); assert.equal("EBUSY", err.code)
      holder:join(); waiter:join()
      assert.is_true(m:trylock()); m:unlock()
    end)
  end)

  it("try_forms_take_a_free_one_and_refuse_a_held_one_without_parking", function()
    run(function()
      local m = px.mutex()
      assert.is_true(m:trylock()); assert.equal(px.self(), m:owner()); m:unlock()
      m:lock()
      local function tried() return select(2, px.spawn(function() return m:trylock() end):join()).code end
      assert.equal("EBUSY", tried()); assert.equal(0, m:waiters())
      local w = h.spawn_waiting(function() m:lock(); m:unlock() end)
      assert.equal("EBUSY", tried()); assert.equal(1, m:waiters())   -- the waiter only
      m:unlock()
      w:join()
    end)
  end)

  it("unlock_by_a_non_owner_or_of_a_free_mutex_is_eperm", function()
    run(function()
      local m = px.mutex()
      assert.equal("EPERM", raised(m.unlock, m).code)
      m:lock()
      local f = px.spawn(function() return raised(m.unlock, m).code end)
      assert.equal("EPERM", f:join())
      m:unlock()
    end)
  end)

  it("relock_and_trylock_by_the_owner_are_edeadlk", function()
    run(function()
      local m = px.mutex()
      m:lock()
      assert.equal("EDEADLK", raised(m.lock, m).code)
      assert.equal("EDEADLK", raised(m.trylock, m).code)
      m:unlock()
    end)
  end)

  it("owner_death_hands_it_over_with_eownerdead_and_tells_later_waits", function()
    run(function()
      local m = px.mutex()
      px.spawn(function() m:lock() end):join()     -- ends holding it
      local ok, dead = m:lock()
      assert.is_true(ok)
      assert.equal("EOWNERDEAD", dead.code)          -- returned: the caller holds it
      assert.equal(px.self(), m:owner())
      m:unlock()
      assert.same({ true }, { m:lock() })           -- only the first owner is told
      m:unlock()
    end)
  end)

  it("with_unlocks_when_the_block_raises", function()
    -- Lua's with-block is a guard's scope: an error leaving it (caught, the
    -- fiber goes on) closes the guard, which unlocks.
    run(function()
      local m = px.mutex()
      local ok, err = pcall(function() local g <close> = m:guard(); error("boom", 0) end)
      assert.is_false(ok); assert.equal("boom", err)
      assert.equal(0, m:owner())
      local r, timed = px.timeout(0.01, function()
        local g <close> = m:guard()
        px.event():wait()
      end)
      assert.is_nil(r); assert.equal("ETIMEDOUT", timed.code)
      assert.equal(0, m:owner()); assert.equal(0, m:waiters())
    end)
  end)

  it("a_guard_unlocks_when_an_error_unwinds_its_fiber", function()
    run(function()
      local m = px.mutex()
      local f = px.spawn(function() local g <close> = m:guard(); error("boom", 0) end)
      assert.equal("boom", raised(f.join, f))
      assert.same({ true }, { m:lock() })           -- no EOWNERDEAD: the guard released it
      m:unlock()
    end)
  end)

  it("release_right_after_an_interrupt_goes_past_it_to_the_next_waiter", function()
    run(function()
      local m, tok = px.mutex(), px.token()
      m:lock()
      local a = px.spawn(function() return select(2, px.with_cancel(tok, function() m:lock() end)).code end)
      px.yield()
      local b = px.spawn(function() m:lock(); local id = px.self(); m:unlock(); return id end)
      px.yield()
      tok:cancel()                                   -- a is leaving, not yet run
      m:unlock()
      assert.equal("ECANCELED", a:join())
      assert.equal(b:id(), b:join())
    end)
  end)

  it("deadlock_report_names_the_holders_and_prints_the_cycle", function()
    local err = raised(run, function()
      local a, b = px.mutex(), px.mutex()
      px.spawn(function() b:lock(); px.yield(); a:lock() end)
      a:lock(); px.yield(); b:lock()
    end)
    assert.equal("EDEADLK", err.code)
    assert.truthy(err.message:find("Mutex lock", 1, true))
    assert.truthy(err.message:find("wait-for cycle", 1, true))
  end)

  it("lock_in_a_fired_scope_fails_at_once_without_queueing", function()
    run(function()
      local m, tok = px.mutex(), px.token()
      local hf = px.spawn(function() m:lock(); m:unlock(); return "h" end)   -- runs later
      m:lock()
      assert.is_true(tok:cancel())
      m:unlock()
      -- A scope fired before the lock: a free mutex is still taken (no wait
      -- was needed), a held one fails at once without queueing.
      local c = px.spawn(function() return px.with_cancel(tok, function() m:lock() end) end)
      m:lock()
      px.yield()   -- hf queues, then c fails (a join of c would hand c the turn)
      local r, err = c:join()
      assert.is_nil(r)
      assert.equal("ECANCELED", err.code)
      assert.equal(1, m:waiters())                 -- hf, which queued first
      m:unlock()
      assert.equal("h", hf:join())
    end)
  end)

  it("eownerdead_goes_past_an_interrupted_waiter_to_the_next", function()
    run(function()
      local m, tok = px.mutex(), px.token()
      local d = px.spawn(function()                -- ends holding it, once two queue
        m:lock()                                   -- and the token is cancelled
        yield_until(function() return m:waiters() == 2 and tok:cancelled() end)
      end)
      yield_until(function() return m:owner() == d:id() end)
      local c = px.spawn(function() return px.with_cancel(tok, function() m:lock() end) end)
      yield_until(function() return m:waiters() == 1 end)
      local w = px.spawn(function()
        local _, dead = m:lock()
        assert.equal(px.self(), m:owner())         -- held, whatever it said
        m:unlock()
        return dead and dead.code
      end)
      yield_until(function() return m:waiters() == 2 end)
      -- c is interrupted and queued to run behind d, which ends first: its
      -- lock goes past c (still in the queue, but leaving) to w.
      assert.is_true(tok:cancel())
      d:join()
      local r, err = c:join()
      assert.is_nil(r)
      assert.equal("ECANCELED", err.code)
      assert.equal("EOWNERDEAD", w:join())         -- the news went on with it
    end)
  end)

  it("a_fiber_id_that_held_the_lock_is_never_mistaken_for_a_new_fiber", function()
    run(function()
      local m, first_id, ids = px.mutex(), nil, {}
      px.spawn(function() first_id = px.self(); m:lock(); m:unlock() end):join()
      px.spawn(function() m:lock() end):join()    -- and one that died holding it
      for i = 1, 64 do                             -- fiber records are recycled; ids are not
        px.spawn(function()
          ids[i] = px.self()
          assert.are_not.equal(first_id, ids[i])
          assert.are_not.equal(px.self(), m:owner())
          local ok, dead = m:trylock()             -- never EDEADLK (raised): not the owner
          assert.is_true(ok)
          assert.is_true(dead == nil or dead.code == "EOWNERDEAD")
          m:unlock()
        end):join()
      end
      for i = 1, 64 do
        for j = 1, i - 1 do assert.are_not.equal(ids[j], ids[i]) end
      end
    end)
  end)

  -- Every Lua fiber is hosted (it waits through EYIELD and a re-call).
  it("hosted_fiber_timed_out_lock_leaves_no_waiter", function()
    run(function()
      local m = px.mutex()
      m:lock()
      local f = px.spawn(function()                -- it gives up while main holds it
        local r, err = px.timeout(0.01, function() m:lock() end)
        return r, err.code, m:waiters(), m:owner() ~= px.self()
      end)
      assert.same({ nil, "ETIMEDOUT", 0, true }, { f:join() })
      assert.equal(px.self(), m:owner())
      m:unlock()
    end)
  end)
end)

describe("rwlock", function()
  it("any_number_of_readers_hold_it_together", function()
    run(function()
      local l, inside, peak, wg = px.rwlock(), 0, 0, px.waitgroup()
      for _ = 1, 5 do
        wg:add()
        px.spawn(function()
          local g <close> = l:read_guard()
          inside = inside + 1; peak = math.max(peak, inside)
          px.sleep(0.005)
          inside = inside - 1
          wg:done()
        end)
      end
      wg:wait()
      assert.equal(5, peak)
    end)
  end)

  it("a_writer_excludes_readers_and_other_writers", function()
    run(function()
      local l, log = px.rwlock(), {}
      l:wrlock()
      local r = px.spawn(function() l:rdlock(); log[#log + 1] = "r"; l:rdunlock() end)
      local w = px.spawn(function() l:wrlock(); log[#log + 1] = "w"; l:wrunlock() end)
      px.sleep(0.005)
      assert.same({}, log)
      l:wrunlock()
      r:join(); w:join()
      assert.equal(2, #log)
    end)
  end)

  it("writer_preference_orders_a_in_a_out_w_in_w_out_r_in_r_out", function()
    run(function()
      local l, log = px.rwlock(), {}
      local a = px.spawn(function()
        l:rdlock(); log[#log + 1] = "a in"; px.sleep(0.01); log[#log + 1] = "a out"; l:rdunlock()
      end)
      px.yield()
      local w = px.spawn(function()
        l:wrlock(); log[#log + 1] = "w in"; log[#log + 1] = "w out"; l:wrunlock()
      end)
      px.yield()
      local r = px.spawn(function()
        l:rdlock(); log[#log + 1] = "r in"; log[#log + 1] = "r out"; l:rdunlock()
      end)
      a:join(); w:join(); r:join()
      assert.same({ "a in", "a out", "w in", "w out", "r in", "r out" }, log)
    end)
  end)

  it("readers_queued_behind_a_writer_are_admitted_together", function()
    run(function()
      local l = px.rwlock()
      l:wrlock()
      local rs = {}
      for i = 1, 3 do rs[i] = px.spawn(function() l:rdlock(); px.sleep(0.005); l:rdunlock() end) end
      px.yield()
      l:wrunlock()
      assert.equal(3, l:readers())
      for i = 1, 3 do rs[i]:join() end
    end)
  end)

  it("upgrade_from_read_to_write_is_edeadlk_without_parking", function()
    run(function()
      local l = px.rwlock()
      l:rdlock()
      assert.equal("EDEADLK", raised(l.wrlock, l).code)
      assert.equal(0, l:waiters())
      l:rdunlock()
    end)
  end)

  it("wrunlock_keeps_the_writers_read_holds_as_a_downgrade", function()
    run(function()
      local l = px.rwlock()
      l:wrlock(); l:rdlock(); l:wrunlock()
      assert.equal(1, l:readers()); assert.equal(0, l:writer())
      l:rdunlock()
      assert.equal(0, l:readers())
    end)
  end)

  it("try_forms_never_park_and_never_pass_a_queued_waiter", function()
    run(function()
      local l = px.rwlock()
      l:rdlock()
      local w = px.spawn(function() l:wrlock(); l:wrunlock() end)
      px.yield()
      local f = px.spawn(function()
        local ok1, e1 = l:tryrdlock()
        local ok2, e2 = l:trywrlock()
        return ok1, e1.code, ok2, e2.code
      end)
      assert.same({ nil, "EBUSY", nil, "EBUSY" }, { f:join() })
      l:rdunlock(); w:join()
    end)
  end)

  it("try_forms_take_a_free_one_and_refuse_a_held_one_without_parking", function()
    run(function()
      local l = px.rwlock()
      assert.is_true(l:tryrdlock()); assert.equal(1, l:readers()); l:rdunlock()
      assert.is_true(l:trywrlock()); assert.equal(px.self(), l:writer()); l:wrunlock()
      l:wrlock()
      local function tried()
        local f = px.spawn(function()
          return select(2, l:tryrdlock()).code, select(2, l:trywrlock()).code
        end)
        return { f:join() }
      end
      assert.same({ "EBUSY", "EBUSY" }, tried()); assert.equal(0, l:waiters())
      local w = h.spawn_waiting(function() l:wrlock(); l:wrunlock() end)
      assert.same({ "EBUSY", "EBUSY" }, tried()); assert.equal(1, l:waiters())
      l:wrunlock()
      w:join()
    end)
  end)

  it("releasing_a_hold_the_caller_does_not_have_is_eperm", function()
    run(function()
      local l = px.rwlock()
      assert.equal("EPERM", raised(l.rdunlock, l).code)
      assert.equal("EPERM", raised(l.wrunlock, l).code)
    end)
  end)

  it("timed_out_writer_leaves_no_waiter_and_lets_the_readers_behind_it_in", function()
    run(function()
      local l = px.rwlock()
      l:rdlock()
      local w = px.spawn(function() return select(2, px.timeout(0.01, function() l:wrlock() end)).code end)
      px.yield()
      local r = px.spawn(function() l:rdlock(); l:rdunlock(); return "in" end)
      assert.equal("ETIMEDOUT", w:join())
      assert.equal("in", r:join())
      assert.equal(0, l:waiters())
      l:rdunlock()
    end)
  end)

  it("dead_writer_releases_its_holds_and_the_next_writer_gets_eownerdead", function()
    run(function()
      local l = px.rwlock()
      px.spawn(function() l:wrlock() end):join()
      local ok, dead = l:wrlock()
      assert.is_true(ok); assert.equal("EOWNERDEAD", dead.code)
      l:wrunlock()
    end)
  end)

  it("dead_reader_releases_all_its_read_holds", function()
    run(function()
      local l = px.rwlock()
      px.spawn(function() l:rdlock(); l:rdlock() end):join()
      assert.equal(0, l:readers())
      assert.is_true(l:trywrlock()); l:wrunlock()
    end)
  end)

  it("writers_are_served_in_fifo_order_by_direct_hand_off", function()
    run(function()
      local l, log, fs = px.rwlock(), {}, {}
      l:rdlock()
      for i = 1, 3 do
        fs[i] = px.spawn(function() l:wrlock(); log[#log + 1] = i; l:wrunlock() end)
        yield_until(function() return l:waiters() == i end)
      end
      l:rdunlock()
      assert.equal(fs[1]:id(), l:writer())          -- handed over directly
      for i = 1, 3 do fs[i]:join() end
      assert.same({ 1, 2, 3 }, log)
      unheld(l)
    end)
  end)

  it("read_side_is_reentrant_even_with_a_writer_waiting", function()
    run(function()
      local l = px.rwlock()
      l:rdlock()
      local w = px.spawn(function() l:wrlock(); l:wrunlock() end)
      yield_until(function() return l:waiters() == 1 end)
      -- A writer waits, yet a fiber holding read holds gets more at once.
      assert.is_true(l:rdlock())
      assert.is_true(l:tryrdlock())
      assert.equal(1, l:readers())                  -- one fiber, three holds
      l:rdunlock(); l:rdunlock()
      assert.equal(0, l:writer())                   -- still one hold left
      l:rdunlock()
      assert.equal(w:id(), l:writer())
      assert.equal("EPERM", raised(l.rdunlock, l).code)
      w:join()
      unheld(l)
    end)
  end)

  it("the_writer_may_take_read_holds_but_not_a_second_write_lock", function()
    run(function()
      local l = px.rwlock()
      l:wrlock()
      assert.is_true(l:rdlock())
      assert.is_true(l:tryrdlock())
      assert.equal(1, l:readers())
      assert.equal("EDEADLK", raised(l.wrlock, l).code)   -- not reentrant on the write side
      assert.equal("EDEADLK", raised(l.trywrlock, l).code)
      l:rdunlock(); l:rdunlock()
      assert.equal(px.self(), l:writer())
      l:wrunlock()
      assert.equal("EPERM", raised(l.wrunlock, l).code)
      unheld(l)
    end)
  end)

  it("wrunlock_right_after_an_interrupted_writer_goes_past_it_to_the_readers", function()
    run(function()
      local l, tok = px.rwlock(), px.token()
      l:wrlock()
      local c = px.spawn(function() return px.with_cancel(tok, function() l:wrlock() end) end)
      yield_until(function() return l:waiters() == 1 end)
      local function reader() local r = l:rdlock(); l:rdunlock(); return r end
      local r1, r2 = px.spawn(reader), px.spawn(reader)
      yield_until(function() return l:waiters() == 3 end)
      assert.is_true(tok:cancel())                  -- c interrupted, still queued
      l:wrunlock()
      assert.equal(0, l:writer())                   -- past c, which is leaving ...
      assert.equal(2, l:readers())                  -- ... to the readers behind it
      assert.equal(0, l:waiters())
      local r, err = c:join()
      assert.is_nil(r)
      assert.equal("ECANCELED", err.code)
      assert.is_true(r1:join())
      assert.is_true(r2:join())
      unheld(l)
    end)
  end)

  it("wrunlock_right_after_an_interrupted_reader_goes_past_it_to_the_writer", function()
    run(function()
      local l, tok = px.rwlock(), px.token()
      l:wrlock()
      local c = px.spawn(function() return px.with_cancel(tok, function() l:rdlock() end) end)
      yield_until(function() return l:waiters() == 1 end)
      local w = px.spawn(function() local r = l:wrlock(); l:wrunlock(); return r end)
      yield_until(function() return l:waiters() == 2 end)
      assert.is_true(tok:cancel())
      l:wrunlock()
      assert.equal(0, l:readers())                  -- past c, which is leaving,
      assert.equal(w:id(), l:writer())              -- to the writer behind it
      assert.equal(0, l:waiters())
      local r, err = c:join()
      assert.is_nil(r)
      assert.equal("ECANCELED", err.code)
      assert.is_true(w:join())
      unheld(l)
    end)
  end)

  -- tests/c/sync/family.c's rule over the rwlock's row: the wait is a read
  -- lock, the hold a write lock; a reader waits at the death.
  it("owner_death_hands_it_over_with_eownerdead_and_tells_later_waits", function()
    -- wait() on this fiber twice, as a waiter would: first after the death,
    -- then again; each is told, and leaves (a read hold: rdunlock).
    local function told_twice(l, wait)
      for _ = 1, 2 do
        local ok, dead = wait(l)
        assert.is_true(ok)
        assert.equal("EOWNERDEAD", dead.code)
        assert.equal(1, l:readers())
        l:rdunlock()
      end
    end
    run(function()                                  -- handed over at the death
      local l = px.rwlock()
      local d = px.spawn(function()                 -- ends holding it, once a reader waits
        l:wrlock()
        yield_until(function() return l:waiters() == 1 end)
      end)
      yield_until(function() return l:writer() == d:id() end)
      local w = px.spawn(function()
        local ok, dead = l:rdlock()
        assert.is_true(ok)
        assert.equal(1, l:readers())
        l:rdunlock()
        return dead and dead.code
      end)
      d:join()
      assert.equal("EOWNERDEAD", w:join())
      local ok, dead = l:rdlock()                   -- and the next wait is told too
      assert.is_true(ok); assert.equal("EOWNERDEAD", dead.code)
      l:rdunlock()
      unheld(l)
    end)
    run(function()                                  -- nobody waited at the death
      local l = px.rwlock()
      px.spawn(function() l:wrlock() end):join()
      assert.equal(0, l:writer())                   -- released as it ended
      told_twice(l, l.rdlock)
    end)
    run(function()                                  -- the try form says the same
      local l = px.rwlock()
      px.spawn(function() l:wrlock() end):join()
      told_twice(l, l.tryrdlock)
    end)
  end)

  it("readers_after_a_dead_writer_get_eownerdead_until_a_writer_takes_it", function()
    run(function()
      local l = px.rwlock()
      px.spawn(function() l:wrlock(); l:rdlock() end):join()   -- ends holding both
      local ok, dead = l:rdlock()
      assert.is_true(ok); assert.equal("EOWNERDEAD", dead.code)
      l:rdunlock()
      ok, dead = l:wrlock()
      assert.is_true(ok); assert.equal("EOWNERDEAD", dead.code)
      l:wrunlock()
      assert.same({ true }, { l:rdlock() })           -- repaired
      l:rdunlock()
      unheld(l)
    end)
  end)

  it("a_fiber_that_once_held_it_is_never_mistaken_for_a_new_fiber", function()
    run(function()
      local l = px.rwlock()
      px.spawn(function() l:rdlock(); l:rdlock(); l:rdlock() end):join()   -- three holds
      px.spawn(function() l:wrlock(); l:rdlock() end):join()
      for _ = 1, 64 do                               -- on recycled fiber records
        px.spawn(function()
          assert.equal(0, l:readers())
          assert.equal("EPERM", raised(l.rdunlock, l).code)   -- holds nothing
          assert.equal("EPERM", raised(l.wrunlock, l).code)
          local ok, dead = l:wrlock()                -- not an upgrade: no EDEADLK
          assert.is_true(ok)
          assert.is_true(dead == nil or dead.code == "EOWNERDEAD")
          l:wrunlock()
        end):join()
      end
      unheld(l)
    end)
  end)

  it("deadlock_report_names_readers_and_writer_and_prints_the_cycle", function()
    local l, mx = px.rwlock(), px.mutex()
    local rd_id, wr_id, late_id
    -- rd holds a read hold and waits for the mutex; wr holds the mutex and
    -- waits for the write lock; late waits behind wr for a read hold.
    local err = raised(run, function()
      local fs = {
        px.spawn(function()
          rd_id = px.number()
          l:rdlock()
          yield_until(function() return mx:owner() ~= 0 end)
          mx:lock()
        end),
        px.spawn(function()
          wr_id = px.number()
          mx:lock()
          yield_until(function() return l:readers() == 1 end)
          l:wrlock()
        end),
        px.spawn(function()
          late_id = px.number()
          yield_until(function() return l:waiters() == 1 and mx:waiters() == 1 end)
          l:rdlock()
        end),
      }
      for _, f in ipairs(fs) do f:join() end
    end)
    assert.equal("EDEADLK", err.code)
    local report = h.unnamed(err.message)
    local wr_line = string.format('fiber %d: parked on "RwLock write lock", waits on (rwlock@%%S+) held by fiber %d\n',
      wr_id, rd_id)
    local at = report:match(wr_line)
    assert.truthy(at, report)
    local function has(text) assert.truthy(report:find(text, 1, true), report) end
    has(string.format('fiber %d: parked on "RwLock read lock", waits on %s held by fiber %d\n',
      late_id, at, rd_id))
    has(string.format('-> %s ("RwLock write lock") held by fiber %d', at, rd_id))
    assert.truthy(report:match(string.format('%%-> mutex@%%S+ %%("Mutex lock"%%) held by fiber %d', wr_id)),
      report)
    -- The run unwound its fibers (each wait raised ECANCELED): their holds
    -- and waits are gone.
    unheld(l)
    assert.equal(0, mx:owner()); assert.equal(0, mx:waiters())
  end)

  it("random_locking_under_random_timeouts_keeps_exclusion_and_leaves_nothing_queued", function()
    local l, sm = px.rwlock(), px.mutex()
    local in_write, in_read, in_mutex = 0, 0, false
    local ops, timeouts = 0, 0
    -- Bounded by a random timeout of under 300 us (a quarter unbounded): true
    -- when it got it.
    local function bounded(rng, lock)
      if rng() % 4 == 0 then lock(); return true end
      local ok, err = px.timeout((rng() % 300) * 1e-6, function() lock(); return true end)
      if ok then return true end
      assert.equal("ETIMEDOUT", err.code)
      timeouts = timeouts + 1
      return false
    end
    local function hold_for(rng)
      if rng() % 8 == 0 then px.sleep(50e-6) end   -- long enough for timeouts to fire
      for _ = 1, rng() % 3 do px.yield() end
    end
    local steps = {
      function(rng)
        if not bounded(rng, function() l:rdlock() end) then return end
        assert.equal(0, in_write)
        in_read = in_read + 1
        if rng() % 2 == 1 then assert.is_true(l:rdlock())   -- reentrant: at once
        else assert.is_true(l:tryrdlock()) end
        assert.equal("EDEADLK", raised(l.wrlock, l).code)
        hold_for(rng)
        assert.equal(0, in_write)
        in_read = in_read - 1
        l:rdunlock(); l:rdunlock()
      end,
      function(rng)
        if not bounded(rng, function() l:wrlock() end) then return end
        assert.is_true(in_write == 0 and in_read == 0)
        assert.equal(0, l:readers())
        in_write = 1
        hold_for(rng)
        assert.equal(0, in_read)
        in_write = 0
        l:wrunlock()
      end,
      function(rng)
        if not bounded(rng, function() sm:lock() end) then return end
        assert.is_false(in_mutex)
        in_mutex = true
        assert.equal(px.self(), sm:owner())
        hold_for(rng)
        in_mutex = false
        sm:unlock()
      end,
    }
    run(function()
      local fs = {}
      for i = 1, 24 do
        local rng = xorshift(i * 7919 + 1)
        fs[i] = px.spawn(function()
          for _ = 1, 1000 do
            steps[rng() % 3 + 1](rng)
            ops = ops + 1
            if rng() % 2 == 1 then px.yield() end
          end
        end)
      end
      for i = 1, 24 do fs[i]:join() end
    end)
    assert.equal(24 * 1000, ops)
    assert.is_true(timeouts > 0, "no timeout fired")
    unheld(l)
    assert.equal(0, sm:owner()); assert.equal(0, sm:waiters())
  end)
end)

describe("waitgroup", function()
  it("wait_at_zero_returns_at_once", function()
    run(function() assert.is_true(px.waitgroup():wait()) end)
  end)

  it("wait_parks_until_the_last_job_is_done", function()
    run(function()
      local wg, done = px.waitgroup(), 0
      wg:add(3)
      for _ = 1, 3 do px.spawn(function() px.sleep(0.002); done = done + 1; wg:done() end) end
      wg:wait()
      assert.equal(3, done); assert.equal(0, wg:count())
    end)
  end)

  it("going_below_zero_is_einval_and_leaves_the_count_unchanged", function()
    local wg = px.waitgroup()
    wg:add(1)
    assert.equal("EINVAL", raised(wg.add, wg, -2).code)
    assert.equal(1, wg:count())
    wg:done()
    assert.equal("EINVAL", raised(wg.done, wg).code)
    assert.equal(0, wg:count())
  end)

  it("calls_that_need_no_fiber_work_off_fiber_and_waits_stay_enofiber", function()
    local wg = px.waitgroup()
    wg:add(2); wg:done(); assert.equal(1, wg:count())
    assert.equal("ENOFIBER", raised(wg.wait, wg).code)
    assert.equal(1, wg:count())
    wg:done()
    assert.equal("ENOFIBER", raised(wg.wait, wg).code)   -- at zero too
  end)

  it("one_call_wakes_every_waiter", function()
    run(function()
      local wg, woken, fs = px.waitgroup(), 0, {}
      wg:add(1)
      for i = 1, 8 do fs[i] = px.spawn(function() local r = wg:wait(); woken = woken + 1; return r end) end
      px.yield()
      assert.equal(0, woken)
      wg:done()
      assert.equal(0, wg:count())
      for i = 1, 8 do assert.is_true(fs[i]:join()) end
      assert.equal(8, woken)
    end)
  end)

  it("top_up_while_waiting_keeps_the_waiter_parked_until_zero", function()
    run(function()
      local wg = px.waitgroup()
      wg:add(1)
      local f = px.spawn(function() return wg:wait() end)
      px.yield()
      wg:add(2); wg:done()
      px.yield()
      assert.is_false(f:done())
      wg:done(); px.yield()
      assert.is_false(f:done())
      wg:done()
      assert.is_true(f:join())
    end)
  end)

  it("cancelled_wait_leaves_nothing_queued", function()
    run(function()
      local wg, tok = px.waitgroup(), px.token()
      wg:add(1)
      px.spawn(function() tok:cancel() end)
      local _, err = px.with_cancel(tok, function() wg:wait() end)
      assert.equal("ECANCELED", err.code)
      wg:done()
    end)
  end)

  it("wait_in_a_fired_scope_fails_at_once_without_queueing", function()
    run(function()
      local wg, tok = px.waitgroup(), px.token()
      wg:add(1)
      assert.is_true(tok:cancel())                  -- fired before the wait
      local r, err = px.with_cancel(tok, function() wg:wait() end)
      assert.is_nil(r)
      assert.equal("ECANCELED", err.code)
      wg:done()
    end)
  end)

  it("a_waiter_released_at_zero_returns_even_if_the_count_rises_again", function()
    run(function()
      local wg = px.waitgroup()
      wg:add(1)
      local w = spawn_waiting(function() return wg:wait() end)
      wg:done()                                     -- zero: w is released ...
      wg:add(1)                                     -- ... and stays released
      assert.is_true(w:join())
      wg:done()
    end)
  end)
end)

describe("barrier", function()
  it("zero_parties_is_refused_with_einval", function()
    assert.equal("EINVAL", raised(px.barrier, 0).code)
  end)

  it("exactly_one_leader_per_phase", function()
    run(function()
      local b, leaders = px.barrier(3), 0
      local fs = {}
      for i = 1, 3 do
        fs[i] = px.spawn(function()
          for _ = 1, 4 do if b:arrive_and_wait() then leaders = leaders + 1 end end
        end)
      end
      for i = 1, 3 do fs[i]:join() end
      assert.equal(4, leaders)
      assert.equal(4, b:phase())
    end)
  end)

  it("timed_out_arrival_withdraws_its_count", function()
    run(function()
      local b = px.barrier(2)
      local _, err = px.timeout(0.005, function() b:arrive_and_wait() end)
      assert.equal("ETIMEDOUT", err.code)
      assert.equal(0, b:waiting())
      local f = px.spawn(function() return b:arrive_and_wait() end)
      local lead = b:arrive_and_wait()
      assert.is_true(lead ~= f:join())
      assert.equal(1, b:phase())
    end)
  end)

  it("lockstep_over_three_generations_with_a_slow_party", function()
    run(function()
      local b, step, fs = px.barrier(3), {}, {}
      -- Party 1 is slow (it yields a lot before each arrival); nobody may run
      -- ahead of the slowest party.
      for me = 1, 3 do
        step[me] = -1
        fs[me] = px.spawn(function()
          for g = 0, 2 do
            if me == 1 then for _ = 1, 50 do px.yield() end end
            step[me] = g
            b:arrive_and_wait()
            for p = 1, 3 do assert.is_true(step[p] >= g) end   -- everyone reached it
            assert.is_true(b:phase() >= g + 1)
          end
        end)
      end
      for me = 1, 3 do fs[me]:join() end
      assert.equal(3, b:phase())
      assert.equal(0, b:waiting())
    end)
  end)

  it("the_last_arrival_leads_without_parking_and_the_others_get_0", function()
    run(function()
      local b, arrived, fs = px.barrier(3), 0, {}
      for i = 1, 2 do
        fs[i] = px.spawn(function() arrived = arrived + 1; return b:arrive_and_wait() end)
      end
      yield_until(function() return arrived == 2 end)
      assert.equal(2, b:waiting())
      -- The last arrival leads at once: the phase is over and re-armed before
      -- the others have even run.
      assert.is_true(b:arrive_and_wait())
      assert.equal(1, b:phase())
      assert.equal(0, b:waiting())
      for i = 1, 2 do assert.is_false(fs[i]:join()) end
    end)
  end)

  it("phases_never_mix_a_fast_rearrival_waits_for_the_next_phase", function()
    run(function()
      local b, arrived, second_round = px.barrier(2), 0, 0
      local a = px.spawn(function()
        arrived = arrived + 1
        local first = b:arrive_and_wait()
        second_round = second_round + 1
        return first, b:arrive_and_wait()
      end)
      yield_until(function() return arrived == 1 end)
      assert.is_true(b:arrive_and_wait())           -- leads phase 1; a not run yet
      assert.equal(0, second_round)
      -- Arriving again at once makes this fiber phase 2's first arrival, not
      -- the partner of a's stale one: it parks until a arrives again.
      assert.is_false(b:arrive_and_wait())
      assert.same({ false, true }, { a:join() })    -- a led phase 2
      assert.equal(2, b:phase())
      assert.equal(0, b:waiting())
    end)
  end)

  it("cancelled_arrival_withdraws_its_count_even_before_it_runs_again", function()
    run(function()
      local b, tok, arrived = px.barrier(3), px.token(), 0
      local c = px.spawn(function()
        arrived = arrived + 1
        return px.with_cancel(tok, function() b:arrive_and_wait() end)
      end)
      local a = px.spawn(function() arrived = arrived + 1; return b:arrive_and_wait() end)
      yield_until(function() return arrived == 2 end)
      assert.equal(2, b:waiting())
      -- c is interrupted but has not run yet: it is still queued.  An arrival
      -- now would be the third only if c still counted; it must park.
      assert.is_true(tok:cancel())
      local late = px.spawn(function() return b:arrive_and_wait() end)   -- runs after we park
      assert.is_false(b:arrive_and_wait())
      local r, err = c:join()
      assert.is_nil(r)
      assert.equal("ECANCELED", err.code)
      assert.is_false(a:join())
      assert.is_true(late:join())                   -- late completed the phase
      assert.equal(1, b:phase())
      assert.equal(0, b:waiting())
    end)
  end)

  it("arrival_in_a_fired_scope_fails_at_once_without_counting", function()
    run(function()
      local b, tok = px.barrier(2), px.token()
      assert.is_true(tok:cancel())
      local r, err = px.with_cancel(tok, function() b:arrive_and_wait() end)
      assert.is_nil(r)
      assert.equal("ECANCELED", err.code)
      assert.equal(0, b:waiting())
    end)
  end)

  it("a_one_party_barrier_always_leads", function()
    run(function()
      local b = px.barrier(1)
      for _ = 1, 3 do assert.is_true(b:arrive_and_wait()) end
      assert.equal(3, b:phase())
      assert.equal(0, b:waiting())
    end)
  end)
end)

describe("once", function()
  it("runs_the_action_once_among_5_racers_who_wait_for_it", function()
    run(function()
      local o, runs, fs = px.once(), 0, {}
      for i = 1, 5 do
        fs[i] = px.spawn(function()
          o:call(function() runs = runs + 1; px.sleep(0.005) end)
          return o:done()
        end)
      end
      for i = 1, 5 do assert.is_true(fs[i]:join()) end
      assert.equal(1, runs)
    end)
  end)

  it("later_callers_return_at_once_without_running_it", function()
    run(function()
      local o = px.once()
      assert.equal(42, o:call(function() return 42 end))
      assert.equal(0, select("#", o:call(function() error("never") end)))
    end)
  end)

  it("a_failed_action_is_done_and_never_retried", function()
    run(function()
      local o = px.once()
      assert.equal("bad", raised(o.call, o, function() error("bad", 0) end))
      assert.is_true(o:done())
      o:call(function() error("retried") end)
    end)
  end)

  it("reentrant_do_from_inside_the_action_is_edeadlk", function()
    run(function()
      local o = px.once()
      o:call(function() assert.equal("EDEADLK", raised(o.call, o, function() end).code) end)
    end)
  end)

  it("a_runner_ending_inside_the_action_ends_it", function()
    run(function()
      local o, tok, runs = px.once(), px.token(), 0
      local r = px.spawn(function()               -- interrupted inside the action
        return px.with_cancel(tok, function() o:call(function() runs = runs + 1; px.event():wait() end) end)
      end)
      yield_until(function() return runs == 1 end)
      local w = spawn_waiting(function() o:call(error, "the action ran twice"); return "waited" end)
      px.spawn(function() tok:cancel() end)
      local ok, err = r:join()
      assert.is_nil(ok); assert.equal("ECANCELED", err.code)
      assert.equal("waited", w:join())             -- the waiter just returns
      assert.is_true(o:done())
      o:call(error, "the action ran twice")
      assert.equal(1, runs)
    end)
  end)

  it("done_works_anywhere_and_do_without_an_action_is_einval", function()
    local o = px.once()                             -- off-fiber
    assert.is_false(o:done())
    assert.equal("EINVAL", raised(o.call, o, nil).code)
    assert.is_false(o:done())
  end)

  it("deadlock_report_names_the_runner_and_prints_the_cycle", function()
    -- The action needs a mutex that a fiber waiting for the Once holds.
    local o, mx = px.once(), px.mutex()
    local runner_id, holder_id
    local err = raised(run, function()
      local runner = px.spawn(function()
        runner_id = px.number()
        o:call(function()
          yield_until(function() return mx:owner() ~= 0 end)
          mx:lock()                                 -- never returns
        end)
      end)
      local holder = px.spawn(function()
        holder_id = px.number()
        mx:lock()
        o:call(function() error("the action ran twice") end)   -- parks behind the runner
      end)
      runner:join(); holder:join()
    end)
    assert.equal("EDEADLK", err.code)
    local report = h.unnamed(err.message)
    local at = report:match(string.format('fiber %d: parked on "Once init", waits on (once@%%S+) held by fiber %d\n',
      holder_id, runner_id))
    assert.truthy(at, report)
    assert.truthy(report:find(string.format('-> %s ("Once init") held by fiber %d', at, runner_id), 1, true), report)
    assert.truthy(report:match(string.format('%%-> mutex@%%S+ %%("Mutex lock"%%) held by fiber %d', holder_id)),
      report)
  end)
end)

describe("sem", function()
  it("acquire_takes_a_free_unit_at_once_and_tryacquire_refuses_when_none", function()
    run(function()
      local s = px.semaphore(1)
      assert.is_true(s:acquire())
      local ok, err = s:tryacquire()
      assert.is_nil(ok); assert.equal("EBUSY", err.code)
      s:release(); assert.equal(1, s:value())
    end)
  end)

  -- Lua's largest count is math.maxinteger (C's is SIZE_MAX): past it, EINVAL,
  -- and the count stays what value() can say.
  it("release_past_the_largest_count_is_einval", function()
    local s = px.semaphore(math.maxinteger)
    local err = raised(s.release, s)
    assert.equal("EINVAL", err.code)
    assert.equal(math.maxinteger, s:value())
  end)

  it("at_most_initial_fibers_hold_units_at_once", function()
    run(function()
      local s, inside, peak, fs = px.semaphore(2), 0, 0, {}
      for i = 1, 6 do
        fs[i] = px.spawn(function()
          local g <close> = s:guard()
          inside = inside + 1; peak = math.max(peak, inside)
          px.sleep(0.002)
          inside = inside - 1
        end)
      end
      for i = 1, 6 do fs[i]:join() end
      assert.equal(2, peak); assert.equal(2, s:value())
    end)
  end)

  it("with_holds_one_unit_and_gives_it_back_on_an_exception", function()
    -- Lua's with-block is a guard's scope: the guard holds one unit and an
    -- error leaving the scope gives it back.
    run(function()
      local s = px.semaphore(1)
      local ok, err = pcall(function()
        local g <close> = s:guard()
        assert.equal(0, s:value())
        error("boom", 0)
      end)
      assert.is_false(ok); assert.equal("boom", err)
      assert.equal(1, s:value())
      local r, timed = px.timeout(0.01, function()
        local g <close> = s:guard()
        s:acquire()
      end)
      assert.is_nil(r); assert.equal("ETIMEDOUT", timed.code)
      assert.equal(1, s:value()); assert.equal(0, s:waiters())
    end)
  end)

  it("hands_units_off_in_fifo_order", function()
    run(function()
      local s, order, fs = px.semaphore(0), {}, {}
      for i = 1, 4 do
        fs[i] = px.spawn(function() s:acquire(); order[#order + 1] = i end)
        px.yield()
      end
      for _ = 1, 4 do s:release() end
      for i = 1, 4 do fs[i]:join() end
      assert.same({ 1, 2, 3, 4 }, order)
    end)
  end)

  it("calls_that_need_no_fiber_work_off_fiber_and_waits_stay_enofiber", function()
    local s = px.semaphore(0)
    s:release(); assert.equal(1, s:value())
    assert.equal("ENOFIBER", raised(s.acquire, s).code)
    assert.equal(1, s:value())                        -- the wait took nothing
    assert.is_true(s:tryacquire())
    assert.equal(0, s:value())
  end)

  it("release_hands_the_unit_to_the_first_waiter_and_tryacquire_never_steals_it", function()
    run(function()
      local s = px.semaphore(0)
      local f = px.spawn(function() return s:acquire() end)
      px.yield()
      assert.equal(1, s:waiters())
      s:release()
      assert.equal(0, s:value()); assert.equal(0, s:waiters())
      local ok, err = s:tryacquire()
      assert.is_nil(ok); assert.equal("EBUSY", err.code)
      assert.is_true(f:join())
    end)
  end)

  it("release_right_after_an_interrupt_goes_past_it_to_the_next_waiter", function()
    run(function()
      local s, tok = px.semaphore(0), px.token()
      local a = px.spawn(function() return select(2, px.with_cancel(tok, function() s:acquire() end)).code end)
      px.yield()
      local b = px.spawn(function() return s:acquire() end)
      px.yield()
      tok:cancel()                                   -- a is leaving, not yet run
      s:release()
      assert.equal("ECANCELED", a:join())
      assert.is_true(b:join())
      assert.equal(0, s:value())                     -- b's, not back to the count
    end)
  end)

  it("timed_out_acquire_leaves_no_waiter_and_takes_nothing", function()
    run(function()
      local s = px.semaphore(0)
      local _, err = px.timeout(0.005, function() s:acquire() end)
      assert.equal("ETIMEDOUT", err.code)
      assert.equal(0, s:waiters()); assert.equal(0, s:value())
    end)
  end)
end)

describe("event", function()
  it("wait_after_set_returns_at_once_and_keeps_returning", function()
    run(function()
      local e = px.event()
      e:set()
      assert.is_true(e:wait()); assert.is_true(e:wait()); assert.is_true(e:is_set())
    end)
  end)

  it("clear_makes_wait_park_again_until_the_next_set", function()
    run(function()
      local e = px.event()
      e:set(); e:clear()
      local f = px.spawn(function() e:wait(); return "woke" end)
      px.yield()
      assert.is_false(f:done())
      assert.equal(1, e:set())
      assert.equal("woke", f:join())
    end)
  end)

  it("calls_that_need_no_fiber_work_off_fiber_and_waits_stay_enofiber", function()
    local e = px.event()
    assert.equal(0, e:set())
    assert.equal("ENOFIBER", raised(e.wait, e).code)
    assert.is_true(e:is_set())                       -- the wait took nothing
    e:clear()
    assert.is_false(e:is_set())
    assert.equal("ENOFIBER", raised(e.wait, e).code)
  end)

  it("one_call_wakes_every_waiter", function()
    run(function()
      local e, woken, fs = px.event(), 0, {}
      for i = 1, 8 do fs[i] = px.spawn(function() local r = e:wait(); woken = woken + 1; return r end) end
      px.yield()
      assert.equal(0, woken)
      assert.equal(8, e:set())                         -- says how many it woke
      assert.is_true(e:is_set())
      for i = 1, 8 do assert.is_true(fs[i]:join()) end
      assert.equal(8, woken)
    end)
  end)

  it("a_waiter_woken_by_set_returns_0_even_if_cleared_before_it_ran", function()
    run(function()
      local e = px.event()
      local f = px.spawn(function() return e:wait() end)
      px.yield()
      e:set(); e:clear()
      assert.is_true(f:join())
    end)
  end)
end)

describe("chan", function()
  it("values_come_out_in_the_order_they_went_in", function()
    run(function()
      local ch, got = px.channel(3), {}
      px.spawn(function() for i = 1, 10 do ch:send(i) end; ch:close() end)
      for v in ch:values() do got[#got + 1] = v end
      assert.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, got)
    end)
  end)

  it("buffered_send_parks_only_while_the_channel_is_full", function()
    run(function()
      local ch = px.channel(2)
      assert.is_true(ch:send("a")); assert.is_true(ch:send("b"))
      local f = px.spawn(function() ch:send("c"); return "sent" end)
      px.yield()
      assert.is_false(f:done())
      assert.equal("a", ch:recv())
      assert.equal("sent", f:join())
      assert.equal(2, ch:len())
    end)
  end)

  it("unbuffered_send_completes_only_when_a_receiver_takes_the_value", function()
    run(function()
      local ch, log = px.channel(0), {}
      local f = px.spawn(function() ch:send({ 1 }); log[#log + 1] = "sent" end)
      px.sleep(0.002)
      assert.same({}, log)
      assert.same({ 1 }, ch:recv())
      f:join()
      assert.same({ "sent" }, log)
    end)
  end)

  it("trysend_and_tryrecv_never_park_buffered_or_not", function()
    run(function()
      local ch = px.channel(1)
      assert.is_true(ch:trysend(false))               -- false is a value
      local ok, err = ch:trysend(2)
      assert.is_nil(ok); assert.equal("EBUSY", err.code)
      assert.is_false(ch:tryrecv())
      local v, e2 = ch:tryrecv()
      assert.is_nil(v); assert.equal("EBUSY", e2.code)
    end)
  end)

  it("try_forms_and_close_need_no_fiber_and_a_null_out_is_einval", function()
    -- (Lua's recv returns the value: there is no out argument to leave NULL)
    local ch = px.channel(1)
    assert.is_true(ch:trysend(1)); assert.equal(1, ch:tryrecv())
    assert.is_true(ch:trysend(2))
    assert.is_true(ch:close())
    assert.equal(2, ch:tryrecv())
    assert.equal("ECLOSED", select(2, ch:tryrecv()).code)
  end)

  it("close_lets_receivers_drain_the_buffer_then_gives_eclosed", function()
    run(function()
      local ch = px.channel(2)
      ch:send(1); ch:send(2); ch:close()
      assert.equal(1, ch:recv()); assert.equal(2, ch:recv())
      local v, err = ch:recv()
      assert.is_nil(v); assert.equal("ECLOSED", err.code)
    end)
  end)

  it("after_close_senders_and_a_second_close_get_eclosed", function()
    run(function()
      local ch = px.channel(1)
      assert.is_true(ch:close())
      local ok, err = ch:send(1)
      assert.is_nil(ok); assert.equal("ECLOSED", err.code)
      assert.is_false(ch:close())
    end)
  end)

  it("close_wakes_parked_receivers_with_eclosed", function()
    run(function()
      local ch = px.channel(0)
      local f = px.spawn(function() return select(2, ch:recv()).code end)
      px.yield()
      ch:close()
      assert.equal("ECLOSED", f:join())
    end)
  end)

  it("close_wakes_parked_senders_with_eclosed_and_their_values_unsent", function()
    run(function()
      local ch = px.channel(0)
      local f = px.spawn(function() return select(2, ch:send("v")).code end)
      px.yield()
      ch:close()
      assert.equal("ECLOSED", f:join())
      assert.is_nil((ch:tryrecv()))
    end)
  end)

  it("timed_out_send_sends_nothing_and_timed_out_recv_takes_nothing", function()
    run(function()
      local ch = px.channel(1)
      ch:send("first")
      local _, e1 = px.timeout(0.005, function() ch:send("second") end)
      assert.equal("ETIMEDOUT", e1.code)
      assert.equal(1, ch:len())
      local empty = px.channel(0)
      local _, e2 = px.timeout(0.005, function() empty:recv() end)
      assert.equal("ETIMEDOUT", e2.code)
      assert.equal("first", ch:recv())
    end)
  end)

  it("four_producers_four_consumers_lose_nothing_duplicate_nothing_keep_order", function()
    run(function()
      local ch, seen, fs = px.channel(4), {}, {}
      for p = 1, 4 do
        px.spawn(function() for i = 1, 250 do ch:send({ p, i }) end end)
      end
      for c = 1, 4 do
        fs[c] = px.spawn(function()
          local last = {}                           -- each consumer sees each producer in order
          for _ = 1, 250 do
            local v = ch:recv()
            local p, i = v[1], v[2]
            assert.is_true(i > (last[p] or 0)); last[p] = i
            seen[p * 1000 + i] = (seen[p * 1000 + i] or 0) + 1
          end
        end)
      end
      for c = 1, 4 do fs[c]:join() end
      local n = 0
      for _, count in pairs(seen) do assert.equal(1, count); n = n + 1 end
      assert.equal(1000, n)
    end)
  end)

  it("a_channel_without_a_capacity_is_unbuffered", function()
    -- px.channel() is px.channel(0), as documented
    px.run(function()
      local ch = px.channel()
      assert.equal(0, ch:cap())
      assert.equal("EBUSY", select(2, ch:trysend(1)).code)
      px.spawn(function() ch:send("v") end)
      assert.equal("v", ch:recv())
    end)
  end)

  it("values_are_any_values_of_the_language_and_keep_their_identity", function()
    run(function()
      local objs = { {}, "s", 3.5, 7, true, false, print, coroutine.create(print), px.mutex() }
      for _, cap in ipairs({ 0, 2, 16 }) do
        local ch = px.channel(cap)
        px.spawn(function()
          for _, o in ipairs(objs) do assert.is_true(ch:send(o)) end
          ch:close()
        end)
        local got = {}
        while true do
          local v, err = ch:recv()
          if err then assert.equal("ECLOSED", err.code) break end
          got[#got + 1] = v
        end
        assert.equal(#objs, #got)
        for i = 1, #objs do assert.is_true(rawequal(objs[i], got[i])) end
      end
    end)
  end)

  it("channel_arguments_are_checked", function()
    for _, bad in ipairs({ -1, "1", 1.5, {} }) do   -- a capacity is an integer >= 0
      assert.equal("EINVAL", raised(px.channel, bad).code)
    end
  end)

  it("sending_nil_is_einval", function()
    run(function()
      local ch = px.channel(1)
      assert.equal("EINVAL", raised(ch.send, ch, nil).code)
      assert.equal(0, ch:len())
    end)
  end)

  it("recv_parks_until_a_value_is_handed_to_it", function()
    run(function()
      local ch = px.channel(1)
      local r = spawn_waiting(function() return ch:recv() end)
      assert.is_true(ch:send(7))                    -- straight into r's hands
      assert.equal(0, ch:len())
      assert.is_true(ch:trysend(8))                 -- r no longer waits: buffered
      assert.equal(1, ch:len())
      assert.equal(7, r:join())
      assert.equal(8, ch:recv())
    end)
  end)

  it("cancelled_recv_racing_a_send_takes_nothing_and_the_value_goes_on", function()
    run(function()
      local ch, tok, got = px.channel(0), px.token(), {}
      local c = px.spawn(function()
        return px.with_cancel(tok, function() got.c = ch:recv() end)
      end)
      local r = px.spawn(function() got.r = ch:recv() end)
      px.yield()
      assert.is_false(c:done() or r:done())         -- both parked
      -- c is interrupted but has not run yet: the value sent now must not be
      -- handed to it, and goes to r.
      assert.is_true(tok:cancel())
      assert.is_true(ch:send(9))
      local res, err = c:join()
      r:join()
      assert.is_nil(res)
      assert.equal("ECANCELED", err.code)
      assert.is_nil(got.c)
      assert.equal(9, got.r)
    end)
  end)

  it("cancelled_send_racing_a_recv_sends_nothing", function()
    run(function()
      local ch, tok = px.channel(0), px.token()
      local c = px.spawn(function()
        return px.with_cancel(tok, function() ch:send(1) end)
      end)
      local s = px.spawn(function() return ch:send(2) end)
      px.yield()
      assert.is_false(c:done() or s:done())         -- both parked
      -- c is interrupted but has not run yet: a receive now skips its value.
      assert.is_true(tok:cancel())
      assert.equal(2, ch:recv())
      local res, err = c:join()
      assert.is_true(s:join())
      assert.is_nil(res)
      assert.equal("ECANCELED", err.code)           -- and 1 was not sent
      local v, busy = ch:tryrecv()
      assert.is_nil(v); assert.equal("EBUSY", busy.code)
    end)
  end)

  it("interrupted_sends_and_recvs_under_4x4_lose_and_duplicate_nothing", function()
    local interrupted = 0
    -- Four producers send EACH values each, four consumers take them; each
    -- try is bounded by a timeout of a few microseconds and retried, so many
    -- of them are interrupted.
    local function stress(cap, each)
      local ch, rng, seen = px.channel(cap), xorshift(7), {}
      local function bounded(op)
        while true do
          local r, err = px.timeout((rng() % 20) * 1e-6, op)
          if r ~= nil or err.code ~= "ETIMEDOUT" then return r, err end
          interrupted = interrupted + 1
        end
      end
      local function maybe_yield() if rng() % 3 == 0 then px.yield() end end
      run(function()
        local cf, pf = {}, {}
        for i = 1, 4 do
          cf[i] = px.spawn(function()
            local last = { -1, -1, -1, -1 }
            while true do
              local v, err = bounded(function() return ch:recv() end)
              if v == nil then assert.equal("ECLOSED", err.code); return end
              local p, i = v >> 16, v & 0xffff
              assert.is_true(p < 4 and i < each)
              assert.is_nil(seen[v])                -- never twice
              seen[v] = true
              assert.is_true(i > last[p + 1])       -- each producer's order kept
              last[p + 1] = i
              maybe_yield()
            end
          end)
        end
        for p = 0, 3 do
          pf[p + 1] = px.spawn(function()
            for i = 0, each - 1 do
              assert.is_true(bounded(function() return ch:send(p << 16 | i) end))
              maybe_yield()
            end
          end)
        end
        for i = 1, 4 do pf[i]:join() end
        assert.is_true(ch:close())
        for i = 1, 4 do cf[i]:join() end
      end)
      for p = 0, 3 do
        for i = 0, each - 1 do assert.is_true(seen[p << 16 | i]) end   -- never lost
      end
    end
    stress(2, 2000)
    stress(0, 2000)
    assert.is_true(interrupted > 0)                 -- the race was exercised
  end)
end)

-- What the whole family keeps beyond tests/c/sync/family.c (family_spec.lua):
-- the Lua objects' lives.
describe("family", function()
  it("objects_collected_while_held_or_waited_on_are_freed_safely", function()
    assert.equal("stop", raised(run, function()
      local f = px.spawn(function() local m = px.mutex(); m:lock(); px.sleep(0.005) end)
      px.spawn(function() px.semaphore(0):acquire() end)
      for _ = 1, 3 do collectgarbage() px.yield() end
      f:join()
      error("stop", 0)                                -- cancels the parked acquire
    end))
  end)

  -- A busy object reached by the collector is kept and freed when the run
  -- ends (bindings/host/graves.c), as in Python: counted in the process's
  -- resident pages (/proc/self/statm), after a first run has grown the heap.
  -- Kept for good, the C half of a mutex and an rwlock is tens of bytes.
  it("objects_collected_while_held_are_freed_at_the_end_of_the_run", function()
    local N = 20000
    local function resident()
      collectgarbage(); collectgarbage()
      local f = assert(io.open("/proc/self/statm"))
      local _, pages = f:read("n", "n")
      f:close()
      return pages * 4096
    end
    local function once()
      assert.equal("stop", raised(run, function()
        local held = {}
        for i = 1, N do held[i] = px.mutex() end
        for i = N + 1, 2 * N do held[i] = px.rwlock() end
        local f = px.spawn(function()
          for i = 1, N do held[i]:lock() end
          for i = N + 1, 2 * N do held[i]:wrlock() end
          px.sleep(0.01)                              -- ends holding them: released as it ends
        end)
        px.yield()                                    -- it holds every one now
        held = nil
        collectgarbage(); collectgarbage()            -- collected while held
        f:join()
        error("stop", 0)
      end))
    end
    once()
    local before = resident()
    for _ = 1, 3 do once() end
    local per_object = (resident() - before) / (3 * 2 * N)
    assert.is_true(per_object < 8, per_object .. " bytes left per collected busy object")
  end)
end)

-- tests/c/sync/mutex_holds.c: a mutex beside its fiber's other holds.  (Lua
-- has no free: the collector frees an object nobody holds or waits on.)
describe("mutex_holds", function()
  local function none_owned(...)
    for _, m in ipairs({ ... }) do assert.equal(0, m:owner()) end
  end

  it("unlocks_in_any_order_release_each_mutex_and_keep_the_others", function()
    run(function()
      local a, b, c = px.mutex(), px.mutex(), px.mutex()
      a:lock(); b:lock(); c:lock()
      a:unlock()                                    -- the oldest first
      assert.equal(0, a:owner())
      assert.equal(px.self(), b:owner())
      assert.equal("EPERM", raised(a.unlock, a).code)
      a:lock()                                      -- now the newest
      b:unlock(); c:unlock()
      c:lock()
      assert.equal("EDEADLK", raised(c.lock, c).code)
      a:unlock(); c:unlock()
      none_owned(a, b, c)
      for _ = 1, 3 do                               -- each is free to take and let go again
        a:lock(); b:lock(); c:lock()
        c:unlock(); b:unlock(); a:unlock()
      end
      assert.is_true(b:trylock())
      b:unlock()
      none_owned(a, b, c)
    end)
  end)

  it("a_fiber_ending_with_several_mutexes_releases_each_with_eownerdead", function()
    run(function()
      local a, b, c = px.mutex(), px.mutex(), px.mutex()
      px.spawn(function() a:lock(); b:lock(); c:lock(); b:unlock() end):join()   -- ends holding a and c
      none_owned(a, b, c)
      local ok, dead = a:lock()
      assert.is_true(ok); assert.equal("EOWNERDEAD", dead.code)
      assert.same({ true }, { b:lock() })           -- let go before the end
      ok, dead = c:trylock()
      assert.is_true(ok); assert.equal("EOWNERDEAD", dead.code)
      a:unlock(); b:unlock(); c:unlock()
      assert.same({ true }, { a:lock() })           -- each death told once
      assert.same({ true }, { b:lock() })
      assert.same({ true }, { c:lock() })
      b:unlock(); a:unlock(); c:unlock()
      none_owned(a, b, c)
    end)
  end)

  it("a_mutex_left_free_by_a_death_has_no_owner_refuses_unlock_and_frees", function()
    run(function()
      local a, b = px.mutex(), px.mutex()
      px.spawn(function() a:lock() end):join()
      assert.equal(0, a:owner())
      assert.equal(0, a:waiters())
      assert.equal("EPERM", raised(a.unlock, a).code)   -- nothing changes ...
      px.spawn(function() assert.equal("EPERM", raised(a.unlock, a).code) end):join()
      local ok, dead = a:lock()                     -- ... the death is still told
      assert.is_true(ok); assert.equal("EOWNERDEAD", dead.code)
      a:unlock()
      assert.same({ true }, { a:trylock() })
      a:unlock()
      px.spawn(function() b:lock() end):join()      -- left free by a death: free
      assert.equal(0, b:owner())
      assert.equal(0, b:waiters())
    end)
    collectgarbage()                                -- and the collector frees both
  end)

  it("mutex_holds_mix_with_rwlock_holds_in_any_order_and_in_death", function()
    run(function()
      local a, b, r = px.mutex(), px.mutex(), px.rwlock()
      a:lock(); r:wrlock()                          -- the mutex under a write lock, let go first
      a:unlock(); r:wrunlock()
      a:lock(); r:rdlock(); b:lock()                -- a read hold between two mutexes,
      r:rdunlock()                                  -- let go in the middle
      a:unlock(); b:unlock()
      assert.equal("EPERM", raised(r.rdunlock, r).code)
      none_owned(a, b)
      unheld(r)
      px.spawn(function() r:wrlock(); a:lock(); r:rdlock() end):join()   -- a death with all three kinds
      none_owned(a)
      unheld(r)
      local ok, dead = a:lock()
      assert.is_true(ok); assert.equal("EOWNERDEAD", dead.code)
      ok, dead = r:wrlock()
      assert.is_true(ok); assert.equal("EOWNERDEAD", dead.code)
      a:unlock(); r:wrunlock()
    end)
  end)
end)

-- tests/c/sync/hostile.c: the interrupted-waiter policy where its pieces
-- meet, as far as one thread can go (the grants made off-fiber while the
-- scheduler is idle need a second thread).
describe("hostile", function()
  it("an_interrupted_then_stray_woken_waiter_is_passed_by_a_release", function()
    run(function()
      local s, tok = px.semaphore(0), px.token()
      local a = px.spawn(function() return px.with_cancel(tok, function() s:acquire() end) end)
      local b = px.spawn(function() s:acquire(); return "b" end)
      px.yield()
      assert.equal(2, s:waiters())
      assert.is_true(tok:cancel())                  -- a is interrupted, not run yet
      assert.is_false(px._wake(a:id()))             -- ready already: nothing
      assert.is_true(px._wake(b:id()))              -- b: stray, still waits
      s:release()                                   -- past a, to b
      assert.equal(0, s:value())
      local r, err = a:join()
      assert.is_nil(r)
      assert.equal("ECANCELED", err.code)
      assert.equal("b", b:join())
      assert.equal(0, s:value())
      assert.equal(0, s:waiters())
    end)
  end)

  -- A Lua fiber's join is hosted: joiner 3, interrupted as its target ends,
  -- gets ECANCELED from its re-call, as C's joiner does.
  it("joiners_stray_woken_interrupted_and_parked_each_return_once", function()
    run(function()
      local go, tok, joins, res, j = px.event(), px.token(), {}, {}, {}
      local target = px.spawn(function() go:wait(); return "target" end)
      for i = 1, 4 do
        j[i] = px.spawn(function()
          if i == 3 then
            local r, err = px.with_cancel(tok, function() return target:join() end)
            res[i] = r or err.code
          else
            res[i] = target:join()
          end
          joins[i] = (joins[i] or 0) + 1
        end)
      end
      px.yield()                                    -- all park
      assert.equal(1, go:set())                     -- the target is ready first
      assert.is_true(px._wake(j[2]:id()))           -- 2: stray, ready
      assert.is_true(tok:cancel())                  -- 3: interrupted, ready
      assert.is_true(px._wake(j[4]:id()))           -- 4: stray ...
      for i = 1, 4 do j[i]:join() end
      assert.equal("target", target:join())
      assert.same({ 1, 1, 1, 1 }, joins)
      assert.same({ "target", "target", "ECANCELED", "target" }, res)
    end)
  end)

  -- The ways a Lua scope closes: its function returns (with values, or with
  -- another scope inside), raises through it, or its fiber ends in it by an
  -- error.  None leaves a hold: a run whose last fiber then parks for good
  -- reports the deadlock instead of waiting for ever.
  it("scopes_closed_every_way_leave_no_hold_on_px_run", function()
    local tok = px.token()
    local err = raised(run, function()
      assert.same({ nil }, { px.with_cancel(tok, function() end) })
      assert.equal(7, px.with_cancel(tok, function()
        return px.timeout(100, function() return 7 end)
      end))
      assert.equal("inner", raised(px.with_cancel, tok, function() error("inner", 0) end))
      local f = px.spawn(function()
        px.with_cancel(tok, function() px.timeout(100, function() error("ends", 0) end) end)
      end)
      assert.equal("ends", raised(f.join, f))
      px.event():wait()                             -- parked for good
    end)
    assert.equal("EDEADLK", err.code)
  end)
end)

-- tests/c/sync/soak.c: many fibers doing random operations on mutexes, an
-- rwlock, a semaphore and a channel, each wait bounded by a random timeout or
-- interrupted by a random cancel; the invariants hold all along, and at the
-- end nothing is held or queued and every value sent was received once.
describe("soak", function()
  it("random_operations_keep_every_invariant", function()
    local FIBERS, OPS, SEM_UNITS = 64, 400, 2
    local rnd = xorshift(0x9E3779B97F4A7C15 | 1)
    local mtx, inside = { px.mutex(), px.mutex(), px.mutex() }, { 0, 0, 0 }
    local rw, readers_in, writers_in = px.rwlock(), 0, 0
    local sem, sem_in = px.semaphore(SEM_UNITS), 0
    local ch, sent, received, next_value = px.channel(4), {}, {}, 1
    local tokens, granted, interrupted = {}, 0, 0
    for i = 1, FIBERS do tokens[i] = px.token() end

    -- Holds for a random while: yields, or a short sleep, which the scope
    -- around the operation may interrupt (the hold goes on).
    local function dwell()
      local k = rnd() % 4
      if k == 3 then
        local ok, err = pcall(px.sleep, (rnd() % 200) * 1e-6)
        assert(ok or err.code == "ETIMEDOUT" or err.code == "ECANCELED", err)
      else
        for _ = 1, k do px.yield() end
      end
    end
    local ops = {
      function()
        local i = rnd() % 3 + 1
        mtx[i]:lock()
        assert.equal(px.self(), mtx[i]:owner())
        assert.equal(0, inside[i]); inside[i] = 1
        dwell()
        inside[i] = 0
        mtx[i]:unlock()
      end,
      function()
        rw:rdlock()
        assert.equal(0, writers_in)
        readers_in = readers_in + 1
        dwell()
        readers_in = readers_in - 1
        rw:rdunlock()
      end,
      function()
        rw:wrlock()
        assert.equal(0, readers_in)
        assert.equal(0, writers_in); writers_in = 1
        assert.equal(px.self(), rw:writer())
        dwell()
        writers_in = 0
        rw:wrunlock()
      end,
      function()
        sem:acquire()
        sem_in = sem_in + 1
        assert.is_true(sem_in <= SEM_UNITS)
        dwell()
        sem_in = sem_in - 1
        sem:release()
      end,
      function()                                    -- each value sent at most once
        local v = next_value
        next_value = next_value + 1
        if ch:send(v) then sent[v] = true end
      end,
      function()
        local v = ch:recv()
        assert.is_true(v > 0 and v < next_value)
        assert.is_nil(received[v])
        received[v] = true
      end,
    }
    -- One operation, bounded by a timeout or by this fiber's token (which
    -- other fibers cancel at random), or not bounded (a channel wait may have
    -- no partner left: always bounded).
    local function one_op(me)
      local k = rnd() % 6 + 1
      local how = k >= 5 and 0 or rnd() % 3
      local ok, err
      if how == 0 then
        ok, err = px.timeout((rnd() % 300) * 1e-6, function() ops[k](); return true end)
      elseif how == 1 then
        if tokens[me]:cancelled() then tokens[me] = px.token() end
        ok, err = px.with_cancel(tokens[me], function() ops[k](); return true end)
      else
        ops[k](); ok = true
      end
      if ok then
        granted = granted + 1
      else
        assert.is_true(err.code == "ETIMEDOUT" or err.code == "ECANCELED")
        interrupted = interrupted + 1
      end
      if rnd() % 8 == 0 then tokens[rnd() % FIBERS + 1]:cancel() end
    end

    run(function()
      local f = {}
      for me = 1, FIBERS do
        f[me] = px.spawn(function() for _ = 1, OPS do one_op(me) end end)
      end
      for me = 1, FIBERS do f[me]:join() end
    end)
    for i = 1, 3 do
      assert.equal(0, mtx[i]:owner())
      assert.equal(0, mtx[i]:waiters())
    end
    unheld(rw)
    assert.equal(SEM_UNITS, sem:value())
    assert.equal(0, sem:waiters())
    while true do
      local v = ch:tryrecv()
      if v == nil then break end
      assert.is_nil(received[v]); received[v] = true
    end
    for v = 1, next_value - 1 do
      assert.equal(sent[v] == true, received[v] == true)   -- nothing lost, nothing made up
    end
    assert.equal(FIBERS * OPS, granted + interrupted)
    assert.is_true(granted > 0 and interrupted > 0)     -- both paths were exercised
  end)
end)
