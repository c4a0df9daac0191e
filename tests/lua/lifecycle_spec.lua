-- The Lua binding's queue lifecycle: unbounded runs, close with failing
-- handlers, and a descriptor that is readable whenever calls are owed.
local px = require "parataxis"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")

-- Whether q:fileno() is readable, asked of the kernel itself: the descriptor
-- is an eventfd, readable exactly while its counter is not zero, and Linux
-- shows that counter (in hex) in /proc/self/fdinfo.  No poll module needed.
local function fd_readable(q)
  local f = assert(io.open("/proc/self/fdinfo/" .. q:fileno()))
  local info = f:read("a")
  f:close()
  local count = assert(info:match("eventfd%-count:%s*(%x+)"), "not an eventfd")
  return tonumber(count, 16) ~= 0
end

-- Calls fn() and returns how long it took and what it returned.
local function timed(fn)
  local t0 = px.now()
  local r = fn()
  return px.now() - t0, r
end

describe("timerq", function()
  local q
  before_each(function() q = px.TimerQueue() end)
  after_each(function() q:close() end)

  for _, case in ipairs({
    { "math_huge", function(queue) return queue:run(math.huge) end },
    { "1e300", function(queue) return queue:run(1e300) end },
    { "1e10_above_the_c_range", function(queue) return queue:run(1e10) end },
    { "no_timeout", function(queue) return queue:run() end },
  }) do
    it("run_without_a_bound_with_" .. case[1] .. "_waits_until_a_call_is_due", function()
      local calls = 0
      q:add(0.05, function() calls = calls + 1 end)
      local took, ran = timed(function() return case[2](q) end)
      assert.equal(1, ran)
      assert.equal(1, calls)
      assert.is_true(took >= 0.045, "returned after " .. took .. " s")
    end)
  end

  it("run_without_a_bound_returns_0_at_once_when_no_call_can_ever_come", function()
    local took, ran = timed(function() return q:run() end)
    assert.equal(0, ran)
    assert.is_true(took < 1)
    q:add(0, function() end)
    assert.equal(1, q:run(math.huge))        -- the one owed call, then none
    took, ran = timed(function() return q:run(math.huge) end)
    assert.equal(0, ran)
    assert.is_true(took < 1)
  end)

  it("run_without_a_bound_waits_for_a_periodic_timers_next_tick", function()
    local ticks = 0
    local id = q:add_periodic(0.03, 0.03, function(aborted)
      if not aborted then ticks = ticks + 1 end
    end)
    local took = timed(function() return q:run() end)
    assert.equal(1, ticks)
    assert.is_true(took >= 0.025, "returned after " .. took .. " s")
    assert.is_true(q:cancel(id))
    assert.equal(1, q:run())                 -- the final aborted call
  end)

  it("run_without_a_bound_refuses_a_nan_or_negative_timeout_and_changes_nothing", function()
    local calls = 0
    q:add(0, function() calls = calls + 1 end)
    assert.has_error(function() q:run(0 / 0) end)
    assert.has_error(function() q:run(-1) end)
    assert.has_error(function() q:run(-math.huge) end)
    assert.has_error(function() q:run("1") end)
    assert.equal(0, calls)
    assert.equal(1, q:run())
  end)
end)

