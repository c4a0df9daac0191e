-- C's duration rule through the Lua binding (tests/c/api/durations.c): a
-- duration of 0 or the least one works, a negative or NaN one is refused, and
-- one whose nanoseconds do not fit the C API's int64_t (2^63 ns or more, about
-- 9223372036.85 s, 292 years; 1e300 and math.huge too) saturates to "never":
-- accepted, never fires, and ends like any other (a cancel, a scope).
local px = require "parataxis"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local run_until = h.run_until

local LONGEST, TOO_LONG = 9223372036.0, 9223372037.0

describe("durations", function()
  local q
  before_each(function() q = px.TimerQueue() end)
  after_each(function() q:close() end)

  it("timerq_delays_saturate", function()
    local calls = {}
    local function rec(aborted) calls[#calls + 1] = aborted end
    q:add(0, rec)
    q:add(1e-9, rec)
    run_until(q, function() return #calls == 2 end)
    assert.same({ false, false }, calls)
    for _, bad in ipairs({ -1, -1e-9, 0 / 0, -math.huge }) do
      assert.has_error(function() q:add(bad, rec) end)
    end
    calls = {}
    local ids = { q:add(LONGEST, rec), q:add(TOO_LONG, rec), q:add(1e300, rec), q:add(math.huge, rec) }
    assert.equal(0, q:run(0.05))             -- nothing comes
    assert.same({}, calls)
    assert.equal(#ids, q:pending())
    for _, id in ipairs(ids) do assert.is_true(q:cancel(id)) end
    run_until(q, function() return #calls == #ids end)
    assert.same({ true, true, true, true }, calls)
  end)

  it("timerq_periods_saturate", function()
    -- A periodic timer whose first tick is "never" never ticks; one whose
    -- period is "never" ticks once.
    local calls, ticks = {}, {}
    local function rec(aborted) calls[#calls + 1] = aborted end
    for _, bad in ipairs({ -1, 0 / 0 }) do
      assert.has_error(function() q:add_periodic(bad, 1, rec) end)
      assert.has_error(function() q:add_periodic(0, bad, rec) end)
    end
    assert.has_error(function() q:add_periodic(0, 0, rec) end)
    local ids = { q:add_periodic(LONGEST, LONGEST, rec), q:add_periodic(TOO_LONG, 1, rec),
                  q:add_periodic(math.huge, math.huge, rec), q:add_periodic(60, 1e300, rec) }
    local once = q:add_periodic(0, math.huge, function(aborted) ticks[#ticks + 1] = aborted end)
    run_until(q, function() return #ticks == 1 end)
    assert.equal(0, q:run(0.05))             -- nothing else comes
    assert.same({}, calls)
    assert.same({ false }, ticks)
    assert.equal(#ids + 1, q:pending())
    for _, id in ipairs(ids) do assert.is_true(q:cancel(id)) end
    assert.is_true(q:cancel(once))
    run_until(q, function() return #calls == #ids and #ticks == 2 end)
    assert.same({ true, true, true, true }, calls)
    assert.same({ false, true }, ticks)
  end)

  it("queue_wait_timeouts_saturate", function()
    -- q:run(timeout) waits on the queue: 0 and 1 ns do not wait for a call;
    -- "never" (and no timeout) waits until one is due.
    local calls = {}
    local function rec(aborted) calls[#calls + 1] = aborted end
    q:add(60, rec)
    assert.equal(0, q:run(0))
    local t0 = px.now()
    assert.equal(0, q:run(1e-9))
    assert.is_true(px.now() - t0 < 5)
    for _, bad in ipairs({ -1, 0 / 0 }) do
      assert.has_error(function() q:run(bad) end)
    end
    for _, timeout in ipairs({ TOO_LONG, 1e300, math.huge }) do
      q:add(0.005, rec)
      assert.equal(1, q:run(timeout))
    end
    q:add(0.005, rec)
    assert.equal(1, q:run())
    assert.same({ false, false, false, false }, calls)
    assert.equal(1, q:cancel_all())
    assert.equal(1, q:run(math.huge))        -- the aborted call
    assert.same({ false, false, false, false, true }, calls)
  end)

  it("fiber_waits_and_scopes_saturate", function()
    local ok = px.run(function()
      local t0 = px.now()
      px.sleep(0)
      px.sleep(1e-9)
      assert.is_true(px.now() >= t0)
      for _, bad in ipairs({ -1, 0 / 0 }) do
        assert.has_error(function() px.sleep(bad) end)
        assert.has_error(function() px.timeout(bad, function() end) end)
      end
      for _, d in ipairs({ TOO_LONG, 1e300, math.huge }) do   -- a sleep of "never": only a scope ends it
        local r, err = px.timeout(0.005, px.sleep, d)
        assert.is_nil(r)
        assert.equal("ETIMEDOUT", err.code)
      end
      for _, d in ipairs({ 0, 1e-9 }) do                       -- a scope of 0 or 1 ns fires
        local r, err = px.timeout(d, px.sleep, 100)
        assert.is_nil(r)
        assert.equal("ETIMEDOUT", err.code)
      end
      for _, d in ipairs({ TOO_LONG, 1e300, math.huge }) do   -- a scope of "never" does not
        assert.equal(7, px.timeout(d, function() px.sleep(0.001); return 7 end))
      end
      return true
    end)
    assert.is_true(ok)
  end)
end)
