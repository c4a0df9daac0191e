-- Every wait of the sync family (and fiber:join) as rows of one table, for
-- the specs that check one rule over all of them (stray_wake_spec.lua,
-- family_spec.lua), as tests/c/sync/family.c and stray_wake.c do from C.
--
-- Loaded as helpers.lua is: dofile(<the spec's folder> .. "sync_kinds.lua").
local px = require "parataxis"
local assert = require "luassert"   -- busted's assert (a spec's global, not this file's)

-- A kind: area, the C group its specs are named in; make() -> h; arm(h)
-- makes the wait park (on main); block(h) is the wait; leave(h) what a waiter
-- does after it; release(h) lets one waiter through (on main); queued(h) how
-- many wait, where the API tells.  chains: a waiter's leave passes it on;
-- wakes_all: one release lets every waiter through; queues = false: only one
-- waiter parks.  The rows of the family (not join) also say: method(), the
-- wait's method (for a call on something else); reason and tag, the wait and
-- the primitive as a deadlock report names them; held, the report names the
-- fiber that holds it; holder(h), that fiber, where the API tells.
local kinds = {
  {
    name = "mutex", stray = "a_stray_wake_then_an_unlock_hands_the_mutex_over",
    area = "mutex", reason = "Mutex lock", tag = "mutex", held = true,
    method = function() return px.mutex().lock end, holder = function(m) return m:owner() end,
    make = px.mutex, arm = function(m) m:lock() end,
    block = function(m) m:lock() end, leave = function(m) m:unlock() end,
    release = function(m) m:unlock() end, queued = function(m) return m:waiters() end,
    chains = true,
  },
  {
    name = "rwlock writer", stray = "a_stray_wake_then_an_unlock_hands_the_rwlock_over",
    area = "rwlock", reason = "RwLock write lock", tag = "rwlock", held = true,
    method = function() return px.rwlock().wrlock end, holder = function(l) return l:writer() end,
    make = px.rwlock, arm = function(l) l:wrlock() end,
    block = function(l) l:wrlock() end, leave = function(l) l:wrunlock() end,
    release = function(l) l:wrunlock() end, queued = function(l) return l:waiters() end,
    chains = true,
  },
  {
    name = "rwlock reader", stray = "a_stray_wake_then_a_wrunlock_admits_the_readers",
    area = "rwlock", reason = "RwLock read lock", tag = "rwlock", held = true,
    method = function() return px.rwlock().rdlock end,
    make = px.rwlock, arm = function(l) l:wrlock() end,
    block = function(l) l:rdlock() end, leave = function(l) l:rdunlock() end,
    release = function(l) l:wrunlock() end, queued = function(l) return l:waiters() end,
    wakes_all = true,
  },
  {
    name = "waitgroup", stray = "a_stray_wake_then_done_ends_a_waitgroup_wait",
    area = "waitgroup", reason = "WaitGroup wait", tag = "waitgroup",
    method = function() return px.waitgroup().wait end,
    make = px.waitgroup, arm = function(wg) wg:add(1) end,
    block = function(wg) wg:wait() end, release = function(wg) wg:done() end,
    wakes_all = true,
  },
  {
    name = "barrier", stray = "a_stray_wake_then_the_last_arrival_releases_a_barrier",
    area = "barrier", reason = "Barrier arrive", tag = "barrier",
    method = function() return px.barrier(2).arrive_and_wait end,
    make = function() return px.barrier(2) end,
    block = function(b) b:arrive_and_wait() end,
    release = function(b) b:arrive_and_wait() end,
    queued = function(b) return b:waiting() end, queues = false,
  },
  {
    name = "once", stray = "a_stray_wake_then_the_end_releases_a_once_wait",
    area = "once", reason = "Once init", tag = "once", held = true,
    method = function() return px.once().call end,
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
    area = "sem", reason = "Semaphore acquire", tag = "semaphore",
    method = function() return px.semaphore(0).acquire end,
    make = function() return px.semaphore(0) end,
    block = function(s) s:acquire() end, release = function(s) s:release() end,
    queued = function(s) return s:waiters() end,
    after_interrupt = function(s) assert.equal(0, s:value()) end,
  },
  {
    name = "event", stray = "a_stray_wake_then_a_set_ends_an_event_wait",
    area = "event", reason = "Event wait", tag = "event",
    method = function() return px.event().wait end,
    make = px.event, block = function(e) e:wait() end,
    release = function(e) e:set() end, wakes_all = true,
  },
  {
    name = "channel recv", stray = "a_stray_wake_then_a_send_hands_the_value_over",
    area = "chan", reason = "Channel recv", tag = "channel",
    method = function() return px.channel(0).recv end,
    make = function() return px.channel(0) end,
    block = function(ch) return (assert(ch:recv())) end,
    release = function(ch) assert.is_true(ch:trysend("v")) end,
  },
  {
    name = "channel send", stray = "a_stray_wake_then_a_recv_takes_the_sent_value",
    area = "chan", reason = "Channel send", tag = "channel",
    method = function() return px.channel(0).send end,
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
    area = "fiber", not_sync = true,
    make = function() return { go = px.event() } end,
    arm = function(h)
      h.child = px.spawn(function() h.go:wait(); return "ended" end)
      px.yield()
    end,
    block = function(h) assert.equal("ended", h.child:join()) end,
    release = function(h) h.go:set() end, wakes_all = true,
  },
}

-- The body of a waiter fiber: waits, logs tag, leaves as a waiter that got
-- it does, and returns tag.
local function waiter(k, h, log, tag)
  return function()
    k.block(h)
    log[#log + 1] = tag
    if k.leave then k.leave(h) end
    return tag
  end
end

return { kinds = kinds, waiter = waiter }