describe("timerq", function()
  it("close_delivers_every_owed_call_then_re_raises_the_error_once", function()
    local q = px.TimerQueue()
    local ok_calls = 0
    q:add(60, function() ok_calls = ok_calls + 1 end)
    q:add(60, function() error("boom", 0) end)
    q:add(60, function() ok_calls = ok_calls + 1 end)
    q:add(60, function() ok_calls = ok_calls + 1 end)
    local ok, err = pcall(q.close, q)
    assert.is_false(ok)
    assert.equal("boom", err)
    assert.equal(3, ok_calls)
    assert.equal(0, q:pending())
    assert.is_true(pcall(q.close, q))        -- nothing owed: the second close is quiet
    assert.equal(3, ok_calls)
  end)

  it("close_with_several_failing_handlers_raises_the_first_and_warns_of_the_others", function()
    local q = px.TimerQueue()
    local ok_calls, raised = 0, 0
    for i = 1, 6 do
      if i % 2 == 0 then
        q:add(60, function() raised = raised + 1; error({ n = i }) end)
      else
        q:add(60, function() ok_calls = ok_calls + 1 end)
      end
    end
    local warnings = {}
    local real_warn = _G.warn
    _G.warn = function(...) warnings[#warnings + 1] = table.concat({ ... }) end
    local ok, err = pcall(q.close, q)
    _G.warn = real_warn
    assert.is_false(ok)
    assert.equal("table", type(err))         -- the error value itself, not a copy
    assert.equal(3, raised)
    assert.equal(3, ok_calls)
    assert.equal(2, #warnings)
  end)

  it("close_delivers_every_owed_call_from_a_close_scope_that_ends_in_an_error", function()
    local calls = 0
    local ok = pcall(function()
      local q <close> = px.TimerQueue()
      q:add(60, function() error("in handler") end)
      q:add(60, function() calls = calls + 1 end)
      error("in scope")
    end)
    assert.is_false(ok)
    assert.equal(1, calls)
  end)
end)

describe("timerq", function()
  it("free_from_its_own_handler_returns_and_delivers_the_rest_once", function()
    local q = px.TimerQueue()
    local aborted = 0
    for _ = 1, 3 do q:add(60, function(a) if a then aborted = aborted + 1 end end) end
    q:add(0, function() q:close() end)
    assert.equal(1, q:run())
    assert.equal(3, aborted)
    assert.has_error(function() q:add(1, function() end) end)
    assert.equal(0, q:run())
    q:close()
  end)
end)

describe("timerq", function()
  local q
  before_each(function() q = px.TimerQueue() end)
  after_each(function() q:close() end)

  it("fileno_is_readable_exactly_while_calls_are_owed", function()
    assert.is_true(q:fileno() >= 0)          -- a descriptor for event loops
    assert.is_false(fd_readable(q))
    q:add(0, function() end)
    assert.equal(1, q:run(5))
    assert.is_false(fd_readable(q))
    q:add(0, function() end)
    assert.is_true(q:run(5) == 1)
  end)

  it("fileno_stays_readable_after_a_handler_error_while_calls_are_owed", function()
    local calls, errors = 0, 0
    q:add(0.001, function() error("boom") end)
    for _ = 1, 4 do q:add(0.001, function() calls = calls + 1 end) end
    -- Until the worker has queued all five (in one batch or a few).
    local deadline = px.now() + 5
    while q.core:size() < 5 and px.now() < deadline do q.core:wait(0.01) end
    assert.equal(5, q.core:size())
    -- An fd-driven loop: poll the descriptor, drain only when it is readable.
    while calls < 4 and px.now() < deadline do
      if q.core:wait(0.5) == 1 then          -- poll(fileno, 0.5 s)
        if not pcall(q.drain, q) then
          errors = errors + 1
          if calls < 4 then assert.is_true(fd_readable(q), "calls owed, fd not readable") end
        end
      end
    end
    assert.equal(1, errors)
    assert.equal(4, calls)
    assert.is_false(fd_readable(q))
  end)
end)

describe("timerq", function()
  local q
  before_each(function() q = px.TimerQueue() end)
  after_each(function() q:close() end)

  -- As tests/c/timerq/abort_linger.c with the default linger: every cancel
  -- that won is followed by exactly one aborted call, also one made after the
  -- burst was delivered; nothing is called after close.
  it("a_burst_of_cancels_is_delivered_aborted_once_each", function()
    local n = 200
    local calls = {}
    local function rec(i) return function(aborted) calls[i] = (calls[i] or "") .. tostring(aborted) end end
    local ids = {}
    for i = 1, n do ids[i] = q:add(10, rec(i)) end
    for i = 1, n do assert.is_true(q:cancel(ids[i])) end
    h.run_until(q, function() local k = 0; for _ in pairs(calls) do k = k + 1 end; return k == n end)
    assert.is_true(q:cancel(q:add(10, rec(n + 1))))   -- one more, after the burst
    h.run_until(q, function() return calls[n + 1] ~= nil end)
    q:close()
    assert.equal(0, q:run(0.01))
    for i = 1, n + 1 do assert.equal("true", calls[i]) end
  end)

  -- As periodic_ticks.c: a fast periodic timer under close gets one final
  -- call and no tick after it.
  it("free_ends_periodic", function()
    local ticks, finals, after_final = 0, 0, 0
    q:add_periodic(0, 0.0002, function(aborted)
      if finals > 0 then after_final = after_final + 1 end
      if aborted then finals = finals + 1 else ticks = ticks + 1 end
    end)
    h.run_until(q, function() return ticks >= 5 end)
    q:close()
    assert.equal(1, finals)
    assert.equal(0, after_final)
    assert.equal(0, q:run(0.01))
    assert.equal(1, finals)
  end)
end)

describe("timerq", function()
  -- Ctrl-C (SIGINT) ends an unbounded run in the standalone interpreter as it
  -- ends any Lua code: with "interrupted!".  A child lua5.4 waits on a timer
  -- 10 s away; it is signalled once it reports that it is about to wait.
  it("run_without_a_bound_ends_on_sigint_with_the_interpreters_error_not_at_the_timer", function()
    local ready = os.tmpname()
    os.remove(ready)
    local script = table.concat({
      'local q = require("parataxis").TimerQueue()',
      'q:add(10, function() end)',
      string.format('local f = io.open(%q, "w"); f:write("ready"); f:close()', ready),
      'q:run(math.huge)',
      'print("returned")',
    }, " ")
    local sh = string.format(
      "lua5.4 -e %q 2>&1 & pid=$!; " ..
      "n=0; until [ -s %q ] || [ $n -ge 1000 ]; do sleep 0.01; n=$((n+1)); done; " ..
      "kill -INT $pid; wait $pid; echo \"rc=$?\"",
      script, ready)
    local t0 = px.now()
    local p = assert(io.popen(sh))
    local out = p:read("a")
    p:close()
    os.remove(ready)
    assert.is_nil(out:find("returned"), out)
    assert.truthy(out:find("interrupted!"), out)
    assert.truthy(out:find("rc=1"), out)
    assert.is_true(px.now() - t0 < 9)
  end)
end)
