-- Stray wakes and interrupted waits, over one table of every wait of the
-- family (and fiber:join), as tests/c/sync/stray_wake.c does from C.
--
-- px._wake(id) is px_wake: a wake nobody granted.  A waiter woken so keeps
-- waiting, with its place in the queue, and gets what it waited for only when
-- it is handed over.  A wait interrupted by a cancelled token or a timeout
-- leaves nothing queued and takes nothing: the next release goes to the next
-- waiter.
local px = require "parataxis"

-- A kind: make() -> h; arm(h) makes the wait park (on main); block(h) is the
-- wait; leave(h) what a waiter does after it; release(h) lets one waiter
-- through (on main); queued(h) how many wait, where the API tells.  chains: a
-- waiter's leave passes it on; wakes_all: one release lets every waiter
-- through; queues = false: only one waiter parks.
local kinds = {
  {
    name = "mutex", stray = "a_stray_wake_then_an_unlock_hands_the_mutex_over",
    make = px.mutex, arm = function(m) m:lock() end,
    block = function(m) m:lock() end, leave = function(m) m:unlock() end,
    release = function(m) m:unlock() end, queued = function(m) return m:waiters() end,
    chains = true,
  },
  {
    name = "rwlock writer", stray = "a_stray_wake_then_an_unlock_hands_the_rwlock_over",
    make = px.rwlock, arm = function(l) l:wrlock() end,
    block = function(l) l:wrlock() end, leave = function(l) l:wrunlock() end,
    release = function(l) l:wrunlock() end, queued = function(l) return l:waiters() end,
    chains = true,
  },
  {
    name = "rwlock reader", stray = "a_stray_wake_then_a_wrunlock_admits_the_readers",
    make = px.rwlock, arm = function(l) l:wrlock() end,
    block = function(l) l:rdlock() end, leave = function(l) l:rdunlock() end,
    release = function(l) l:wrunlock() end, queued = function(l) return l:waiters() end,
    wakes_all = true,
  },
  {
    name = "waitgroup", stray = "a_stray_wake_then_done_ends_a_waitgroup_wait",
    make = px.waitgroup, arm = function(wg) wg:add(1) end,
    block = function(wg) wg:wait() end, release = function(wg) wg:done() end,
    wakes_all = true,
  },
  {
    name = "barrier", stray = "a_stray_wake_then_the_last_arrival_releases_a_barrier",
    make = function() return px.barrier(2) end,
    block = function(b) b:arrive_and_wait() end,
    release = function(b) b:arrive_and_wait() end,
    queued = function(b) return b:waiting() end, queues = false,
  },
  {
    name = "once", stray = "a_stray_wake_then_the_end_releases_a_once_wait",
    make = function() return { o = px.once(), go = px.event() } end,
    arm = function(h)        -- a runner runs the action until go is set
      px.spawn(function() h.o:call(function() h.go:wait() end) end)
      px.yield()
    end,
    block = function(h) h.o:call(function() error("run twice") end) end,
    release = function(h) h.go:set() end, wakes_all = true,
  },
  {
    name = "semaphore", stray = "a_stray_wake_then_a_release_hands_a_sem_unit_over",
    make = function() return px.semaphore(0) end,
    block = function(s) s:acquire() end, release = function(s) s:release() end,
    queued = function(s) return s:waiters() end,
    after_interrupt = function(s) assert.equal(0, s:value()) end,
  },
  {
    name = "event", stray = "a_stray_wake_then_a_set_ends_an_event_wait",
    make = px.event, block = function(e) e:wait() end,
    release = function(e) e:set() end, wakes_all = true,
  },
  {
    name = "channel recv", stray = "a_stray_wake_then_a_send_hands_the_value_over",
    make = function() return px.channel(0) end,
    block = function(ch) return (assert(ch:recv())) end,
    release = function(ch) assert.is_true(ch:trysend("v")) end,
  },
  {
    name = "channel send", stray = "a_stray_wake_then_a_recv_takes_the_sent_value",
    make = function() return px.channel(0) end,
    block = function(ch) assert.is_true(ch:send("v")) end,
    release = function(ch) assert.equal("v", ch:tryrecv()) end,
    after_interrupt = function(ch)           -- the interrupted send sent nothing
      local v, err = ch:tryrecv()
      assert.is_nil(v); assert.equal("EBUSY", err.code)
    end,
  },
  {
    name = "join", stray = "a_stray_wake_then_the_end_of_the_joined_ends_a_join",
    make = function() return { go = px.event() } end,
    arm = function(h)
      h.child = px.spawn(function() h.go:wait(); return "ended" end)
      px.yield()
    end,
    block = function(h) assert.equal("ended", h.child:join()) end,
    release = function(h) h.go:set() end, wakes_all = true,
  },
}

