-- px.map(fn, items, {concurrency = n}): the conformance specs of
-- tests/c/sync/map.c, under their names.
local px = require "parataxis"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local raised, yield_until = h.raised, h.yield_until

local function run(body) return px.run(body) end
local HOUR = 3600

-- A mapped function that squares its item after a number of yields that
-- makes later items end first (the order of ends is not the input order),
-- counting its calls and the most of them in flight at once.
local function counter()
  local c = { calls = 0, in_flight = 0, most = 0 }
  function c.square(x)
    c.calls = c.calls + 1
    c.in_flight = c.in_flight + 1
    if c.in_flight > c.most then c.most = c.in_flight end
    for _ = 0, (1000 - x) % 7 do px.yield() end
    c.in_flight = c.in_flight - 1
    return x * x
  end
  return c
end

describe("map", function()
  it("results_keep_input_order_at_concurrency_1_4_and_1000", function()
    run(function()
      local items = {}
      for i = 1, 1000 do items[i] = i end
      for _, conc in ipairs({ 1, 4, 1000 }) do
        local c = counter()
        local r = px.map(c.square, items, { concurrency = conc })
        assert.equal(1000, r.n)
        for i = 1, 1000 do assert(r[i] == i * i, "result " .. i) end
        assert.equal(1000, c.calls)
        assert.equal(conc, c.most)
      end
      local none = px.map(function() return nil end, { 1, 2, 3 })   -- nil results keep their place
      assert.same({ n = 3 }, none)
    end)
  end)

  -- Item 5 fails once three other calls wait; they sleep until cancelled.
  it("first_failure_cancels_the_rest", function()
    run(function()
      local items = {}
      for i = 1, 100 do items[i] = i + 2 end         -- item 5 is the third
      local calls, entered, got = 0, 0, {}
      local err = raised(px.map, function(x)
        calls = calls + 1
        if x == 5 then
          yield_until(function() return entered == 3 end)
          error({ failed = x })
        end
        entered = entered + 1
        local ok, e = pcall(px.sleep, HOUR)
        got[#got + 1] = not ok and e.code
        error(e, 0)
      end, items, { concurrency = 4 })
      assert.same({ failed = 5 }, err)               -- the first error, unchanged
      assert.equal(4, calls)                         -- no call started after the failure
      assert.same({ "ECANCELED", "ECANCELED", "ECANCELED" }, got)
      -- a call that never waits is not interrupted, but no call starts after it
      calls = 0
      local e2 = raised(px.map, function(x)
        calls = calls + 1
        if x == 2 then error("two", 0) end
        for _ = 1, 10 do px.yield() end
        return x
      end, { 1, 2, 3, 4, 5, 6, 7, 8 }, { concurrency = 3 })
      assert.equal("two", e2)
      assert.equal(2, calls)                         -- the third worker never started one
    end)
  end)

  it("concurrency_bounds_the_calls_in_flight", function()
    run(function()
      local items = {}
      for i = 1, 50 do items[i] = i end
      for _, conc in ipairs({ 1, 2, 3, 7, 49, 50, 51, 1000 }) do
        local c = counter()
        px.map(c.square, items, { concurrency = conc })
        assert.equal(math.min(conc, 50), c.most)
      end
      for _, opts in ipairs({ { concurrency = 0 }, {} }) do   -- 0, or none: all at once
        local c = counter()
        px.map(c.square, items, opts)
        assert.equal(50, c.most)
      end
      local c = counter()
      px.map(c.square, items)
      assert.equal(50, c.most)
    end)
  end)

  it("an_empty_input_returns_at_once", function()
    local calls = 0
    local function f() calls = calls + 1 end
    assert.same({ n = 0 }, px.map(f, {}))            -- off-fiber too
    run(function()
      assert.same({ n = 0 }, px.map(f, {}, { concurrency = 4 }))
    end)
    assert.equal(0, calls)
  end)

  it("hostile_arguments", function()
    local function code(...) return raised(...).code end
    run(function()
      local f = function(x) return x end
      assert.equal("EINVAL", code(px.map, nil, { 1 }))
      assert.equal("EINVAL", code(px.map, "f", { 1 }))
      assert.equal("EINVAL", code(px.map, f, nil))
      assert.equal("EINVAL", code(px.map, f, "items"))
      assert.equal("EINVAL", code(px.map, f, { 1 }, 4))            -- options are a table
      assert.equal("EINVAL", code(px.map, f, { 1 }, { concurrency = -1 }))
      assert.equal("EINVAL", code(px.map, f, { 1 }, { concurrency = 1.5 }))
      assert.equal("EINVAL", code(px.map, f, { 1 }, { concurrency = "2" }))
      assert.same({ 1, n = 1 }, px.map(f, { 1 }))  -- and it still works
      -- a scope of the caller ends the map: the calls are cancelled, waited for
      local ended = 0
      local r, err = px.timeout(0.005, px.map, function()
        local ok = pcall(px.sleep, HOUR)
        ended = ended + 1
        assert(not ok)
      end, { 1, 2, 3 })
      assert.is_nil(r)
      assert.equal("ETIMEDOUT", err.code)
      assert.equal(3, ended)
    end)
    assert.equal("ENOFIBER", code(px.map, function(x) return x end, { 1 }))
  end)
end)
