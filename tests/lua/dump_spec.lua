-- The dump: px.dump([file]) lists every live fiber of the run -- number, id,
-- name, state, what it waits for and who holds it, its fd, deadline, how long
-- it waited, and its coroutine's traceback -- and writes C's table;
-- px.dump_signal(sig) makes a signal write that table to stderr, the
-- tracebacks included (the run's describe hook).  The C names of
-- tests/behaviours.txt ("dump." group).
--
-- The signal's dumps run in a child lua5.4 whose stderr goes to a file: the
-- child polls that file for the table (an event, not a sleep) and ends.

local px = require "parataxis"
local socket = require "socket"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local yield_until = h.yield_until

local function by_number(recs)
  local t = {}
  for _, r in ipairs(recs) do t[r.number] = r end
  return t
end

local function slurp(path)
  local f = io.open(path)
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

-- Runs `code` (given ERR, the path of its own stderr, and PID_OF, a function
-- returning its pid) in a child lua5.4; its stdout, its stderr.
local function child(code)
  local src, err = os.tmpname(), os.tmpname()
  local f = assert(io.open(src, "w"))
  f:write(h.with_paths(string.format("local ERR = %q ", err)))
  f:write('local function PID_OF() return (assert(io.open("/proc/self/stat")):read("l"):match("^(%d+)")) end\n')
  f:write('local function DUMPED() local f = io.open(ERR); local s = f and f:read("a") or ""; if f then f:close() end; return s:find("live)", 1, true) ~= nil end\n')
  f:write(code)
  f:close()
  local p = assert(io.popen(string.format("timeout 60 lua5.4 %q 2>%q", src, err)))
  local out = p:read("a")
  p:close()
  local stderr = slurp(err)
  os.remove(src)
  os.remove(err)
  return out, stderr
end

describe("dump", function()
  it("lists_every_live_fiber_with_its_state", function()
    px.run(function()
      local ev = px.event()
      local ended = px.spawn(function() end)
      local parked = px.spawn_named("parked", function() ev:wait() end)
      px.yield()                               -- `ended` ends, `parked` parks
      local ready = px.spawn_named("ready", function() end)
      local recs = px.dump(false)
      assert.equal(3, #recs)                   -- main, parked, ready: no ended fiber
      local n = by_number(recs)
      assert.is_nil(n[ended:number()])
      assert.equal("running", n[1].state)
      assert.equal(px.self(), n[1].id)
      assert.equal("parked", n[parked:number()].state)
      assert.equal(parked:id(), n[parked:number()].id)
      assert.equal("parked", n[parked:number()].name)
      assert.equal("ready", n[ready:number()].state)
      assert.equal("ready", n[ready:number()].name)
      assert.same({ 1, 3, 4 }, { recs[1].number, recs[2].number, recs[3].number })  -- spawn order
      -- the table, to a file
      local path = os.tmpname()
      local f = assert(io.open(path, "w"))
      assert.equal(3, #px.dump(f))
      f:close()
      local text = slurp(path)
      os.remove(path)
      assert.truthy(text:find('fiber 1 "[^"]*": running'), text)
      assert.truthy(text:find('fiber 3 "parked": parked', 1, true), text)
      assert.truthy(text:find('fiber 4 "ready": ready', 1, true), text)
      assert.truthy(text:find("(3 live)", 1, true), text)
      ev:set()
    end)
    -- off a run: nothing to dump
    assert.equal("ENOFIBER", h.raised(px.dump).code)
  end)

  it("names_what_each_fiber_waits_for_and_who_holds_it", function()
    local srv = assert(socket.bind("127.0.0.1", 0))
    px.run(function()
      local m, ev = px.mutex(), px.event()
      m:set_name("accounts")
      ev:set_name("go")
      local holder = px.spawn_named("holder", function()
        m:lock()
        px.timeout(30, function() ev:wait() end)
        m:unlock()
      end)
      local waiter = px.spawn_named("waiter", function() m:lock(); m:unlock() end)
      local reader = px.spawn_named("reader", function() return px.wait_readable(srv) end)
      yield_until(function() return m:waiters() == 1 and ev:waiters() == 1 end)
      px.yield()                               -- the reader parks too
      local t0 = px.now()
      local n = by_number(px.dump(false))
      local w = n[waiter:number()]
      assert.equal("parked", w.state)
      assert.equal("Mutex lock", w.reason)
      assert.equal("mutex", w.kind)
      assert.equal("accounts", w.object_name)
      assert.same({ holder:number() }, w.holders)
      assert.is_nil(w.deadline)
      assert.is_nil(w.fd)
      local e = n[holder:number()]
      assert.equal("Event wait", e.reason)
      assert.equal("event", e.kind)
      assert.equal("go", e.object_name)
      assert.same({}, e.holders)               -- an event has no holder
      assert.is_true(e.deadline > t0 + 25 and e.deadline <= t0 + 30, tostring(e.deadline))
      local r = n[reader:number()]
      assert.equal("parked", r.state)
      assert.equal(srv:getfd(), r.fd)
      assert.equal("readable", r.events)
      local mine = n[1]                        -- running: no wait
      assert.is_nil(mine.reason)
      assert.same({}, mine.holders)
      -- the table says the same
      local path = os.tmpname()
      local f = assert(io.open(path, "w"))
      px.dump(f)
      f:close()
      local text = slurp(path)
      os.remove(path)
      assert.truthy(text:find('fiber 3 "waiter": parked for [%d.]+ s on "Mutex lock", waits on mutex "accounts"@0x%x+ held by fiber 2 "holder"'), text)
      assert.truthy(text:find('fiber 2 "holder": parked for [%d.]+ s on "Event wait", waits on event "go"@0x%x+, deadline in %d+%.%d+ s'), text)
      assert.truthy(text:find('fiber 4 "reader": parked for [%d.]+ s on "[^"]+", fd ' .. math.tointeger(srv:getfd()) .. ' readable'), text)
      px.notify_closing(srv)                   -- the reader's wait ends (ECLOSED)
      assert.is_nil(reader:join())
      ev:set()
      waiter:join()
    end)
    srv:close()
  end)

  it("shows_where_each_fiber_is", function()
    local function deep_in_work(ev) ev:wait() end
    local function worker(ev) deep_in_work(ev); return true end
    local function not_started_yet() end
    px.run(function()
      local ev = px.event()
      local f = px.spawn(worker, ev)
      px.yield()
      local g = px.spawn(not_started_yet)
      local n = by_number(px.dump(false))
      local tb = n[f:number()].traceback
      assert.truthy(tb:find("stack traceback:", 1, true), tb)
      assert.truthy(tb:find("deep_in_work", 1, true), tb)
      -- the fiber's own function, which Lua names by where it is (C called it)
      local d = debug.getinfo(worker, "S")
      assert.truthy(tb:find("in function <" .. d.short_src .. ":" .. d.linedefined .. ">", 1, true), tb)
      -- the caller's own: in px.dump
      assert.truthy(n[1].traceback:find("in function 'parataxis[%w.]*dump'"), n[1].traceback)
      -- one not started yet: its function
      local d = debug.getinfo(not_started_yet, "S")
      assert.equal("not started: function <" .. d.short_src .. ":" .. d.linedefined .. ">",
                   n[g:number()].traceback)
      ev:set()
      assert.is_true(f:join())
    end)
  end)

  it("tells_how_long_each_fiber_waited", function()
    -- on a virtual clock the waits are exact: 5 s and 2 s, whatever the machine does
    px.run_with({ clock = px.VirtualClock() }, function()
      local ev = px.event()
      local early = px.spawn_named("early", function() ev:wait() end)
      px.sleep(3)
      local late = px.spawn_named("late", function() ev:wait() end)
      px.sleep(2)
      local n = by_number(px.dump(false))
      assert.is_true(math.abs(n[early:number()].waited - 5) < 0.01, tostring(n[early:number()].waited))
      assert.is_true(math.abs(n[late:number()].waited - 2) < 0.01, tostring(n[late:number()].waited))
      assert.is_nil(n[1].waited)               -- running
      ev:set()
    end)
    -- on the real clock: at least the time that passed
    px.run(function()
      local ev = px.event()
      local f = px.spawn(function() ev:wait() end)
      px.yield()
      local t0 = px.now()
      px.sleep(0.1)
      local waited = by_number(px.dump(false))[f:number()].waited
      assert.is_true(waited >= 0.09 and waited <= px.now() - t0 + 0.01, tostring(waited))
      ev:set()
    end)
  end)

  it("from_a_signal_while_fibers_run", function()
    local out, err = child([[
      local px = require "parataxis"
      local pid = PID_OF()
      px.dump_signal("SIGUSR1")
      local done = false
      local function spin_in_place() while not done do px.yield() end end
      px.run(function()
        px.spawn_named("spinner", function() spin_in_place() end)
        px.yield()                             -- the spinner runs from now on
        os.execute("kill -USR1 " .. pid)
        local deadline = px.now() + 30
        while not DUMPED() and px.now() < deadline do px.yield() end
        done = true
      end)
      px.dump_signal(0)
      print(DUMPED() and "dumped" or "no dump")
    ]])
    assert.equal("dumped\n", out, err)
    assert.truthy(err:find("parataxis: the fibers of scheduler", 1, true), err)
    -- main, never shown before, has no name yet (default names are set when
    -- something of the binding shows them): its number, and its traceback
    assert.truthy(err:find('fiber 1: ready', 1, true), err)         -- between turns
    assert.truthy(err:find('fiber 2 "spinner": ready', 1, true), err)
    assert.truthy(err:find("spin_in_place", 1, true), err)          -- its traceback
    assert.truthy(err:find("(2 live)", 1, true), err)
  end)

  it("from_a_signal_while_the_run_waits_in_the_kernel", function()
    local out, err = child([[
      local px = require "parataxis"
      local socket = require "socket"
      local pid = PID_OF()
      px.dump_signal(10)      -- SIGUSR1 on Linux, by number
      local srv = assert(socket.bind("127.0.0.1", 0))
      local _, port = srv:getsockname()
      -- the signal comes while every fiber waits; the connection that ends
      -- main's wait only once the table is written
      os.execute(string.format([=[bash -c 'sleep 0.05; kill -USR1 %s; for i in $(seq 3000); do grep -q "live)" %s && break; sleep 0.01; done; exec 3<>/dev/tcp/127.0.0.1/%d' >/dev/null 2>&1 &]=], pid, ERR, port))
      px.run(function()
        local ev = px.event()
        local function wait_for_go() ev:wait() end
        px.spawn_named("waiter", function() wait_for_go() end)
        px.wait_readable(srv)
        ev:set()
      end)
      print(DUMPED() and "dumped" or "no dump")
    ]])
    assert.equal("dumped\n", out, err)
    assert.truthy(err:find('fiber 1: parked for [%d.]+ s on "[^"]+", fd %d+ readable'), err)
    assert.truthy(err:find('fiber 2 "waiter": parked for [%d.]+ s on "Event wait"'), err)
    assert.truthy(err:find("wait_for_go", 1, true), err)
  end)
end)
