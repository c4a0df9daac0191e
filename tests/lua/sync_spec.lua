-- The synchronization family from Lua fibers: the C conformance contracts
-- (tests/c/sync/*.c), under the SPEC names of the C suite.
local px = require "parataxis"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local raised = h.raised

-- Runs body as a fiber program (px.run), for a spec's body.
local function run(body) return px.run(body) end

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

  it("sending_nil_is_einval", function()
    run(function()
      local ch = px.channel(1)
      assert.equal("EINVAL", raised(ch.send, ch, nil).code)
      assert.equal(0, ch:len())
    end)
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
end)
