-- px.timer(q): luv-style timer objects (uv_timer_* semantics, in seconds) whose
-- handlers run on the Lua thread, from q:run / q:drain, each call at most once.
local px = require "parataxis"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local run_until = h.run_until

-- Waits, without running anything, until n calls are due in q.
local function wait_due(q, n)
  local deadline = px.now() + 20
  while q.core:size() < n and px.now() < deadline do q.core:wait(0.01) end
  assert.equal(n, q.core:size())
end

describe("timer", function()
  local q
  before_each(function() q = px.TimerQueue() end)
  after_each(function() q:close() end)

  it("fires_a_one_shot_handler_once_with_the_timer_then_is_inactive", function()
    local t = px.timer(q)
    local calls, active_inside = {}, nil
    assert.equal(0, t:start(0.005, 0, function(tt)
      calls[#calls + 1] = tt
      active_inside = tt:is_active()
    end))
    assert.is_true(t:is_active())
    run_until(q, function() return #calls == 1 end)
    q:run(0.02)
    assert.equal(1, #calls)
    assert.equal(t, calls[1])
    assert.is_false(active_inside)
    assert.is_false(t:is_active())
    assert.equal(0, t:get_due_in())
  end)

  it("runs_handlers_only_from_run_or_drain_never_from_the_worker", function()
    local t, ran = px.timer(q), 0
    t:start(0, 0, function() ran = ran + 1 end)
    wait_due(q, 1)                           -- due, but nobody ran the queue
    assert.equal(0, ran)
    assert.equal(1, q:drain())
    assert.equal(1, ran)
  end)

  it("repeats_until_stopped_from_its_handler", function()
    local t, n, active_inside = px.timer(q), 0, nil
    t:start(0.001, 0.001, function(tt)
      n = n + 1
      active_inside = tt:is_active()          -- rearmed before the call, as libuv
      if n == 3 then tt:stop() end
    end)
    run_until(q, function() return n == 3 end)
    q:run(0.05)
    assert.equal(3, n)
    assert.is_true(active_inside)
    assert.is_false(t:is_active())
    assert.equal(0, q:pending())
  end)

  it("stop_before_the_deadline_the_handler_is_never_called", function()
    local t, ran = px.timer(q), 0
    t:start(60, 0, function() ran = ran + 1 end)
    assert.equal(0, t:stop())
    assert.is_false(t:is_active())
    assert.equal(0, q:pending())
    q:run(0.02)
    assert.equal(0, ran)
    assert.equal(0, t:stop())                -- stopping a stopped timer does nothing
  end)

  it("stop_wins_over_a_call_already_due_that_has_not_started", function()
    local t, ran = px.timer(q), 0
    t:start(0, 0.001, function() ran = ran + 1 end)
    wait_due(q, 1)
    t:stop()
    q:drain()
    q:run(0.02)
    assert.equal(0, ran)
    assert.is_false(t:is_active())
  end)

  it("start_on_an_active_timer_restarts_it_with_the_new_handler", function()
    local t, seen = px.timer(q), {}
    t:start(0, 0, function() seen[#seen + 1] = "old" end)
    wait_due(q, 1)                           -- the old call is already due
    t:start(0.001, 0, function() seen[#seen + 1] = "new" end)
    run_until(q, function() return #seen >= 1 end)
    q:run(0.02)
    assert.same({ "new" }, seen)
  end)

  it("again_restarts_with_the_repeat_value_stops_a_one_shot_refuses_a_fresh_timer", function()
    local t, n = px.timer(q), 0
    local ok, err = pcall(t.again, t)
    assert.is_false(ok)
    assert.matches("timer:again: the timer was never started", err)

    t:start(60, 0, function() n = n + 1 end)
    assert.equal(0, t:again())               -- repeat 0: stops
    assert.is_false(t:is_active())

    t:set_repeat(30)
    assert.equal(0, t:again())               -- repeat 30: due in 30 s, not 60
    assert.is_true(t:is_active())
    local due = t:get_due_in()
    assert.is_true(due > 25 and due <= 30, "due in " .. due)
    t:stop()
    assert.equal(0, n)
  end)

  it("set_repeat_takes_effect_at_the_next_arming_not_the_one_due", function()
    local t, n, dues = px.timer(q), 0, {}
    t:start(0.001, 0.001, function(tt)
      n = n + 1
      if n == 1 then tt:set_repeat(60) end   -- the next call is armed already
      dues[n] = tt:get_due_in()
    end)
    run_until(q, function() return n == 2 end)
    assert.equal(60, t:get_repeat())
    assert.is_true(dues[1] <= 0.001)
    assert.is_true(dues[2] > 50, "due in " .. dues[2])
    t:stop()
  end)

  it("get_repeat_and_get_due_in_report_the_timers_values", function()
    local t = px.timer(q)
    assert.equal(0, t:get_repeat())
    assert.equal(0, t:get_due_in())
    t:start(10, 2.5, function() end)
    assert.equal(2.5, t:get_repeat())
    local due = t:get_due_in()
    assert.is_true(due > 5 and due <= 10, "due in " .. due)
    t:stop()
    assert.equal(0, t:get_due_in())
    assert.equal(2.5, t:get_repeat())
  end)

  it("close_stops_the_timer_for_good_and_twice_is_harmless", function()
    local t, ran = px.timer(q), 0
    t:start(0, 0, function() ran = ran + 1 end)
    wait_due(q, 1)
    t:close()
    t:close()
    assert.equal(0, t:stop())
    assert.is_false(t:is_active())
    for _, call in ipairs({ function() t:start(1, 0, print) end,
                            function() t:again() end,
                            function() t:set_repeat(1) end }) do
      local ok, err = pcall(call)
      assert.is_false(ok)
      assert.matches("the timer is closed", err)
    end
    q:run(0.02)
    assert.equal(0, ran)
    do local u <close> = px.timer(q); u:start(60, 0, print) end   -- <close> closes it
    assert.equal(0, q:pending())
  end)

  it("a_closed_queue_aborts_its_active_timers_without_calling_them", function()
    local t, ran = px.timer(q), 0
    t:start(60, 1, function() ran = ran + 1 end)
    q:close()
    assert.equal(0, ran)
    assert.is_false(t:is_active())
    local ok, err = pcall(t.start, t, 1, 0, print)
    assert.is_false(ok)
    assert.matches("timer:start: the timer queue is closed", err)
  end)

  it("a_handler_error_propagates_out_of_run_and_the_timer_keeps_repeating", function()
    local t, n = px.timer(q), 0
    t:start(0.001, 0.001, function() n = n + 1; if n == 1 then error("boom") end end)
    local ok, err
    for _ = 1, 400 do
      ok, err = pcall(q.run, q, 0.05)
      if not ok then break end
    end
    assert.is_false(ok)
    assert.matches("boom", err)
    assert.is_true(t:is_active())
    run_until(q, function() return n >= 3 end)
    t:stop()
  end)

  it("refuses_bad_arguments_with_a_message_naming_the_function", function()
    local t = px.timer(q)
    local cases = {
      { function() t:start(-1, 0, print) end, "timer:start: timeout must be a number >= 0" },
      { function() t:start(0 / 0, 0, print) end, "timer:start: timeout must be a number >= 0" },
      { function() t:start(1, nil, print) end, "timer:start: repeat must be a number >= 0" },
      { function() t:start(1, 0, "x") end, "timer:start: the handler must be callable" },
      { function() t:set_repeat(-2) end, "timer:set_repeat: repeat must be a number >= 0" },
      { function() t.start({}, 1, 0, print) end, "timer:start: called without a timer" },
      { function() px.timer({}) end, "timer: argument #1 must be a TimerQueue" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok)
      assert.matches(c[2], tostring(err), 1, true)
    end
    assert.is_false(t:is_active())
    assert.equal(0, t:get_repeat())
    assert.equal(0, q:pending())
  end)

  it("takes_a_timeout_or_repeat_of_2_63_ns_or_more_as_never", function()
    -- C's rule (durations_spec.lua, timerq_delays_saturate and timerq_periods_saturate).
    local calls = 0
    local t, u = px.timer(q), px.timer(q)
    assert.equal(0, t:start(1e10, 0, function() calls = calls + 1 end))
    assert.equal(0, u:start(math.huge, math.huge, function() calls = calls + 1 end))
    assert.is_true(t:is_active() and u:is_active())
    assert.is_true(t:get_due_in() > 9e9)
    assert.equal(math.huge, u:get_due_in())
    assert.equal(math.huge, u:get_repeat())
    assert.equal(0, q:run(0.05))
    assert.equal(0, calls)
    t:stop()
    u:stop()
    assert.is_false(t:is_active() or u:is_active())
    q:run(0.05)                              -- the aborted queue calls call nothing
    assert.equal(0, calls)
  end)

  it("runs_the_example_of_docs_lua_md", function()
    local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
    local doc = assert(io.open(here .. "/../../docs/lua.md")):read("a")
    local section = doc:match("\n## Timer objects.-\n```lua\n(.-)```")
    assert.is_truthy(section)
    -- Its printed lines are docs_spec.lua's to check; here they go nowhere.
    local env = setmetatable({ print = function() end }, { __index = _G })
    local example = assert(load(section .. "\nreturn n", "=docs/lua.md", "t", env))
    assert.equal(3, example())
  end)
end)
