-- Groups: px.group(fn, ...) and `local g <close> = px.group()`, g:spawn,
-- g:cancel -- the conformance specs of tests/c/sync/group.c, under their
-- names, and the Lua binding's own (the block, the <close> form).
--
-- A cancel from another thread comes from px_foreign (tests/lua/foreign.c), a
-- test-only C module: a Lua state has one thread.  Fibers synchronize on
-- observable state (a count of members that got to their wait), never on
-- sleeps.

-- px_foreign links no copy of the library: see tests/lua/two_schedulers_spec.lua.
local core = package.searchpath("parataxis_core", package.cpath)
core = core and core:gsub("([^/]*)$", "./%1")
local foreign = core and package.loadlib(core, "*") and select(2, pcall(require, "px_foreign"))
if type(foreign) ~= "table" then foreign = nil end

local px = require "parataxis"
local socket = require "socket"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local raised, yield_until = h.raised, h.yield_until

local function run(body) return px.run(body) end
local HOUR = 3600

-- The code of the error object err (or err itself).
local function code(err) return type(err) == "table" and err.code or err end

describe("group", function()
  -- Members parked for good are a deadlock that px.run reports (the group's
  -- wait is held by its members); the run's unwinding ends them, and the group.
  -- The body waiting in the group's scope is one too: that scope is no token
  -- scope that some thread might still cancel.
  it("a_deadlocked_member_is_reported", function()
    for _, body_waits in ipairs({ false, true }) do
      local kept, group_err
      local ok, err = pcall(px.run, function()
        local e = px.event()
        local ok2, e2 = pcall(px.group, function(g)
          kept = g
          g:spawn(function() e:wait() end)
          g:spawn(function() e:wait() end)
          if body_waits then e:wait() end
        end)
        group_err = not ok2 and e2
      end)
      assert.is_false(ok)
      assert.equal("EDEADLK", err.code)
      if not body_waits then
        assert.truthy(err.message:find("group wait", 1, true), err.message)
      end
      assert.truthy(err.message:find("Event wait", 1, true), err.message)
      assert.equal(0, kept:live())                   -- its members left with the unwinding
      if not body_waits then
        assert.truthy(group_err)                     -- and its wait returned to its owner
      end
    end
  end)

  it("waits_for_every_member", function()
    run(function()
      local ended, live = 0, nil
      local r1, r2 = px.group(function(g, a)
        for i = 1, 10 do
          g:spawn(function(ms) px.sleep(ms / 1000); ended = ended + 1 end, 10 - i)
        end
        live = g:live()
        return a, "two"
      end, "one")
      assert.equal(10, live)
      assert.equal(10, ended)
      assert.equal("one", r1)                        -- the block's results
      assert.equal("two", r2)
    end)
  end)

  -- Members park in every kind of wait; one fails once all of them wait:
  -- each wait ends with ECANCELED, none of them is a failure, and the block's
  -- own wait is cancelled too.
  it("first_failure_cancels_members_in_every_kind_of_wait", function()
    run(function()
      local m, ch, ev, sem, fu = px.mutex(), px.channel(), px.event(), px.semaphore(0), px.future()
      local u = assert(socket.udp())
      assert(u:setsockname("127.0.0.1", 0))
      m:lock()
      local waits = {
        sleep = function() px.sleep(HOUR) end,
        lock = function() m:lock() end,
        recv = function() ch:recv() end,
        event = function() ev:wait() end,
        semaphore = function() sem:acquire() end,
        fd = function() px.wait_readable(u) end,
        future = function() fu:wait() end,
        select = function() px.select{ ch:recv_case(), ev:wait_case() } end,
      }
      local entered, got, nwaits, block_err = 0, {}, 0, nil
      for _ in pairs(waits) do nwaits = nwaits + 1 end
      local err = raised(px.group, function(g)
        for name, wait in pairs(waits) do
          g:spawn(function()
            entered = entered + 1
            local ok, e = pcall(wait)
            got[name] = ok and "returned" or code(e)
            if not ok then error(e, 0) end
          end)
        end
        g:spawn(function()
          yield_until(function() return entered == nwaits end)
          px.yield()                                 -- each of them parks
          error("the failure", 0)
        end)
        local ok, e = pcall(px.sleep, HOUR)          -- the block is cancelled too
        block_err = not ok and code(e)
        error(e, 0)
      end)
      assert.equal("EGROUP", err.code)
      assert.same({ "the failure" }, err.errors)     -- the cancelled are no failures
      for name in pairs(waits) do assert.equal("ECANCELED", got[name], name) end
      assert.equal("ECANCELED", block_err)
      assert.equal(0, m:waiters())
      assert.equal(0, ch:waiters())
      assert.equal(0, ev:waiters())
      assert.equal(0, sem:waiters())
      m:unlock()
      u:close()
    end)
  end)

  it("failures_are_collected_in_order", function()
    run(function()
      local err = raised(px.group, function(g)
        g:spawn(function() px.yield(); px.yield(); error("seven", 0) end)
        g:spawn(function() error("five", 0) end)
        g:spawn(function() px.yield(); error({ six = 6 }, 0) end)   -- any value
        g:spawn(function() px.yield(); px.yield(); px.yield(); error(nil) end)
      end)
      assert.equal("EGROUP", err.code)
      assert.equal(4, #err.errors)
      assert.equal("nil", err.errors[4])            -- a list keeps no nil: its name
      assert.equal("five", err.errors[1])
      assert.same({ six = 6 }, err.errors[2])
      assert.equal("seven", err.errors[3])
      assert.truthy(err.message:find("4 failures, the first: five", 1, true), err.message)
      assert.truthy(tostring(err):find("(EGROUP)", 1, true))
      assert.is_true(px.is_error(err, "EGROUP"))
    end)
  end)

  it("a_member_cancelled_by_the_group_has_not_failed", function()
    run(function()
      local sleepers = {}
      local err = raised(px.group, function(g)
        sleepers[1] = g:spawn(px.sleep, HOUR)
        sleepers[2] = g:spawn(px.sleep, HOUR)
        g:spawn(function() px.yield(); error("nine", 0) end)
      end)
      assert.same({ "nine" }, err.errors)
      assert.equal("ECANCELED", raised(sleepers[1].join, sleepers[1]).code)
      assert.equal("ECANCELED", raised(sleepers[2].join, sleepers[2]).code)
      -- cancelled by g:cancel(): nothing failed, the block ends as it would
      local member
      local r = px.group(function(g)
        member = g:spawn(px.sleep, HOUR)
        px.yield()
        assert.is_true(g:cancel())
        assert.is_false(g:cancel())
        assert.is_true(g:cancelled())
        return "the block's result"
      end)
      assert.equal("the block's result", r)
      assert.equal("ECANCELED", raised(member.join, member).code)
      -- a block that g:cancel() interrupted returns nil, err, as px.with_cancel does
      local r2, e2 = px.group(function(g)
        g:spawn(function() px.yield(); g:cancel() end)
        px.sleep(HOUR)
      end)
      assert.is_nil(r2)
      assert.equal("ECANCELED", e2.code)
    end)
  end)

  it("cancelled_from_another_thread", function()
    if not foreign then pending("px_foreign is built only with the C tests") return end
    run(function()
      local got, t = {}, nil
      local r = px.group(function(g)
        t = foreign.later("group_cancel", g)
        for i = 1, 4 do
          g:spawn(function()
            local ok, e = pcall(px.sleep, HOUR)
            got[i] = not ok and e.code
          end)
        end
        px.yield()                                   -- they sleep
        foreign.go(t)
        return "waited"
      end)
      assert.equal("waited", r)
      assert.equal(1, foreign.join(t))               -- that call cancelled it
      for i = 1, 4 do assert.equal("ECANCELED", got[i]) end
    end)
  end)

  it("cancellation_races_normal_completion", function()
    if not foreign then pending("px_foreign is built only with the C tests") return end
    run(function()
      for _ = 1, 400 do
        local t, kept, members = nil, nil, {}
        px.group(function(g)
          kept = g
          t = foreign.later("group_cancel", g, math.random(0, 20000))
          for i = 0, 3 do
            members[#members + 1] = g:spawn(function()
              local ok, e = pcall(px.sleep, i * 0.00001)
              assert(ok or e.code == "ECANCELED")
            end)
          end
          foreign.go(t)
        end)                                         -- ended or cancelled: no failure either way
        assert.equal(0, kept:live())
        for _, f in ipairs(members) do assert.is_true(f:done()) end
        local rc = foreign.join(t)
        assert.is_true(rc == 0 or rc == 1)
      end
    end)
  end)

  -- Members that, cancelled, still take turns before they end: the wait
  -- that the caller's scope ended goes on until they did.
  it("a_scope_of_the_waiter_cancels_the_group_and_waits_for_it", function()
    run(function()
      local ended, kept = 0, nil
      local function slow_to_leave()
        local ok, e = pcall(px.sleep, HOUR)
        assert.is_false(ok)
        assert.equal("ECANCELED", e.code)
        for _ = 1, 100 do px.yield() end
        ended = ended + 1
      end
      local r, err = px.timeout(0.01, px.group, function(g)
        kept = g
        g:spawn(slow_to_leave)
        g:spawn(slow_to_leave)
      end)
      assert.is_nil(r)
      assert.equal("ETIMEDOUT", err.code)
      assert.equal(2, ended)
      assert.equal(0, kept:live())
      assert.equal("ECLOSED", raised(kept.spawn, kept, px.yield).code)
      -- the same when the scope fires while the block itself waits
      ended = 0
      r, err = px.timeout(0.01, px.group, function(g)
        g:spawn(slow_to_leave)
        g:spawn(slow_to_leave)
        px.sleep(HOUR)
      end)
      assert.is_nil(r)
      assert.equal("ETIMEDOUT", err.code)
      assert.equal(2, ended)
    end)
  end)

  it("spawn_into_a_cancelled_group_is_refused", function()
    run(function()
      local started = 0
      local r = px.group(function(g)
        g:cancel()
        local err = raised(g.spawn, g, function() started = started + 1 end)
        assert.equal("ECANCELED", err.code)
        assert.equal(0, g:live())
        return "refused"
      end)
      assert.equal("refused", r)
      assert.equal(0, started)                       -- never started
      -- a block that lets the refusal propagate ends as a cancelled block does
      local r2, e2 = px.group(function(g)
        g:cancel()
        g:spawn(px.yield)
      end)
      assert.is_nil(r2)
      assert.equal("ECANCELED", e2.code)
    end)
  end)

  it("spawn_after_the_wait_is_refused", function()
    run(function()
      local kept
      px.group(function(g) kept = g; g:spawn(px.yield) end)
      assert.equal("ECLOSED", raised(kept.spawn, kept, px.yield).code)
      do
        local g <close> = px.group()
        kept = g
        g:spawn(px.yield)
      end
      assert.equal("ECLOSED", raised(kept.spawn, kept, px.yield).code)
      kept:close()                                   -- closing again does nothing
    end)
  end)

  it("a_member_spawns_into_its_own_group", function()
    run(function()
      local ended = 0
      px.group(function(g)
        local function spawns_children(depth)
          if depth > 0 then
            g:spawn(spawns_children, depth - 1)
            px.yield()
            g:spawn(spawns_children, depth - 1)
          end
          ended = ended + 1
        end
        g:spawn(spawns_children, 3)
      end)
      assert.equal(15, ended)                        -- 1 + 2 + 4 + 8, each waited for
    end)
  end)

  -- An outer group's member owns an inner group; another member of the
  -- outer group fails: the inner group's owner is cancelled (its waiter's
  -- scope), which cancels the inner members, and only the failure counts.
  it("groups_nest", function()
    run(function()
      local entered, got, inner_err = 0, {}, nil
      local err = raised(px.group, function(outer)
        outer:spawn(function()
          local ok, e = pcall(px.group, function(inner)
            for i = 1, 2 do
              inner:spawn(function()
                entered = entered + 1
                local ok2, e2 = pcall(px.sleep, HOUR)
                got[i] = not ok2 and e2.code
              end)
            end
          end)
          inner_err = not ok and e.code
          if not ok then error(e, 0) end
        end)
        outer:spawn(function()
          yield_until(function() return entered == 2 end)
          error("three", 0)
        end)
      end)
      assert.same({ "three" }, err.errors)           -- ECANCELED after the cancel: none
      assert.equal("ECANCELED", inner_err)
      assert.same({ "ECANCELED", "ECANCELED" }, got)
      -- an inner group's failure is a failure of its owner, a member of the outer
      local e2 = raised(px.group, function(outer)
        outer:spawn(px.group, function(inner) inner:spawn(error, "deep", 0) end)
      end)
      assert.equal(1, #e2.errors)
      assert.equal("EGROUP", e2.errors[1].code)
      assert.same({ "deep" }, e2.errors[1].errors)
    end)
  end)

  it("hostile_arguments", function()
    local function c(...) return raised(...).code end
    assert.equal("ENOFIBER", c(px.group, function() end))   -- off-fiber
    assert.equal("ENOFIBER", c(px.group))
    run(function()
      assert.equal("EINVAL", c(px.group, "not a function"))
      assert.equal("EINVAL", c(px.group, nil, "an argument"))
      local co = coroutine.wrap(function()            -- its end would wait: refused up front
        return c(px.group, function(g) g:spawn(px.yield) end)
      end)
      assert.equal("ENOFIBER", co())
      local kept
      px.group(function(g)
        kept = g
        assert.equal("EINVAL", c(g.spawn, g, "not a function"))
        assert.equal("EINVAL", c(g.spawn, g))
        assert.equal("EINVAL", c(g.spawn, px.event(), px.yield))
        assert.equal("EINVAL", c(g.cancel, {}))
        assert.equal("EINVAL", c(g.live, nil))
        assert.equal("EINVAL", c(g.close, "x"))
        assert.is_nil(g._wait)                       -- the C half's own
        assert.is_nil(g._fail)
      end)
      -- a member that would wait for its own group: EDEADLK, a failure of the group
      local e = raised(function()
        local g <close> = px.group()
        g:spawn(function() g:close() end)
      end)
      assert.equal("EGROUP", e.code)
      assert.equal("EDEADLK", e.errors[1].code)
      local mt = getmetatable(kept)
      mt.__gc(kept)                                  -- a finalizer called by hand
      mt.__gc(kept)
      mt.__gc(px.event())
      assert.equal("EINVAL", c(kept.spawn, kept, px.yield))
      assert.equal("EINVAL", c(kept.cancel, kept))
    end)
    -- a group of an earlier run: nothing of this run may spawn into it
    local old
    run(function()
      old = px.group()
      px.group(function(g) g:spawn(px.yield) end)
    end)
    run(function()
      local err = raised(old.spawn, old, px.yield)
      assert.equal("EINVAL", err.code)
      assert.truthy(err.message:find("run is over", 1, true))
      old:close()                                    -- its members ended with their run
    end)
  end)

  -- The Lua binding's own: the block and the <close> form.

  it("the_block_s_error_cancels_the_members_and_is_a_failure", function()
    run(function()
      local member
      local err = raised(px.group, function(g)
        member = g:spawn(px.sleep, HOUR)
        px.yield()
        g:spawn(function() px.yield(); error("member's", 0) end)
        error("block's", 0)
      end)
      assert.same({ "block's", "member's" }, err.errors)   -- the order they came in
      assert.equal("ECANCELED", raised(member.join, member).code)
      -- the block's scope interrupt is no failure: it propagates as it is
      local tok = px.token()
      local r, e3 = px.with_cancel(tok, px.group, function(g)
        g:spawn(px.sleep, HOUR)
        tok:cancel()
        px.sleep(HOUR)
      end)
      assert.is_nil(r)
      assert.equal("ECANCELED", e3.code)
    end)
  end)

  it("a_close_variable_group_waits_at_the_end_of_its_block", function()
    run(function()
      local ended = 0
      do
        local g <close> = px.group()
        for _ = 1, 3 do g:spawn(function() px.sleep(0.001); ended = ended + 1 end) end
        assert.equal(0, ended)
      end
      assert.equal(3, ended)                         -- waited for at the block's end
      local member
      local err = raised(function()
        local g <close> = px.group()
        member = g:spawn(px.sleep, HOUR)
        g:spawn(function() px.yield(); error("member", 0) end)
        px.sleep(0.001)                              -- the block itself is no member
        return "the block ends"
      end)
      assert.equal("EGROUP", err.code)
      assert.same({ "member" }, err.errors)
      assert.equal("ECANCELED", raised(member.join, member).code)
      -- an error leaving the block is a failure, as the function form's
      local e2 = raised(function()
        local g <close> = px.group()
        g:spawn(px.sleep, HOUR)
        error("block", 0)
      end)
      assert.same({ "block" }, e2.errors)
      -- a scope's interrupt leaving the block cancels the members and goes on
      local r, e3 = px.timeout(0.001, function()
        local g <close> = px.group()
        g:spawn(px.sleep, HOUR)
        px.sleep(HOUR)
      end)
      assert.is_nil(r)
      assert.equal("ETIMEDOUT", e3.code)
    end)
  end)

  it("a_stray_wake_keeps_the_group_waiting", function()
    run(function()
      local ev = px.event()
      local owner = h.spawn_waiting(function()
        return px.group(function(g) g:spawn(function() ev:wait() end) end)
      end)
      for _ = 1, 3 do
        assert.is_true(px._wake(owner:id()))
        px.yield(); px.yield()
        assert.is_false(owner:done())
      end
      ev:set()
      owner:join()
    end)
  end)
end)
