-- Lua fibers on coroutines: px.run, spawn, join, sleep, yield, self, scopes,
-- tokens, and the defined outcomes of the things a coroutine user may try.
-- Names mirror the C suite (tests/c/fiber) where the behaviour is the same.
local px = require "parataxis"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local raised, lua_child = h.raised, h.lua_child

describe("fiber", function()
  it("run_passes_arguments_and_returns_mains_result", function()
    local a, b = px.run(function(x, y) return x + y, "two" end, 1, 2)
    assert.equal(3, a)
    assert.equal("two", b)
  end)

  it("join_results", function()
    px.run(function()
      local f = px.spawn(function(a, b) return a * a, b end, 7, "x")
      local r, s = f:join()
      assert.equal(49, r); assert.equal("x", s)
      assert.same({ 49, "x" }, { f:join() })      -- any number of joins
      assert.is_true(f:done())
    end)
  end)

  it("join_results_survive_the_reuse_of_the_fibers_coroutine", function()
    px.run(function()
      local none = px.spawn(function() end)
      local one = px.spawn(function() return "one" end)
      local a_nil = px.spawn(function() return nil end)
      local many = px.spawn(function() return 1, nil, 3 end)
      local failed = px.spawn(function() error("boom", 0) end)
      px.yield()                                  -- all five ended
      local later = {}
      for i = 1, 200 do later[i] = px.spawn(function(x) return x, coroutine.running() end, i) end
      for i = 1, 200 do assert.equal(i, (later[i]:join())) end
      assert.equal(0, select("#", none:join()))
      assert.same({ n = 1, "one" }, table.pack(one:join()))
      assert.same({ n = 1 }, table.pack(a_nil:join()))
      assert.same({ n = 3, 1, nil, 3 }, table.pack(many:join()))
      assert.equal("boom", raised(failed.join, failed))
      assert.equal("one", one:join())             -- again
    end)
  end)

  it("join_reraises_the_fibers_error_unchanged", function()
    px.run(function()
      local e = {}
      local f = px.spawn(function() error(e) end)
      assert.equal(e, raised(f.join, f))
      assert.equal(e, raised(f.join, f))
    end)
  end)

  it("yield_order", function()
    local order = {}
    px.run(function()
      for _, c in ipairs({ "a", "b" }) do
        px.spawn(function()
          for _ = 1, 3 do order[#order + 1] = c; px.yield() end
        end)
      end
    end)
    assert.equal("ababab", table.concat(order))
  end)

  it("a_join_of_a_ready_fiber_runs_it_next", function()
    -- as C's: joining c, spawned last, runs it before a and b, queued first;
    -- its end hands main the turn back; then a and b in the queue's order
    local trail = {}
    px.run(function()
      local function mark(x) trail[#trail + 1] = x end
      local a, b, c = px.spawn(mark, "a"), px.spawn(mark, "b"), px.spawn(mark, "c")
      c:join()
      mark("M")
      a:join()
      b:join()
    end)
    assert.equal("cMab", table.concat(trail))
  end)

  it("an_ended_fiber_hands_off_to_its_first_joiner", function()
    -- as C's: T's end runs its first joiner (1) before main, queued first,
    -- and its second joiner (2) in the queue's order, after main
    local trail = {}
    px.run(function()
      local function mark(x) trail[#trail + 1] = x end
      local go, fin = px.event(), px.event()
      local t = px.spawn(function() go:wait(); mark("T") end)
      local function joiner(name) t:join(); mark(name) end
      local fs = { px.spawn(joiner, "1"), px.spawn(joiner, "2"),
                   px.spawn(function() go:set(); mark("s") end), px.spawn(mark, "x"),
                   px.spawn(function() mark("y"); fin:set() end), t }
      fin:wait()
      mark("M")
      for _, f in ipairs(fs) do f:join() end
    end)
    assert.equal("sxyT1M2", table.concat(trail))
  end)

  it("hand_offs_give_way_to_the_queue_after_a_bounded_chain", function()
    -- as C's: a loop of spawn + join (every join and every end a hand-off)
    -- lets a fiber waiting in the queue run within a bounded number of rounds
    local ran, rounds = false, 0
    px.run(function()
      local other = px.spawn(function() ran = true end)
      while not ran and rounds < 100000 do
        px.spawn(function() end):join()
        rounds = rounds + 1
      end
      other:join()
    end)
    assert.is_true(ran)
    -- a round is two hand-offs: the queue goes on after 256 of them, not before
    assert.is_true(rounds >= 256 / 2, tostring(rounds))
    assert.is_true(rounds <= 2 * 256 + 2, tostring(rounds))
  end)

  it("a_fiber_that_hands_off_twice_in_a_turn_still_gives_way_after_a_bounded_chain", function()
    -- as C's: joins in a fired scope hand the child the turn without a
    -- switch, so one turn hands off several times; the chain still gives way
    local ran, rounds = false, 0
    px.run(function()
      local other = px.spawn(function() ran = true end)
      local tok = px.token()
      tok:cancel()
      while not ran and rounds < 100000 do
        local f = px.spawn(function() end)
        for _ = 0, rounds % 4 do
          local r, err = px.with_cancel(tok, function() return f:join() end)
          assert.equal("ECANCELED", err and err.code)
        end
        f:join()
        rounds = rounds + 1
      end
      other:join()
    end)
    assert.is_true(ran)
    assert.is_true(rounds <= 2 * 256 + 2, tostring(rounds))
  end)

  it("sleep_order", function()
    local order = {}
    px.run(function()
      for _, d in ipairs({ 0.03, 0.01, 0.02 }) do
        px.spawn(function() px.sleep(d); order[#order + 1] = d end)
      end
    end)
    assert.same({ 0.01, 0.02, 0.03 }, order)
  end)

  it("sleep_never_returns_early", function()
    px.run(function()
      local t0 = px.now()
      px.sleep(0.02)
      assert.is_true(px.now() - t0 >= 0.02)
    end)
  end)

  it("self_is_0_off_fiber_and_the_fibers_id_on_one", function()
    assert.equal(0, px.self())
    px.run(function()
      local me = px.self()
      assert.is_true(me ~= 0)
      local f = px.spawn(function() return px.self() end)
      assert.equal(f:id(), f:join())
      assert.is_true(f:id() ~= me)
    end)
  end)

  it("self_join", function()
    px.run(function()
      local f
      f = px.spawn(function() return raised(f.join, f).code end)
      assert.equal("EDEADLK", f:join())
    end)
  end)

  it("errors_are_values_with_code_message_and_tostring", function()
    px.run(function()
      local r, err = px.timeout(0, function() px.sleep(1) end)
      assert.is_nil(r)
      assert.equal("ETIMEDOUT", err.code)
      assert.is_string(err.message)
      assert.truthy(tostring(err):find("ETIMEDOUT", 1, true))
      assert.is_true(px.is_error(err, "ETIMEDOUT"))
    end)
  end)

  it("timeout_returns_fns_results_when_it_did_not_fire", function()
    px.run(function()
      assert.same({ 1, 2 }, { px.timeout(1, function(a) px.sleep(0.001); return a, 2 end, 1) })
    end)
  end)

  -- wait() interrupted by a timeout, by a token another fiber cancels, and by
  -- one cancelled already (at once); after each, left_queued() is 0
  -- (tests/c/fiber/fib_scopes.c; Python's also cancels from another thread).
  local function interrupt_both(wait, left_queued)
    local t0 = px.now()
    local r, err = px.timeout(0.02, wait)
    assert.is_nil(r)
    assert.equal("ETIMEDOUT", err.code)
    assert.is_true(px.now() - t0 >= 0.02)
    assert.equal(0, left_queued())

    local tok = px.token()
    local c = px.spawn(function()
      px.sleep(0.005)
      assert.is_true(tok:cancel())
      assert.is_false(tok:cancel())                -- cancelled already
    end)
    r, err = px.with_cancel(tok, wait)
    assert.is_nil(r)
    assert.equal("ECANCELED", err.code)
    assert.is_true(tok:cancelled())
    c:join()
    assert.equal(0, left_queued())

    r, err = px.with_cancel(tok, wait)             -- a cancelled token: at once
    assert.is_nil(r)
    assert.equal("ECANCELED", err.code)
    assert.equal(0, left_queued())
  end
  local function none() return 0 end

  it("interrupt_both_sleep", function()
    px.run(interrupt_both, function() px.sleep(60) end, none)
  end)

  it("interrupt_both_join", function()
    px.run(function()
      local ev = px.event()
      local stuck = px.spawn(function() ev:wait() end)
      interrupt_both(function() stuck:join() end, none)
      assert.is_false(stuck:done())
      ev:set()
      stuck:join()
    end)
  end)

  it("interrupt_both_mutex_lock", function()
    px.run(function()
      local m, release = px.mutex(), px.event()
      local h = px.spawn(function() m:lock(); release:wait(); m:unlock() end)
      px.yield()
      assert.equal(h:id(), m:owner())
      interrupt_both(function() m:lock() end, function() return m:waiters() end)
      release:set(); h:join()
      assert.equal(0, m:owner())
      m:lock()                                       -- nothing stranded
      assert.equal(px.self(), m:owner())
      m:unlock()
    end)
  end)

  it("interrupt_both_channel_recv", function()
    local got = px.run(function()
      local ch = px.channel(0)
      interrupt_both(function() ch:recv() end, none)
      local got = {}
      px.spawn(function() got[#got + 1] = ch:recv() end)
      ch:send("after")                               -- the next receiver gets it
      px.yield()
      return got
    end)
    assert.same({ "after" }, got)
  end)

  it("nested_scopes_the_inner_deadline_fires_and_the_outer_goes_on", function()
    px.run(function()
      local r = px.timeout(5, function()
        local _, err = px.timeout(0.01, function() px.sleep(60) end)
        assert.equal("ETIMEDOUT", err.code)
        px.sleep(0.001)                              -- the outer scope did not fire
        return "outer ok"
      end)
      assert.equal("outer ok", r)
    end)
  end)

  it("an_outer_scopes_interrupt_passes_through_the_inner_one", function()
    px.run(function()
      local tok = px.token()
      local inner_saw
      px.spawn(function() tok:cancel() end)
      local _, err = px.with_cancel(tok, function()
        local ok, e = pcall(px.timeout, 60, function() px.sleep(60) end)
        inner_saw = ok and "returned" or e.code
        error(e, 0)
      end)
      assert.equal("ECANCELED", inner_saw)
      assert.equal("ECANCELED", err.code)
    end)
  end)

  it("fired_then_park", function()
    -- a scope that fired interrupts the next wait in it at once
    px.run(function()
      local ev = px.event()
      local _, err = px.timeout(0.03, function()
        local ok, e = pcall(px.sleep, 30)            -- the scope fires here
        assert.is_false(ok)
        assert.equal("ETIMEDOUT", e.code)
        local t0 = px.now()
        ok, e = pcall(ev.wait, ev)                   -- ... and again at once
        assert.is_false(ok)
        assert.equal("ETIMEDOUT", e.code)
        assert.is_true(px.now() - t0 < 5)
        error(e, 0)
      end)
      assert.equal("ETIMEDOUT", err.code)
    end)
  end)

  it("timeout_raises_at_the_interrupted_wait", function()
    local where = px.run(function()
      local where = {}
      local _, err = px.timeout(0.02, function()
        where[#where + 1] = "before"
        local ok, e = pcall(px.sleep, 30)
        if not ok then
          where[#where + 1] = "at the sleep"
          error(e, 0)
        end
        where[#where + 1] = "after"
      end)
      assert.equal("ETIMEDOUT", err.code)
      return where
    end)
    assert.same({ "before", "at the sleep" }, where)
  end)

  it("sleep_rejects_bad_durations", function()
    px.run(function()
      for _, bad in ipairs({ -1, 0 / 0, -math.huge, "x", {} }) do
        assert.equal("EINVAL", raised(px.sleep, bad).code)
      end
      px.sleep(0)
    end)
  end)

  it("cancellation_token_off_fiber", function()
    assert.equal(0, px.self())
    local tok = px.token()
    assert.is_false(tok:cancelled())
    assert.is_true(tok:cancel())
    assert.is_false(tok:cancel())
    assert.is_true(tok:cancelled())
  end)

  it("interrupted_joins_leave_and_the_rest_keep_their_order", function()
    -- 301 joiners of one fiber, every third under a timeout that fires first
    -- (the front, the middle, the back): each interrupted join leaves, the
    -- others are woken in the order they joined
    local n = 301
    local timed = (n + 2) // 3
    local order, timed_out = {}, 0
    px.run(function()
      local t = px.spawn(function()
        while timed_out < timed do px.sleep(0.001) end   -- until every timed join left
        return "target"
      end)
      local fs = {}
      for i = 0, n - 1 do
        fs[#fs + 1] = px.spawn(function()
          if i % 3 == 0 then
            local r, err = px.timeout(0.001, t.join, t)
            assert.is_nil(r)
            assert.equal("ETIMEDOUT", err.code)
            timed_out = timed_out + 1
            return
          end
          assert.equal("target", t:join())
          order[#order + 1] = i
        end)
      end
      for _, f in ipairs(fs) do f:join() end
      assert.equal("target", t:join())                -- a late join returns at once
    end)
    assert.equal(timed, timed_out)
    assert.equal(n - timed, #order)
    for k = 2, #order do assert.is_true(order[k - 1] < order[k]) end
  end)

  it("joins_interrupted_newest_first_leave_in_constant_time", function()
    -- 100,000 joiners of one fiber whose timeouts come due newest first: each
    -- interrupted join leaves the joiners at once (a walk of the list each
    -- would be quadratic), and the joined fiber is still joined after
    local n = 100000
    local t0 = os.clock()                            -- CPU time: a noisy machine's load is not ours
    local left = px.run(function()
      local go = px.event()
      local t = px.spawn(function() go:wait(); return "target" end)
      local base = px.now() + 2                      -- after every join was recorded
      local left, fs = 0, {}
      for i = 1, n do
        fs[i] = px.spawn(function()
          local r, err = px.timeout(math.max(0, base - px.now()) + (n - i) * 1e-6, t.join, t)
          assert.is_nil(r)
          assert.equal("ETIMEDOUT", err.code)
          left = left + 1
        end)
      end
      for i = 1, n do fs[i]:join() end
      assert.equal(1, go:set())                      -- the target was the one waiter
      assert.equal("target", t:join())
      return left
    end)
    assert.equal(n, left)
    assert.is_true(os.clock() - t0 < 60)             -- quadratic: minutes
  end)

  it("durations_of_2_63_ns_or_more_mean_never", function()
    -- C's rule: a sleep or a scope of 2^63 ns or more (math.huge too) is
    -- "never", not an error; such a sleep ends only by a scope.
    px.run(function()
      for _, s in ipairs({ 9223372037.0, 1e300, math.huge }) do
        local r, err = px.timeout(0.01, px.sleep, s)
        assert.is_nil(r)
        assert.equal("ETIMEDOUT", err.code)
        local tok = px.token()
        px.spawn(function() tok:cancel() end)
        r, err = px.with_cancel(tok, px.sleep, s)
        assert.is_nil(r)
        assert.equal("ECANCELED", err.code)
        assert.same({ "done" }, { px.timeout(s, function() px.sleep(0.001); return "done" end) })
      end
    end)
  end)

  it("exception_in_main_propagates_after_the_others_unwound", function()
    local cleaned, seen = false, nil
    local err = raised(px.run, function()
      px.spawn(function()
        local ok, e = pcall(px.sleep, 60)
        seen = not ok and e.code
        cleaned = true
      end)
      px.yield()
      error("main failed", 0)
    end)
    assert.equal("main failed", err)
    assert.is_true(cleaned)
    assert.equal("ECANCELED", seen)
  end)

  -- A to-be-closed variable's __close may wait when an error ends its fiber,
  -- as it may on a normal exit and under a pcall (Lua 5.4 yields there).
  it("close_handlers_of_a_failed_fiber_can_wait", function()
    local log = {}
    local function closer(name)
      return setmetatable({}, { __close = function(_, e)
        px.sleep(0.001)                                  -- a wait, then a hand-over
        local m = px.mutex()
        local g <close> = m:guard()
        log[#log + 1] = name .. " closed after its error: " .. tostring(e)
      end })
    end
    local err = raised(px.run, function()
      local f = px.spawn(function()
        local c <close> = closer("fiber")
        error("fiber failed", 0)
      end)
      local ok, e = pcall(f.join, f)
      log[#log + 1] = "joined: " .. tostring(ok) .. " " .. tostring(e)
      local c <close> = closer("main")
      error("main failed", 0)
    end)
    assert.equal("main failed", err)
    assert.same({ "fiber closed after its error: fiber failed", "joined: false fiber failed",
                  "main closed after its error: main failed" }, log)
  end)

  it("a_close_handlers_wait_in_a_failed_fiber_is_bounded_by_the_runs_cancel", function()
    local seen
    local err = raised(px.run, function()
      px.spawn(function()
        local c <close> = setmetatable({}, { __close = function()
          local ok, e = pcall(px.sleep, 60)
          seen = not ok and e.code
        end })
        px.sleep(60)
      end)
      px.yield()
      error("main failed", 0)
    end)
    assert.equal("main failed", err)
    assert.equal("ECANCELED", seen)
  end)

  it("an_error_in_another_fiber_after_main_ended_cancels_nothing", function()
    local finished = false
    px.run(function()
      px.spawn(function() px.sleep(0.001); error("dropped", 0) end)
      px.spawn(function() px.sleep(0.05); finished = true end)
    end)
    assert.is_true(finished)
  end)

  it("px_run_reports_a_deadlock_and_says_edeadlk", function()
    local err = raised(px.run, function()
      local e = px.event()
      px.spawn(function() e:wait() end)
      e:wait()
    end)
    assert.equal("EDEADLK", err.code)
    assert.truthy(err.message:find("deadlock", 1, true))
    assert.truthy(err.message:find("Event wait", 1, true))
  end)

  it("a_deadlocked_run_unwinds_its_fibers_before_it_raises", function()
    local closed = 0
    local err = raised(px.run, function()
      local m = px.mutex()
      px.spawn(function()
        local g <close> = setmetatable({}, { __close = function() closed = closed + 1 end })
        px.event():wait()
      end)
      local g <close> = setmetatable({}, { __close = function() closed = closed + 1 end })
      m:lock(); px.event():wait()
    end)
    assert.equal("EDEADLK", err.code)
    assert.equal(2, closed)
  end)

  it("a_plain_coroutine_yield_inside_a_fiber_is_a_px_yield", function()
    local order = {}
    px.run(function()
      px.spawn(function() order[#order + 1] = "b" end)
      order[#order + 1] = "a"
      assert.equal(0, select("#", coroutine.yield("dropped")))   -- returns nothing
      order[#order + 1] = "c"
    end)
    assert.equal("abc", table.concat(order))
  end)

  it("a_coroutine_inside_a_fiber_works_and_cannot_wait", function()
    px.run(function()
      local gen = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i) end end)
      assert.same({ 1, 2, 3 }, { gen(), gen(), gen() })
      local co = coroutine.create(function() px.sleep(0.001) end)
      local ok, err = coroutine.resume(co)
      assert.is_false(ok)
      assert.equal("ENOFIBER", err.code)
    end)
  end)

  it("a_wait_where_lua_cannot_yield_raises_instead_of_parking", function()
    px.run(function()
      local m = px.mutex()
      local ok, err = pcall(table.sort, { 2, 1 }, function(a, b) px.sleep(0.001); return a < b end)
      assert.is_false(ok)
      assert.equal("ENOFIBER", err.code)
      m:lock(); m:unlock()                                -- the fiber goes on
    end)
  end)

  it("a_fiber_nobody_references_still_runs_to_its_end", function()
    local ended = false
    px.run(function()
      px.spawn(function() px.sleep(0.02); ended = true end)
      collectgarbage(); collectgarbage()
    end)
    assert.is_true(ended)
  end)

  it("a_nested_run_is_ebusy", function()
    px.run(function()
      assert.equal("EBUSY", raised(px.run, function() end).code)
    end)
  end)

  it("off_fiber_calls", function()
    assert.equal("ENOFIBER", raised(px.sleep, 0).code)
    assert.equal("ENOFIBER", raised(px.yield).code)
    assert.equal("ENOFIBER", raised(px.spawn, function() end).code)
    assert.equal("ENOFIBER", raised(px.timeout, 1, function() end).code)
    assert.equal("ENOFIBER", raised(px.mutex().lock, px.mutex()).code)
  end)

  it("bad_arguments_raise_einval_naming_the_function_and_the_argument", function()
    local err = raised(px.run, 42)
    assert.equal("EINVAL", err.code)
    assert.truthy(err.message:find("px.run", 1, true))
    px.run(function()
      local e = raised(px.sleep, -1)
      assert.equal("EINVAL", e.code)
      assert.truthy(e.message:find("px.sleep: bad argument #1 (seconds)", 1, true))
      assert.truthy(raised(px.timeout, 0 / 0, function() end).message:find("px.timeout", 1, true))
      assert.truthy(raised(px.timeout, 1, "x").message:find("#2 (fn)", 1, true))
      assert.truthy(raised(px.with_cancel, {}, function() end).message:find("px.with_cancel", 1, true))
      assert.truthy(raised(px.mutex().lock, {}).message:find("mutex:lock: bad argument #1 (self)", 1, true))
    end)
  end)

  it("a_finished_fiber_is_joined_after_its_run", function()
    local f = px.run(function() local f = px.spawn(function() return "late" end); return f end)
    assert.equal("late", f:join())
  end)

  it("os_exit_while_fibers_are_parked_ends_the_process_cleanly", function()
    local base = 'package.cpath = ' .. string.format("%q", package.cpath) ..
      ' package.path = ' .. string.format("%q", package.path) ..
      ' local px = require "parataxis" px.run(function() ' ..
      ' for i = 1, 10 do px.spawn(function() px.event():wait() end) end ' ..
      ' local m = px.mutex() m:lock() px.spawn(function() m:lock() end) px.yield() '
    assert.truthy(lua_child(base .. 'os.exit(3) end)'):find("status=3", 1, true))
    assert.truthy(lua_child(base .. 'os.exit(4, true) end)'):find("status=4", 1, true))
  end)

  it("hundred_thousand_fibers_park_once_and_are_all_joined", function()
    -- 100,000 fibers, each parked once, then all joined.
    local n = tonumber(os.getenv("PXLUA_FIBERS")) or 100000
    px.run(function()
      local go, fibers, sum = px.event(), {}, 0
      for i = 1, n do fibers[i] = px.spawn(function() go:wait(); return i end) end
      px.yield()
      go:set()
      for i = 1, n do sum = sum + fibers[i]:join() end
      assert.equal(n * (n + 1) // 2, sum)
    end)
  end)
  it("spawn_order", function()
    -- a spawned fiber runs when its spawner next parks, yields or ends
    local trail = {}
    px.run(function()
      local function child(name) trail[#trail + 1] = name end
      px.spawn(child, "a")
      px.spawn(child, "b")
      trail[#trail + 1] = "spawned"
      px.yield()
      trail[#trail + 1] = "yielded"
      local c = px.spawn(child, "c")
      trail[#trail + 1] = "spawned c"
      c:join()
      px.spawn(child, "d")
      trail[#trail + 1] = "end"
    end)
    assert.same({ "spawned", "a", "b", "yielded", "spawned c", "c", "end", "d" }, trail)
  end)

  it("yield_lets_the_others_run", function()
    local seen = px.run(function()
      local seen = {}
      px.spawn(function() seen[#seen + 1] = 1 end)
      px.spawn(function() seen[#seen + 1] = 2 end)
      assert.same({}, seen)
      px.yield()
      return seen
    end)
    assert.same({ 1, 2 }, seen)
  end)

  it("stale_ids", function()
    -- ids are never 0, never reused, and px.self() is 0 off-fiber
    local ids = {}
    px.run(function()
      local me = px.self()
      assert.is_true(me ~= 0)
      local f = px.spawn(px.self)
      assert.is_true(f:id() ~= 0 and f:id() ~= me)
      assert.equal(f:id(), f:join())
      local g = px.spawn(function() end)
      assert.is_true(g:id() > f:id())                -- a new fiber never gets an old id
      g:join()
      ids = { me, f:id(), g:id() }
    end)
    local later = px.run(px.self)
    assert.is_true(later > math.max(table.unpack(ids)))   -- nor does a later run's
    assert.equal(0, px.self())
  end)

  it("many", function()
    -- 100,000 fibers spawned and joined, in waves of 10,000
    local n = 100000
    local done = px.run(function()
      local done = 0
      local function tiny(i) done = done + 1; return i end
      for base = 0, n - 1, 10000 do
        local fs = {}
        for i = 1, 10000 do fs[i] = px.spawn(tiny, base + i) end
        for i = 1, 10000 do assert.equal(base + i, fs[i]:join()) end
      end
      return done
    end)
    assert.equal(n, done)
  end)

  it("cycle", function()
    -- two fibers each holding the mutex the other waits for: EDEADLK whose
    -- message names the waits, the fibers and the cycle; every fiber was
    -- unwound (its to-be-closed variables closed)
    local unwound, ids = {}, {}
    local function closer(name)
      return setmetatable({}, { __close = function() unwound[#unwound + 1] = name end })
    end
    local function side(mine, other, name)
      local c <close> = closer(name)
      ids[name] = px.number()
      local g <close> = mine:guard()
      px.yield()
      other:lock()
    end
    local err = raised(px.run, function()
      local c <close> = closer("main")
      local a, b = px.mutex(), px.mutex()
      local fa = px.spawn(side, a, b, "a")
      local fb = px.spawn(side, b, a, "b")
      fa:join()
      fb:join()
    end)
    assert.equal("EDEADLK", err.code)
    local msg = err.message
    assert.truthy(msg:find("deadlock", 1, true))
    assert.truthy(msg:find("Mutex lock", 1, true) and msg:find("fiber join", 1, true))
    assert.truthy(msg:find("wait-for cycle", 1, true))
    for _, name in ipairs({ "a", "b" }) do
      assert.truthy(msg:find("fiber " .. ids[name] .. " ", 1, true), msg)
    end
    table.sort(unwound)
    assert.same({ "a", "b", "main" }, unwound)
  end)

  it("join_cycle", function()
    local unwound = {}
    local function closer(name)
      return setmetatable({}, { __close = function() unwound[#unwound + 1] = name end })
    end
    local err = raised(px.run, function()
      local box = {}
      local function join_b()
        local c <close> = closer("b")
        box.a:join()
      end
      local function join_a()
        local c <close> = closer("a")
        box.b = px.spawn(join_b)
        box.b:join()
      end
      box.a = px.spawn(join_a)
      box.a:join()
    end)
    assert.equal("EDEADLK", err.code)
    assert.truthy(err.message:find("fiber join", 1, true))
    assert.truthy(err.message:find("wait-for cycle", 1, true))
    table.sort(unwound)
    assert.same({ "a", "b" }, unwound)
  end)

  it("not_deadlocks", function()
    -- a pending timeout or sleep is not a deadlock
    local r = px.run(function()
      local ev = px.event()
      local _, err = px.timeout(0.02, function() return ev:wait() end)
      assert.equal("ETIMEDOUT", err.code)
      px.spawn(function() px.sleep(0.02); ev:set() end):join()
      ev:wait()
      return "ok"
    end)
    assert.equal("ok", r)
  end)

  it("real_deadlocks", function()
    -- with no cancel scope open, or once it closed, a stuck run is a deadlock
    local err = raised(px.run, function()
      local tok = px.token()
      px.with_cancel(tok, function() end)
      px.event():wait()
    end)
    assert.equal("EDEADLK", err.code)
    assert.truthy(err.message:find("parked", 1, true))
    assert.is_nil(px.run(function() end))          -- the thread runs again afterwards
  end)
end)

-- TimerQueue{ executor = px.scheduler() }: each handler call a new fiber of the
-- run (the Python suite's test_timerq_executor & co.).
describe("timerq", function()
  local LONG = 30      -- a bound no passing run comes near (noisy machine)

  -- A hook on the thread that called px.run, raising at the calls made on that
  -- thread itself (a coroutine made there takes its hook: not those), at most
  -- `times` times; returns the count of raises so far.
  local function raise_on(runner, times)
    local raised = 0
    debug.sethook(runner, function()
      if coroutine.running() == runner and raised < times then
        raised = raised + 1
        error("hook raised " .. raised)
      end
    end, "c")
    return function() return raised end
  end

  it("a_handler_call_whose_fiber_fails_to_start_starts_on_a_later_turn_once", function()
    -- the call is out of its queue once made: an error starting its fiber
    -- (here from a hook) must not lose it
    local runner = coroutine.running()
    local calls, as_fiber, raised = 0, nil, nil
    px.run(function()
      local q <close> = px.TimerQueue{ executor = px.scheduler() }
      local done = px.event()
      q:add(0, function(aborted)
        calls = calls + 1
        as_fiber = pcall(px.sleep, 0.001) and not aborted
        done:set()
      end)
      raised = raise_on(runner, 1)
      assert.is_true(px.timeout(LONG, function() return done:wait() end))
      debug.sethook(runner)
    end)
    debug.sethook(runner)
    assert.equal(1, raised())
    assert.equal(1, calls)
    assert.is_true(as_fiber)
  end)

  it("a_handler_call_whose_fiber_never_starts_runs_in_place_once", function()
    -- a hook that always raises: the handler still runs, once, in place
    -- (not as a fiber: a wait there raises, and nothing breaks)
    local runner = coroutine.running()
    local calls, waited, aborted_seen = 0, nil, nil
    px.run(function()
      local q <close> = px.TimerQueue{ executor = px.scheduler() }
      q:add(0, function(aborted)
        calls = calls + 1
        aborted_seen = aborted
        waited = pcall(px.sleep, 0.001)
      end)
      raise_on(runner, math.huge)
      local deadline = os.time() + LONG
      while calls == 0 and os.time() < deadline do px.sleep(0.001) end
      debug.sethook(runner)
      assert.equal(1, calls)      -- an error: a lost call's hold ends with the run
    end)
    debug.sethook(runner)
    assert.equal(1, calls)
    assert.is_false(aborted_seen)
    assert.is_false(waited)
  end)

  it("a_timer_of_2_63_ns_or_more_never_fires_and_is_cancellable", function()
    -- On the scheduler as on a plain queue (durations_spec.lua): the timer holds
    -- the run until its cancel's aborted call, a fiber, has started.
    local seen = {}
    px.run(function()
      local q = px.TimerQueue{ executor = px.scheduler() }
      local ids = {}
      for _, s in ipairs({ 9223372037.0, 1e300, math.huge }) do
        ids[#ids + 1] = q:add(s, function(aborted) seen[#seen + 1] = aborted end)
      end
      px.sleep(0.05)
      assert.same({}, seen)
      assert.equal(3, q:pending())
      for _, id in ipairs(ids) do assert.is_true(q:cancel(id)) end
    end)
    assert.same({ true, true, true }, seen)
  end)

  it("a_deadlocked_run_waits_for_no_timer_once_it_unwinds", function()
    -- a held timer keeps a deadlock from being declared until its call came;
    -- the unwinding of the deadlock then waits for no timer added during it
    local calls, q = {}, nil
    local t0 = px.now()
    local ok, err = pcall(px.run, function()
      q = px.TimerQueue{ executor = px.scheduler() }
      q:add(0.02, function() calls[#calls + 1] = "early" end)
      local ev = px.event()
      local ok2, e2 = pcall(ev.wait, ev)          -- nobody sets it
      assert.is_false(ok2)
      assert.equal("ECANCELED", e2.code)          -- the deadlock's unwinding
      q:add(60, function(a) calls[#calls + 1] = a end)   -- no hold any more
    end)
    assert.is_false(ok)
    assert.equal("EDEADLK", err.code)
    assert.is_true(px.now() - t0 < LONG)
    assert.same({ "early" }, calls)
    q:close()
    assert.same({ "early", true }, calls)
  end)

  it("periodic_ticks_and_the_final_aborted_call_are_fibers", function()
    local ticks, final = 0, nil
    px.run(function()
      local q = px.TimerQueue{ executor = px.scheduler() }
      local three = px.event()
      local id
      id = q:add_periodic(0.005, 0.005, function(aborted)
        assert.is_true(px.self() ~= 0)
        if aborted then final = px.self(); return end
        ticks = ticks + 1
        px.yield()                              -- a handler may wait
        if ticks == 3 then three:set() end
      end)
      three:wait()
      assert.is_true(q:cancel(id))
      -- main ends here: the run is held until the final call ran
    end)
    assert.is_true(ticks >= 3)
    assert.is_true(final ~= nil and final ~= 0)
  end)

  it("a_luv_timer_on_the_scheduler_runs_its_handler_as_a_fiber", function()
    local got = px.run(function()
      local q = px.TimerQueue{ executor = px.scheduler() }
      local ch = px.channel(0)
      local t = px.timer(q)
      t:start(0.01, 0, function() ch:send(px.self()) end)   -- send waits for main
      local id = ch:recv()
      q:close()
      return id
    end)
    assert.is_true(got ~= 0)
  end)

  it("after_the_run_its_calls_come_aborted_to_the_queue", function()
    local calls = {}
    local q = px.run(function()
      local q = px.TimerQueue{ executor = px.scheduler() }
      px.token()                                -- (nothing holds the run but the timer)
      return q
    end)
    -- a timer added after the run: its call comes to q, aborted, on this thread
    q:add(0.01, function(aborted) calls[#calls + 1] = aborted end)
    assert.equal(1, q:run(LONG))
    assert.same({ true }, calls)
    q:close()
  end)

  it("scheduler_is_enofiber_outside_a_run_and_a_bad_executor_is_refused", function()
    local err = raised(px.scheduler)
    assert.equal("ENOFIBER", err.code)
    assert.truthy(tostring(err):find("px.scheduler", 1, true))
    assert.truthy(tostring(raised(px.TimerQueue, { executor = {} })):find("px.scheduler()", 1, true))
    assert.truthy(tostring(raised(px.TimerQueue, 5)):find("table", 1, true))
    local q <close> = px.TimerQueue({})                      -- no executor: a plain queue
    px.run(function()
      local s = px.scheduler()
      assert.equal(s, px.scheduler())
      assert.is_true(px.is_scheduler(s))
      local sq <close> = px.TimerQueue{ executor = s }
      assert.truthy(tostring(raised(sq.run, sq, 0)):find("fibers of the running px.run", 1, true))
      assert.equal(0, sq:drain())
    end)
  end)
end)

-- The scheduler as a timer queue's executor, seen from the run (the C suite's
-- fiber.timerq_executor & co.).
describe("fiber", function()
  local LONG = 30      -- a bound no passing run comes near (noisy machine)

  it("timerq_executor", function()
    -- each handler runs as a new fiber: it may lock a px.mutex and px.sleep
    local order = px.run(function()
      local m, done, order = px.mutex(), px.event(), {}
      local main_id = px.self()
      local function handler(n)
        return function(aborted)
          assert.is_false(aborted)
          assert.is_true(px.self() ~= 0 and px.self() ~= main_id)
          local g <close> = m:guard()
          px.sleep(0.001)
          order[#order + 1] = n
          if #order == 3 then done:set() end
        end
      end
      local q <close> = px.TimerQueue{ executor = px.scheduler() }
      m:lock()                                  -- the handlers queue on it
      q:add(0.03, handler(3))
      q:add(0.01, handler(1))
      q:add(0.02, handler(2))
      px.sleep(0.1)
      m:unlock()
      assert.is_true(px.timeout(LONG, function() return done:wait() end))
      return order
    end)
    assert.same({ 1, 2, 3 }, order)
  end)

  it("timerq_executor_holds_the_run", function()
    -- a timer whose handler will start a fiber keeps the run alive: main may
    -- wait for what only that handler does, and a run whose main returned
    -- still runs the handler before it ends
    local seen = {}
    local q = px.run(function()
      local ev = px.event()
      local q = px.TimerQueue{ executor = px.scheduler() }
      q:add(0.05, function(aborted) seen[#seen + 1] = { "first", aborted }; ev:set() end)
      ev:wait()                                 -- only the handler sets it
      q:add(0.05, function(aborted) seen[#seen + 1] = { "second", aborted } end)
      return q
    end)
    q:close()
    assert.same({ { "first", false }, { "second", false } }, seen)
  end)

  it("a_failed_run_waits_for_no_timer", function()
    -- the hold of a pending timer ends when the run is cancelled: main's error
    -- comes out at once, and the handler is called aborted later, off-run
    local calls, q = {}, nil
    local t0 = px.now()
    local ok, err = pcall(px.run, function()
      q = px.TimerQueue{ executor = px.scheduler() }
      q:add(60, function(aborted) calls[#calls + 1] = aborted end)
      error("main", 0)
    end)
    assert.is_false(ok)
    assert.equal("main", err)
    assert.is_true(px.now() - t0 < LONG)
    assert.same({}, calls)
    q:close()                                   -- aborts it: its call comes here
    assert.same({ true }, calls)
  end)

  it("periodic_handler_that_waits_past_its_period_neither_overlaps_nor_loses_its_final_call", function()
    -- a periodic handler on the scheduler is a fiber, which may wait longer
    -- than the period: its ticks still never overlap (one due meanwhile is
    -- coalesced), and the final aborted call -- a cancel while a tick waits --
    -- comes once, after that tick returned
    local seen = px.run(function()
      local seen = { inside = 0, most = 0, ticks = 0, final = {} }
      local done = px.event()
      local q <close> = px.TimerQueue{ executor = px.scheduler() }
      local id = q:add_periodic(0.01, 0.01, function(aborted)
        if aborted then
          seen.final[#seen.final + 1] = seen.inside
          done:set()
          return
        end
        seen.inside = seen.inside + 1
        seen.most = math.max(seen.most, seen.inside)
        seen.ticks = seen.ticks + 1
        px.sleep(0.05)                          -- five periods
        seen.inside = seen.inside - 1
      end)
      while seen.ticks < 2 do px.sleep(0.01) end
      while seen.inside == 0 do px.sleep(0.001) end   -- cancel while a tick waits
      assert.is_true(q:cancel(id))
      assert.is_true(px.timeout(LONG, function() return done:wait() end))
      return seen
    end)
    assert.equal(1, seen.most)
    assert.same({ 0 }, seen.final)
  end)
end)