local function waiter(k, h, log, tag)
  return function()
    k.block(h)
    log[#log + 1] = tag
    if k.leave then k.leave(h) end
    return tag
  end
end

-- A waiter fiber, parked in its wait when this returns.
local function spawn_waiting(fn)
  local f = px.spawn(fn)
  px.yield()
  assert.is_false(f:done(), "the waiter should be parked")
  return f
end

for _, k in ipairs(kinds) do
  describe("stray wakes and interrupts: " .. k.name, function()
    it(k.stray, function()
      px.run(function()
        local h = k.make()
        if k.arm then k.arm(h) end
        local log = {}
        local a = spawn_waiting(waiter(k, h, log, "a"))
        local b = k.queues ~= false and spawn_waiting(waiter(k, h, log, "b")) or nil
        assert.is_true(px._wake(a:id()))      -- a wake nobody granted
        px.yield(); px.yield()
        assert.is_false(a:done())             -- still waiting ...
        assert.same({}, log)
        if k.queued then assert.equal(b and 2 or 1, k.queued(h)) end   -- ... still queued
        k.release(h)                          -- to a, first in line still
        px._wake(a:id())                      -- granted, not yet run: stray again
        assert.equal("a", a:join())
        if b then
          assert.equal("a", log[1])
          if not k.chains and not k.wakes_all then k.release(h) end
          assert.equal("b", b:join())
        end
      end)
    end)

    -- The waiter interrupted, then a fresh waiter gets the next release.
    local function interrupted(scope, code)
      px.run(function()
        local h = k.make()
        if k.arm then k.arm(h) end
        local tok = px.token()
        local a = spawn_waiting(function() return scope(tok, function() k.block(h) end) end)
        if k.queued then assert.equal(1, k.queued(h)) end
        tok:cancel()
        local r, err = a:join()
        assert.is_nil(r)
        assert.equal(code, err.code)
        if k.queued then assert.equal(0, k.queued(h)) end    -- nothing left queued
        if k.after_interrupt then k.after_interrupt(h) end
        local log = {}
        local b = spawn_waiting(waiter(k, h, log, "b"))
        k.release(h)
        assert.equal("b", b:join())
      end)
    end

    it("cancelled_wait_leaves_nothing_queued", function()
      interrupted(px.with_cancel, "ECANCELED")
    end)

    it("timed_out_wait_leaves_nothing_queued", function()
      interrupted(function(_, fn) return px.timeout(0.02, fn) end, "ETIMEDOUT")
    end)
  end)
end

describe("stray wakes: sleep", function()
  it("a_stray_wake_does_not_end_a_sleep", function()
    -- a sleep is no park: the wake does nothing, the sleep lasts its time
    local slept = px.run(function()
      local s = px.spawn(function()
        local t0 = px.now()
        px.sleep(0.05)
        return px.now() - t0
      end)
      px.yield()
      for _ = 1, 5 do
        assert.is_false(px._wake(s:id()))
        px.yield()
      end
      return s:join()
    end)
    assert.is_true(slept >= 0.05)
  end)

  it("a_stray_wake_of_an_ended_or_unknown_fiber_does_nothing", function()
    px.run(function()
      local f = px.spawn(function() end)
      f:join()
      assert.is_false(px._wake(f:id()))
      assert.is_false(px._wake(0))
      assert.is_false(px._wake(1 << 40))
    end)
  end)
end)
