-- Fiber-local values: px.fiber_local{ inherit = fn, destroy = fn } makes a key
-- whose value is per fiber (key:get(), key:set(v)); destroy(v) runs exactly
-- once for every value a fiber still holds when it ends or its run is
-- discarded, and for a value key:set replaces; inherit(v) gives a spawned
-- fiber its value from its spawner's.  The C names of tests/behaviours.txt
-- ("local." group).

local px = require "parataxis"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local raised, spawn_waiting = h.raised, h.spawn_waiting

-- A key whose destroy counts each value it is called with.
local function counted(opts)
  local destroyed = {}
  opts = opts or {}
  opts.destroy = function(v) destroyed[v] = (destroyed[v] or 0) + 1 end
  return px.fiber_local(opts), destroyed
end

describe("local", function()
  it("a_value_is_per_fiber", function()
    local key = px.fiber_local()
    px.run(function()
      assert.is_nil(key:get())
      key:set("main's")
      local ev = px.event()
      local a = px.spawn(function() key:set("a's"); ev:wait(); return key:get() end)
      local b = px.spawn(function() key:set({ "b's" }); ev:wait(); return key:get()[1] end)
      px.yield()
      assert.equal("main's", key:get())
      ev:set()
      assert.equal("a's", a:join())
      assert.equal("b's", b:join())
      assert.equal("main's", key:get())
    end)
    assert.is_nil(key:get())                   -- off-fiber: none
    assert.equal("ENOFIBER", raised(key.set, key, 1).code)
  end)

  it("without_inherit_a_new_fiber_starts_empty", function()
    local key = px.fiber_local{ destroy = function() end }
    px.run(function()
      key:set(42)
      assert.is_nil(px.spawn(function() return key:get() end):join())
      assert.equal(42, key:get())
    end)
  end)

  it("a_spawned_fiber_inherits_when_asked", function()
    local shared = px.fiber_local{ inherit = function(v) return v end }
    local copied = px.fiber_local{ inherit = function(v) return { n = v.n } end }
    local none = px.fiber_local{ inherit = function() return nil end }
    px.run(function()
      local t = { n = 1 }
      shared:set(t)
      copied:set(t)
      none:set("x")
      local child = px.spawn(function()
        local grandchild = px.spawn(function() return shared:get(), copied:get().n end)
        local g1, g2 = grandchild:join()
        return shared:get(), copied:get(), none:get(), g1, g2
      end)
      local s, c, n, g1, g2 = child:join()
      assert.equal(t, s)                        -- the same value
      assert.are_not.equal(t, c)               -- a copy of it
      assert.same({ n = 1 }, c)
      assert.is_nil(n)                          -- inherit said nil: none
      assert.equal(t, g1)                       -- and on, to the grandchild
      assert.equal(1, g2)
      -- group members and fibers of a select alike: any spawn
      px.group(function(g)
        assert.equal(t, g:spawn(function() return shared:get() end):join())
      end)
    end)
  end)

  it("changes_in_a_child_do_not_reach_its_parent", function()
    local key = px.fiber_local{ inherit = function(v) return v end }
    px.run(function()
      key:set("parent")
      local ev = px.event()
      local child = spawn_waiting(function()
        assert.equal("parent", key:get())
        key:set("child")
        ev:wait()
        return key:get()
      end)
      assert.equal("parent", key:get())
      key:set("parent again")                   -- nor the other way
      ev:set()
      assert.equal("child", child:join())
      assert.equal("parent again", key:get())
    end)
  end)

  it("replacing_a_value_destroys_the_old_one", function()
    local key, destroyed = counted()
    local a, b = { "a" }, { "b" }
    px.run(function()
      key:set(a)
      key:set(b)
      assert.equal(1, destroyed[a])             -- at once
      assert.is_nil(destroyed[b])
      key:set(b)                                -- the same value: nothing destroyed
      assert.is_nil(destroyed[b])
      key:set(nil)                              -- removed: destroyed
      assert.equal(1, destroyed[b])
      key:set(a)
    end)
    assert.equal(2, destroyed[a])               -- set again, destroyed at the end
    assert.equal(1, destroyed[b])
  end)

  it("the_destructor_runs_once_when_the_fiber_ends", function()
    local key, destroyed = counted{ inherit = function(v) return v .. "+" end }
    local failing = px.fiber_local{ destroy = function() error("a broken destroy") end }
    px.run(function()
      local ev = px.event()
      local ok = px.spawn(function() key:set("ok"); failing:set(1); ev:wait() end)
      local bad = px.spawn(function() key:set("bad"); ev:wait(); error("it fails") end)
      px.yield()
      assert.is_nil(destroyed.ok)              -- alive: kept
      ev:set()
      ok:join()
      assert.equal(1, destroyed.ok)            -- ended: once, when it ended
      assert.is_false(pcall(bad.join, bad))
      assert.equal(1, destroyed.bad)           -- ended with an error: the same
      -- a destroy cannot wait (it runs as the fiber ends): the wait raises
      local err
      local waits = px.fiber_local{ destroy = function() err = select(2, pcall(px.sleep, 0)) end }
      px.spawn(function() waits:set(1) end):join()
      assert.equal("ENOFIBER", err.code)
      -- a key collected while a fiber holds a value: the fiber keeps it
      local gone = 0
      local dropped = px.fiber_local{ destroy = function() gone = gone + 1 end }
      local later = px.event()
      local holder = spawn_waiting(function() dropped:set(true); dropped = nil; later:wait() end)
      px.yield()
      collectgarbage()
      collectgarbage()
      assert.equal(0, gone)
      later:set()
      holder:join()
      assert.equal(1, gone)
      key:set("main")
      px.spawn(function() end):join()           -- inherited "main+", never set
      assert.equal(1, destroyed["main+"])
    end)
    assert.equal(1, destroyed.main)
    for _, n in pairs(destroyed) do assert.equal(1, n) end
  end)

  it("the_destructor_runs_once_when_the_run_is_discarded", function()
    local key, destroyed = counted{ inherit = function(v) return v .. "+" end }
    -- a deadlocked run: its fibers are cancelled and discarded with it
    local err = raised(px.run, function()
      key:set("main")
      local never = px.event()
      px.spawn(function() key:set("parked"); never:wait() end)
      px.spawn(function() never:wait() end)   -- holds "main+"
      never:wait()
    end)
    assert.equal("EDEADLK", err.code)
    -- two values "main+": the one "parked" replaced, and the second fiber's
    assert.same({ main = 1, parked = 1, ["main+"] = 2 }, destroyed)
    -- a run that main's error cancels, with a fiber that never started
    for k in pairs(destroyed) do destroyed[k] = nil end
    err = raised(px.run, function()
      key:set("main")
      px.spawn(function() key:set("sleeper"); px.sleep(3600) end)
      px.yield()
      px.spawn(function() end)                  -- never ran: holds "main+"
      error("main fails")
    end)
    assert.truthy(tostring(err):find("main fails", 1, true))
    assert.same({ main = 1, sleeper = 1, ["main+"] = 2 }, destroyed)
  end)
end)
