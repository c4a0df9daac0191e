-- The virtual clock: px.run_with({ clock = px.VirtualClock() }, main, ...)
-- runs on a clock of the run's own, which stands still while any fiber can
-- run and jumps to the next deadline when every fiber waits on time alone;
-- while something from outside may still come (an fd wait, a pool job) the
-- run waits in the kernel and the clock moves with real time.  px.now(),
-- px.sleep, timeouts and deadlines follow it.  The C names of
-- tests/behaviours.txt ("clock." group).

local px = require "parataxis"
local socket = require "socket"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local raised = h.raised

local VIRTUAL = { clock = px.VirtualClock() }

local function close_to(want, got, eps)
  assert.is_true(math.abs(want - got) < (eps or 1e-6), string.format("want %.9f, got %.9f", want, got))
end

describe("clock", function()
  it("now_stands_still_while_fibers_run", function()
    px.run_with(VIRTUAL, function()
      local t0 = px.now()
      local other = px.spawn(function() for _ = 1, 100 do px.yield() end end)
      local cpu = os.clock()
      while os.clock() - cpu < 0.02 do px.yield() end   -- 20 ms of real work
      other:join()
      assert.equal(t0, px.now())               -- not a nanosecond passed
      px.sleep(0.5)
      close_to(t0 + 0.5, px.now())             -- a sleep moves it exactly
      assert.equal("ETIMEDOUT", select(2, px.timeout(1, function() px.event():wait() end)).code)
      close_to(t0 + 1.5, px.now())
    end)
    -- off the run, px.now() is the real clock again
    local a = px.now()
    h.spin(0.002)
    assert.is_true(px.now() > a)
  end)

  it("ten_thousand_hour_long_sleeps_take_no_real_time", function()
    local real0 = px.now()
    local elapsed = px.run_with(VIRTUAL, function()
      local t0 = px.now()
      local done = 0
      for _ = 1, 10000 do
        px.spawn(function() px.sleep(3600); done = done + 1 end)
      end
      px.sleep(3600 + 1)                         -- after every one of them
      assert.equal(10000, done)
      return px.now() - t0
    end)
    close_to(3601, elapsed, 1e-3)
    assert.is_true(px.now() - real0 < 1, "took " .. (px.now() - real0) .. " s of real time")
  end)

  it("a_timeout_racing_a_grant_is_decided_once", function()
    -- the release a microsecond before the timeout, on the same virtual
    -- instant, and a microsecond after: the waiter gets the permit or times
    -- out, never both, and no permit is lost; either fiber may be spawned first
    local outcomes = {}
    for round = 1, 300 do
      local offset = ({ -1e-6, 0, 1e-6 })[round % 3 + 1]
      px.run_with(VIRTUAL, function()
        local sem = px.semaphore(0)
        local t0 = px.now()
        local function wait() return px.timeout(1, function() sem:acquire(); return true end) end
        local function release() px.sleep(1 + offset); sem:release() end
        local waiter, releaser
        if round % 2 == 0 then
          waiter = px.spawn(wait); releaser = px.spawn(release)
        else
          releaser = px.spawn(release); waiter = px.spawn(wait)
        end
        local got, err = waiter:join()
        releaser:join()
        close_to(t0 + 1 + offset, px.now())    -- the later of the two
        if got then
          assert.is_nil(err)
          assert.equal(0, sem:value())
        else
          assert.equal("ETIMEDOUT", err.code)
          assert.equal(1, sem:value())           -- the permit stayed
        end
        outcomes[offset] = outcomes[offset] or {}
        outcomes[offset][got and "granted" or "timed out"] = true
      end)
    end
    assert.same({ granted = true }, outcomes[-1e-6])
    assert.same({ ["timed out"] = true }, outcomes[1e-6])
  end)

  it("a_deadlock_is_still_reported", function()
    local real0 = px.now()
    local err = raised(px.run_with, VIRTUAL, function()
      px.spawn_named("sleeper", function() px.sleep(3600) end)   -- time passes first
      px.event():wait()                                          -- then nothing can come
    end)
    assert.equal("EDEADLK", err.code)
    assert.truthy(err.message:find('parked on "Event wait"', 1, true), err.message)
    assert.is_true(px.now() - real0 < 10)
  end)

  it("an_unknown_clock_is_refused", function()
    local main = function() return "ran" end
    for _, bad in ipairs{ "virtual", 1, true, {}, px.VirtualClock } do
      local err = raised(px.run_with, { clock = bad }, main)
      assert.equal("EINVAL", err.code)
      assert.truthy(err.message:find("unknown clock", 1, true), err.message)
    end
    assert.equal("EINVAL", raised(px.run_with, { clok = px.VirtualClock() }, main).code)
    assert.equal("EINVAL", raised(px.run_with, "virtual", main).code)
    assert.equal("ran", px.run_with({ clock = px.RealClock() }, main))
    assert.equal("ran", px.run_with(nil, main))
    assert.equal("ran", px.run_with({}, main))
  end)

  it("waits_in_real_time_while_a_pool_job_runs", function()
    -- the job: px.read_file of a FIFO, which its writer opens ~50 ms later
    local fifo = os.tmpname()
    os.remove(fifo)
    assert(os.execute("mkfifo " .. fifo))
    local real0 = px.now()
    local reader_at, sleeper_at, data = px.run_with(VIRTUAL, function()
      local t0 = px.now()
      os.execute(string.format("sh -c 'sleep 0.05; echo x > %s' </dev/null >/dev/null 2>&1 &", fifo))
      -- (bounded: the clock moves with real time while the job runs)
      local reader = px.spawn(function()
        local d = assert(px.timeout(30, px.read_file, fifo))
        return px.now() - t0, d
      end)
      local sleeper = px.spawn(function() px.sleep(3600); return px.now() - t0 end)
      local r, d = reader:join()
      return r, sleeper:join(), d
    end)
    os.remove(fifo)
    assert.equal("x\n", data)
    -- real time, not a jump (the clock moves only while the run waits in the
    -- kernel, which begins once os.execute returned: part of the 50 ms went)
    assert.is_true(reader_at >= 0.01 and reader_at < 60, tostring(reader_at))
    close_to(3600, sleeper_at, 1e-3)
    assert.is_true(px.now() - real0 < 30)
  end)

  it("waits_in_real_time_while_an_fd_wait_is_pending", function()
    local srv = assert(socket.bind("127.0.0.1", 0))
    local _, port = srv:getsockname()
    local real0 = px.now()
    local reader_at, sleeper_at = px.run_with(VIRTUAL, function()
      local t0 = px.now()
      -- a connection comes ~50 ms of real time later
      os.execute(string.format("bash -c 'sleep 0.05; exec 3<>/dev/tcp/127.0.0.1/%d; sleep 1' </dev/null >/dev/null 2>&1 &", port))
      local reader = px.spawn(function()
        assert(px.timeout(30, px.wait_readable, srv))
        return px.now() - t0
      end)
      local sleeper = px.spawn(function() px.sleep(3600); return px.now() - t0 end)
      return reader:join(), sleeper:join()
    end)
    srv:close()
    assert.is_true(reader_at >= 0.01 and reader_at < 60, tostring(reader_at))   -- as above
    close_to(3600, sleeper_at, 1e-3)
    assert.is_true(px.now() - real0 < 30)
  end)
end)
