-- The Lua binding's timers: every handler runs exactly once, on the Lua thread.
local px = require "parataxis"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local run_until = h.run_until

describe("timerq", function()
  local q
  before_each(function() q = px.TimerQueue() end)
  after_each(function() q:close() end)

  it("one_shot_fires_once_not_early", function()
    local calls, at = {}, nil
    local t0 = px.now()
    q:add(0.005, function(aborted) calls[#calls + 1] = aborted; at = px.now() end)
    run_until(q, function() return #calls == 1 end)
    assert.is_true(at - t0 >= 0.005, "early by " .. (0.005 - (at - t0)) .. " s")
    q:run(0.02)
    assert.same({ false }, calls)
    assert.equal(0, q:pending())
  end)

  it("cancel_before_expiry", function()
    local calls = {}
    local id = q:add(60, function(aborted) calls[#calls + 1] = aborted end)
    assert.is_true(math.type(id) == "integer")
    assert.is_true(q:cancel(id))
    assert.is_false(q:cancel(id))            -- the second cancel finds nothing
    run_until(q, function() return #calls == 1 end)
    assert.same({ true }, calls)
  end)

  it("fires_in_deadline_order", function()
    local order = {}
    for _, d in ipairs({ 0.03, 0.01, 0.02 }) do
      q:add(d, function() order[#order + 1] = d end)
    end
    run_until(q, function() return #order == 3 end)
    assert.same({ 0.01, 0.02, 0.03 }, order)
  end)

  it("periodic_ticks_then_one_final_call", function()
    local ticks, finals = 0, 0
    local id
    id = q:add_periodic(0.001, 0.002, function(aborted)
      if aborted then finals = finals + 1 else ticks = ticks + 1 end
    end)
    run_until(q, function() return ticks >= 3 end)
    assert.is_true(q:cancel(id))
    run_until(q, function() return finals == 1 end)
    q:run(0.02)
    assert.equal(1, finals)
  end)

  it("a_handler_cancels_another_timer", function()
    local seen, rcs = {}, {}
    local victim = q:add(60, function(aborted) seen[#seen + 1] = "victim " .. tostring(aborted) end)
    q:add(0.001, function()
      seen[#seen + 1] = "first"
      rcs[#rcs + 1] = q:cancel(victim)
      q:add(0.001, function() seen[#seen + 1] = "second" end)
      local fresh = q:add(60, function(aborted) seen[#seen + 1] = "fresh " .. tostring(aborted) end)
      rcs[#rcs + 1] = q:cancel(fresh)        -- one it just added, too
    end)
    run_until(q, function() return #seen == 4 end)
    table.sort(seen)
    assert.same({ "first", "fresh true", "second", "victim true" }, seen)
    assert.same({ true, true }, rcs)
    assert.is_false(q:cancel(victim))        -- already cancelled
  end)

  it("cancel_all_aborts_every_pending_timer", function()
    local aborted = 0
    for _ = 1, 100 do q:add(60, function(a) if a then aborted = aborted + 1 end end) end
    assert.equal(100, q:pending())
    assert.equal(100, q:cancel_all())
    run_until(q, function() return aborted == 100 end)
  end)

  it("free_aborts_every_pending_timer_before_it_returns", function()
    local calls = {}
    q:add(60, function(a) calls[#calls + 1] = a end)
    q:close()
    assert.same({ true }, calls)
    assert.has_error(function() q:add(1, function() end) end, nil)
    q:close()                                -- twice is harmless
  end)

  it("an_error_in_a_handler_propagates_and_loses_no_other_call", function()
    local ok_calls = 0
    q:add(0.001, function() error("boom") end)
    q:add(0.001, function() ok_calls = ok_calls + 1 end)
    q:add(0.001, function() ok_calls = ok_calls + 1 end)
    -- Every run under pcall: run_until's own unprotected run would meet the
    -- error whenever the timers came due after the condition's run (a loaded
    -- machine: seen once in 50 runs).
    local raised = false
    for _ = 1, 400 do
      if ok_calls == 2 and raised then break end
      if not pcall(q.run, q, 0.05) then raised = true end
    end
    assert.equal(2, ok_calls)
    assert.is_true(raised)
  end)
end)

-- Mirrors of the C suite (tests/c/timerq/): one it() per C spec.  What needs a
-- second OS thread acting during the run (a Lua state has one thread) is n/a
-- in tests/behaviours.txt.
describe("timerq", function()
  local q
  before_each(function() q = px.TimerQueue() end)
  after_each(function() q:close() end)

  it("sub_tick_delays_never_fire_early", function()
    local n, seen = 300, {}
    for i = 0, n - 1 do
      local delay = (i * 7919 % 200) * 1e-6  -- under 200 us
      local deadline = px.now() + delay
      q:add(delay, function(aborted) seen[#seen + 1] = { px.now(), deadline, aborted } end)
    end
    run_until(q, function() return #seen == n end)
    for _, s in ipairs(seen) do
      assert.is_true(s[1] >= s[2] - 1e-9)
      assert.is_false(s[3])
    end
  end)

  it("a_handler_adds_a_chain_of_timers", function()
    local depth = 0
    local function link(aborted)
      assert.is_false(aborted)
      depth = depth + 1
      if depth < 50 then q:add(depth % 3 * 0.0001, link) end
    end
    q:add(0, link)
    run_until(q, function() return depth == 50 end)
    assert.equal(0, q:pending())
  end)

  it("a_handler_cancels_itself", function()
    local calls, rcs, id = {}, {}, nil
    id = q:add(0, function(aborted)
      rcs[#rcs + 1] = q:cancel(id)
      calls[#calls + 1] = aborted
    end)
    run_until(q, function() return #calls == 1 end)
    local marker = false
    q:add(0, function() marker = true end)   -- a second call would come before it
    run_until(q, function() return marker end)
    assert.same({ false }, calls)
    assert.same({ false }, rcs)
  end)

  it("cancel_all_inside_a_handler_counts_the_others", function()
    local calls, seen = {}, nil
    assert.equal(0, q:pending())
    for i = 1, 3 do q:add(10 + i, function(a) calls[#calls + 1] = a end) end
    assert.equal(3, q:pending())
    q:add(0, function(aborted) seen = { q:pending(), q:cancel_all(), aborted } end)
    run_until(q, function() return seen ~= nil and #calls == 3 end)
    assert.same({ 3, 3, false }, seen)         -- the running sweeper is neither
    assert.same({ true, true, true }, calls)
    assert.equal(0, q:pending())
  end)

  it("a_tick_may_cancel_its_timer", function()
    -- The cancel comes from the tick itself (the Lua thread runs it): it wins
    -- (true) and the one final call comes after the tick, never inside it.
    local ticks, finals, overlapped, in_tick, rcs = 0, 0, 0, false, {}
    local id
    id = q:add_periodic(0, 0.005, function(aborted)
      if aborted then
        if in_tick then overlapped = overlapped + 1 end
        finals = finals + 1
        return
      end
      in_tick = true
      ticks = ticks + 1
      if ticks == 3 then
        rcs[#rcs + 1] = q:cancel(id)
        rcs[#rcs + 1] = q:cancel(id)
      end
      in_tick = false
    end)
    run_until(q, function() return finals == 1 end)
    q:run(0.05)                                -- negative check: nothing follows
    assert.same({ true, false }, rcs)
    assert.equal(1, finals)
    assert.equal(0, overlapped)
    assert.equal(3, ticks)
  end)

  it("bad_adds_are_refused", function()
    local calls = 0
    local function rec() calls = calls + 1 end
    for _, bad in ipairs({ -1, -0.001, 0 / 0, -math.huge, -1e300 }) do
      assert.has_error(function() q:add(bad, rec) end)
      assert.has_error(function() q:add_periodic(bad, 1, rec) end)
    end
    assert.has_error(function() q:add(1, nil) end)
    assert.has_error(function() q:add("1", rec) end)
    assert.has_error(function() q:add_periodic(0, 0, rec) end)
    assert.has_error(function() q:add_periodic(0, -1, rec) end)
    assert.has_error(function() q:add_periodic(0, 1, 42) end)
    assert.has_error(function() q.add({}, 0, rec) end)
    assert.has_error(function() px.TimerQueue{ executor = 42 } end)
    assert.equal(0, q:pending())
    q:add(60, rec)
    q:close()
    assert.equal(1, calls)                     -- aborted by close; no refused one ran
    assert.has_error(function() q:add(0, rec) end)
    assert.has_error(function() q:add_periodic(0, 1, rec) end)
    assert.equal(1, calls)
  end)

  it("bad_ids_are_refused", function()
    local calls = {}
    local function rec(aborted) calls[#calls + 1] = aborted end
    assert.has_error(function() q:cancel("7") end)
    assert.has_error(function() q:cancel(1.5) end)
    assert.has_error(function() q:cancel(nil) end)
    for _, id in ipairs({ 0, 12345, math.maxinteger, math.mininteger, -1, 7 << 32 | 3 }) do
      assert.is_false(q:cancel(id))
    end
    local fired = q:add(0, rec)                -- stale after firing
    run_until(q, function() return #calls == 1 end)
    assert.is_false(q:cancel(fired))
    local cancelled = q:add(10, rec)
    assert.is_true(cancelled ~= fired)
    assert.is_true(q:cancel(cancelled))
    run_until(q, function() return #calls == 2 end)
    assert.is_false(q:cancel(cancelled))       -- stale after cancel
    assert.is_false(q:cancel(fired))
    assert.same({ false, true }, calls)
    assert.equal(0, q:pending())
  end)

  it("drainable_queue", function()
    local calls = {}
    for i = 1, 5 do q:add(0.0001 * i, function(a) calls[#calls + 1] = { i, a } end) end
    h.wait_due(q, 5)
    assert.same({}, calls)                     -- nothing runs outside a run or drain
    assert.equal(5, q:drain())
    assert.equal(0, q:drain())
    table.sort(calls, function(x, y) return x[1] < y[1] end)
    assert.same({ { 1, false }, { 2, false }, { 3, false }, { 4, false }, { 5, false } }, calls)
    -- Cancel wins while the expired handler waits in the queue.
    local late = {}
    local id = q:add(0, function(a) late[#late + 1] = a end)
    h.wait_due(q, 1)
    assert.is_true(q:cancel(id))
    assert.is_false(q:cancel(id))
    assert.same({}, late)
    assert.equal(1, q:drain())
    assert.same({ true }, late)
  end)

  it("ids_never_reused", function()
    -- Rounds that fire or cancel, recycling the records: no id repeats, and a
    -- stale id never cancels the timer that now holds its record.
    local seen, all, calls = {}, {}, 0
    local function rec() calls = calls + 1 end
    for r = 0, 19 do
      local fire = r % 2 == 0
      local cur = {}
      for i = 1, 200 do
        local id = q:add(fire and 0 or 30, rec)
        assert.is_true(id ~= 0)
        assert.is_nil(seen[id])
        seen[id] = true
        cur[i] = id
      end
      if not fire then
        for _, old in ipairs(all) do assert.is_false(q:cancel(old)) end
        assert.equal(200, q:pending())
        assert.equal(200, q:cancel_all())
      end
      run_until(q, function() return calls == (r + 1) * 200 end)
      for _, id in ipairs(cur) do all[#all + 1] = id end
    end
    assert.equal(20 * 200, calls)
  end)

  it("periodic_cancel_while_it_ticks", function()
    for _ = 1, 100 do
      local ticks, finals, after = 0, 0, 0
      local id = q:add_periodic(0, 1e-6, function(aborted)
        if aborted then finals = finals + 1; return end
        if finals > 0 then after = after + 1 end
        ticks = ticks + 1
      end)
      run_until(q, function() return ticks > 0 end)
      assert.is_true(q:cancel(id))
      run_until(q, function() return finals == 1 end)
      assert.is_false(q:cancel(id))
      q:drain()
      assert.equal(1, finals)
      assert.equal(0, after)
    end
  end)

  it("single_cancels_around_the_sleep", function()
    local rounds, aborted = 300, {}
    q:add(3600, function() end)                -- the worker has a far deadline
    local rng = 42
    for i = 1, rounds do
      local id = q:add(3600, function(a) aborted[#aborted + 1] = a end)
      rng = (rng * 6364136223846793005 + 1442695040888963407)
      local r = (rng >> 33) % 4
      if r > 0 then h.spin(((rng >> 40) % 1000) / 1000 * 40e-6 * r) end   -- jitter, not synchronization
      assert.is_true(q:cancel(id))
      assert.equal(1, q:pending())
      run_until(q, function() return #aborted == i end)
    end
    for i = 1, rounds do assert.is_true(aborted[i]) end
  end)

  it("ticks_keep_their_phase", function()
    -- A 250 ms period; the third tick outlasts 1.6 periods: the tick it
    -- missed is skipped, the others start on their phase (within 100 ms: a
    -- loaded machine starts a thread that late).
    local p, late_max, long_tick = 0.25, 0.1, 3
    local at, finals = {}, 0
    local base = px.now() + p                  -- <= the true first deadline
    local id = q:add_periodic(p, p, function(aborted)
      if aborted then finals = finals + 1; return end
      at[#at + 1] = px.now()
      if #at == long_tick then h.spin(p * 1.6) end
    end)
    run_until(q, function() return #at >= 7 end)
    assert.is_true(q:cancel(id))
    run_until(q, function() return finals == 1 end)
    local n = #at
    q:run(3 * p)                               -- negative check: no tick after the final call
    assert.equal(n, #at)
    assert.equal(1, finals)
    local prev = -1
    for i, t in ipairs(at) do
      local k, off = (t - base) // p, (t - base) % p
      assert.is_true(t - base >= 0)            -- never early
      assert.is_true(k > prev)
      assert.is_true(off < late_max, string.format("tick %d starts %.3f s after its phase", i, off))
      prev = k
    end
  end)

  it("exactly_once_storm", function()
    -- The Lua thread adds, cancels and cancels all while the worker fires:
    -- every handler is called exactly once, aborted exactly when a cancel or
    -- cancel_all won.
    local slots, all_wins, rng = {}, 0, 7
    local function rnd(n)
      rng = (rng * 6364136223846793005 + 1442695040888963407)
      return (rng >> 33) % n
    end
    for i = 1, 20000 do
      local r = rnd(10000)
      if i % 100 == 0 then q:run(0.0005) end   -- pace the storm so that timers also run
      if r < 5500 then
        local s = { calls = 0, wins = 0 }
        s.id = q:add((rnd(5000) + 1) * 1e-6, function(a) s.calls = s.calls + 1; s.aborted = a end)
        slots[#slots + 1] = s
      elseif r < 9998 then
        if #slots > 0 then
          local s = slots[#slots - rnd(math.min(#slots, 256))]
          if q:cancel(s.id) then s.wins = s.wins + 1 end
        end
      else
        all_wins = all_wins + q:cancel_all()
      end
    end
    all_wins = all_wins + q:cancel_all()
    local function all_called()
      for _, s in ipairs(slots) do if s.calls == 0 then return false end end
      return true
    end
    run_until(q, all_called)
    q:run(0.02)                                -- a negative check: a second call would show
    local aborted, single = 0, 0
    for _, s in ipairs(slots) do
      assert.equal(1, s.calls)
      assert.is_true(s.wins <= 1)
      if s.wins == 1 then assert.is_true(s.aborted) end
      if s.aborted then aborted = aborted + 1 end
      single = single + s.wins
    end
    assert.equal(single + all_wins, aborted)
    assert.equal(0, q:pending())
  end)
end)
