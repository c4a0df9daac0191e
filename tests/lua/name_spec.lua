-- Names: every fiber has a number (1 for a run's main) and may have a name --
-- its function's "file:line" by default, px.spawn_named's or px.set_name's
-- otherwise -- and the sync objects may have one (obj:set_name); reports and
-- dumps print `fiber N "name"` and `mutex "accounts"@0x...`.  The C names of
-- tests/behaviours.txt ("name." group).

local px = require "parataxis"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local raised = h.raised

-- "short_src:linedefined" of a Lua function, as the default name says it.
local function where(fn)
  local d = debug.getinfo(fn, "S")
  return d.short_src .. ":" .. d.linedefined
end

describe("name", function()
  it("a_fiber_is_named_after_its_function_by_default", function()
    local function worker(ev) ev:wait() end
    local function quick() end
    local function main()
      local ev = px.event()
      local f = px.spawn(worker, ev)
      local q = px.spawn(quick)
      -- before it ran, and once parked: the function's file and line
      assert.equal(where(worker), f:name())
      px.yield()
      assert.is_false(f:done())
      assert.equal(where(worker), f:name())
      assert.equal(where(worker), px.name(f:id()))
      -- the dump and its table carry it too
      local recs = px.dump(false)
      assert.equal(where(main), recs[1].name)
      assert.equal(where(worker), recs[2].name)
      -- a name set explicitly wins; nil removes it (no default comes back)
      f:set_name("worker one")
      assert.equal("worker one", f:name())
      px.set_name(f, nil)
      assert.is_nil(f:name())
      assert.equal(where(main), px.name())
      assert.is_true(q:done())
      ev:set()
      f:join()
      assert.equal("named", px.spawn_named("named", quick):name())
    end
    px.run(main)
  end)

  it("naming_an_unknown_or_ended_fiber_is_refused", function()
    px.run(function()
      local f = px.spawn(function() end)
      f:join()
      local err = raised(px.set_name, f, "late")
      assert.equal("ENOFIBER", err.code)
      assert.truthy(err.message:find("no live fiber", 1, true), err.message)
      assert.equal("ENOFIBER", raised(f.set_name, f, "late").code)
      assert.equal("ENOFIBER", raised(px.set_name, f:id(), "late").code)
      assert.equal("ENOFIBER", raised(px.set_name, 1 << 40, "nobody").code)
      assert.is_nil(f:name())                 -- an ended fiber has no name
      assert.equal("EINVAL", raised(px.set_name, "a", "b").code)   -- not a fiber
      px.set_name("main")                    -- the calling fiber
      assert.equal("main", px.name())
    end)
    -- off-fiber: there is no calling fiber
    assert.equal("ENOFIBER", raised(px.set_name, "nobody").code)
    assert.is_nil(px.name())
  end)

  it("numbers_count_from_one_in_each_run", function()
    for _ = 1, 2 do
      local seen = px.run(function()
        local a = px.spawn(function() return px.number() end)
        local b = px.spawn(function() end)
        local n = { px.number(), a:number(), b:number(), px.number(b:id()) }
        n[#n + 1] = a:join()
        b:join()
        n[#n + 1] = b:number()                -- an ended fiber keeps its number
        return n
      end)
      assert.same({ 1, 2, 3, 3, 2, 3 }, seen)
    end
    assert.equal(0, px.number())             -- off-fiber
  end)

  it("reports_print_numbers_and_names", function()
    local err = raised(px.run, function()
      px.set_name("boss")
      local m = px.mutex()
      m:set_name("accounts")
      assert.equal("accounts", m:name())
      m:lock()
      px.spawn_named("waiter", function() m:lock() end):join()
    end)
    assert.equal("EDEADLK", err.code)
    local msg = err.message
    assert.truthy(msg:find('fiber 2 "waiter": parked on "Mutex lock", waits on mutex "accounts"@0x%x+ held by fiber 1 "boss"'), msg)
    assert.truthy(msg:find('fiber 1 "boss": parked on "fiber join"', 1, true), msg)
    assert.truthy(msg:find('wait-for cycle: fiber 1 "boss"', 1, true), msg)
    -- unnamed fibers: their function's file and line, at their first wait
    local function stuck(ev) ev:wait() end
    err = raised(px.run, function() local ev = px.event(); ev:set_name("never"); px.spawn(stuck, ev):join() end)
    assert.truthy(err.message:find('fiber 2 "' .. where(stuck) .. '": parked on "Event wait", waits on event "never"@', 1, true),
                  err.message)
    -- every object of the family takes a name
    px.run(function()
      for _, o in ipairs{ px.mutex(), px.rwlock(), px.semaphore(1), px.event(), px.channel(),
                          px.waitgroup(), px.barrier(2), px.once(), px.future() } do
        assert.is_nil(o:name())
        o:set_name("it")
        assert.equal("it", o:name())
        o:set_name(nil)
        assert.is_nil(o:name())
      end
    end)
  end)
end)
