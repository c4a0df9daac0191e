-- px.select: the first ready of several cases, on C px_select -- the
-- conformance specs of tests/c/sync/select.c, under their names.
--
-- Fibers synchronize on observable state (a fiber parked in its wait, the
-- waiters() of an object, a fiber's end), never on sleeps.
local px = require "parataxis"
local socket = require "socket"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local raised, spawn_waiting = h.raised, h.spawn_waiting

local function run(body) return px.run(body) end

-- A loopback UDP socket that can make itself readable (a datagram to itself).
local function udp_self()
  local u = assert(socket.udp())
  assert(u:setsockname("127.0.0.1", 0))
  local ip, port = u:getsockname()
  return u, function() assert(u:sendto("x", ip, port)) end
end

describe("select", function()
  it("a_ready_case_fires_without_waiting", function()
    run(function()
      local a, b = px.channel(1), px.channel(1)
      b:send(7)
      local i, v = px.select{ a:recv_case(), b:recv_case() }
      assert.equal(2, i)
      assert.equal(7, v)
      assert.equal(0, b:len())
    end)
  end)

  it("waits_for_the_first_ready_case", function()
    run(function()
      local a, b = px.channel(), px.channel()
      local f = px.spawn(function() b:send(42) end)  -- runs once the select parks
      local i, v = px.select{ a:recv_case(), b:recv_case() }
      assert.equal(2, i)
      assert.equal(42, v)
      f:join()
      assert.equal(0, a:waiters())                   -- the losing case left a
      assert.equal(0, b:waiters())
    end)
  end)

  -- Four buffered channels, each always holding a value: every select finds
  -- four ready cases, and over 10,000 rounds each fires a quarter of the
  -- time, within 10 %.
  it("ready_cases_fire_uniformly", function()
    run(function()
      local ch, cases, count = {}, {}, { 0, 0, 0, 0 }
      for i = 1, 4 do
        ch[i] = px.channel(1)
        ch[i]:send(i)
        cases[i] = ch[i]:recv_case()
      end
      local rounds = 10000
      for _ = 1, rounds do
        local i, v = px.select(cases)
        assert(v == i)
        count[i] = count[i] + 1
        ch[i]:send(i)                                -- ready again
      end
      for i = 1, 4 do
        assert.is_true(count[i] > rounds / 4 * 0.9, "case " .. i .. ": " .. count[i])
        assert.is_true(count[i] < rounds / 4 * 1.1, "case " .. i .. ": " .. count[i])
        assert.equal(i, ch[i]:tryrecv())
      end
    end)
  end)

  -- A select waits on a send, a receive, an event and a semaphore; the
  -- semaphore wins.  Then nothing of the select is left anywhere: the send's
  -- value was never delivered, no unit was taken twice, no waiter is queued.
  it("losing_cases_leave_nothing_queued", function()
    run(function()
      local a, b, s, e = px.channel(), px.channel(), px.semaphore(0), px.event()
      local f = px.spawn(function()
        assert.equal(1, a:waiters())                 -- the select waits on all four
        assert.equal(1, b:waiters())
        assert.equal(1, e:waiters())
        assert.equal(1, s:waiters())
        s:release()
      end)
      local i, ok = px.select{ a:send_case("offered"), b:recv_case(), e:wait_case(),
                               s:acquire_case() }
      assert.equal(4, i)
      assert.is_true(ok)
      f:join()
      assert.equal(0, s:value())                     -- the unit is the select's
      assert.equal(0, s:waiters())
      assert.equal(0, a:waiters())
      assert.equal(0, b:waiters())
      assert.equal(0, e:waiters())
      local v, err = a:tryrecv()                     -- the send's value never went out
      assert.is_nil(v)
      assert.equal("EBUSY", err.code)
      assert.equal(0, e:set())                       -- nobody waits on it
      assert.is_nil(next((debug.getuservalue(a))))     -- its stash holds nothing
    end)
  end)

  -- A select offers "a1" on a and "b1" on b; a receiver takes one value from
  -- a, then one from b, where a plain sender offers "plain": the receiver gets
  -- "plain", so the select's offer on b was withdrawn when a took its offer.
  it("a_losing_send_is_never_delivered", function()
    run(function()
      local a, b = px.channel(), px.channel()
      local sent_on
      local s1 = spawn_waiting(function()
        sent_on = px.select{ a:send_case("a1"), b:send_case("b1") }
      end)
      local got = {}
      local r = px.spawn(function() got[1] = a:recv(); got[2] = b:recv() end)
      local plain = px.spawn(function() b:send("plain") end)
      r:join(); plain:join(); s1:join()
      assert.equal(1, sent_on)                       -- it sent on a only
      assert.same({ "a1", "plain" }, got)
      local v, err = b:tryrecv()                     -- nothing of it left on b
      assert.is_nil(v)
      assert.equal("EBUSY", err.code)
      assert.is_nil(next((debug.getuservalue(b))))
    end)
  end)

  it("default_case_fires_when_nothing_is_ready", function()
    run(function()
      local a, s = px.channel(), px.semaphore(0)
      local cases = { a:recv_case(), s:acquire_case(), default = true }
      assert.equal("default", px.select(cases))      -- nothing ready: no park
      s:release()
      local i, ok = px.select(cases)                 -- a ready case beats the default
      assert.equal(2, i)
      assert.is_true(ok)
      assert.equal(0, s:value())
    end)
  end)

  it("default_case_works_off_fiber", function()
    local a = px.channel(1)
    local cases = { a:recv_case(), default = true }
    assert.equal("default", px.select(cases))
    assert.is_true(a:trysend(5))
    local i, v = px.select(cases)
    assert.equal(1, i)
    assert.equal(5, v)
    cases.default = nil                              -- it would have to wait
    assert.equal("ENOFIBER", raised(px.select, cases).code)
    assert.equal("default", px.select{ default = true })
  end)

  it("a_closed_channel_fires_with_closed", function()
    run(function()
      local a, b = px.channel(1), px.channel()
      a:send(9)
      a:close()
      local cases = { a:recv_case(), b:recv_case() }
      local i, v, err = px.select(cases)             -- what is buffered comes first
      assert.equal(1, i)
      assert.equal(9, v)
      assert.is_nil(err)
      i, v, err = px.select(cases)                   -- then the close, as recv says it
      assert.equal(1, i)
      assert.is_nil(v)
      assert.equal("ECLOSED", err.code)
      local rv, rerr = a:recv()
      assert.is_nil(rv)
      assert.equal(rerr.code, err.code)
      i, v, err = px.select{ a:send_case(1), b:recv_case() }   -- a send: as send says it
      assert.equal(1, i)
      assert.is_nil(v)
      assert.equal("ECLOSED", err.code)
      assert.is_nil(next((debug.getuservalue(a))))     -- the value was not kept

      a = px.channel()                               -- closed while the select waits
      local f = px.spawn(function() a:close() end)
      i, v, err = px.select{ a:recv_case(), b:recv_case() }
      assert.equal(1, i)
      assert.is_nil(v)
      assert.equal("ECLOSED", err.code)
      f:join()
    end)
  end)

  it("event_and_semaphore_cases", function()
    run(function()
      local e, s = px.event(), px.semaphore(0)
      local cases = { s:acquire_case(), e:wait_case() }
      local f = px.spawn(function() assert.equal(1, e:set()) end)  -- the select's case: one waiter
      local i, ok = px.select(cases)
      assert.equal(2, i)
      assert.is_true(ok)
      f:join()
      assert.equal(0, s:waiters())
      assert.equal(2, (px.select(cases)))            -- set: ready at once
      e:clear()
      f = px.spawn(function() s:release() end)
      assert.equal(1, (px.select(cases)))
      assert.equal(0, s:value())
      assert.equal(0, e:waiters())
      f:join()
    end)
  end)

  it("fd_cases", function()
    run(function()
      local a = px.channel()
      local u, poke = udp_self()
      local cases = { a:recv_case(), px.readable(u) }   -- an object with getfd(), or an fd
      local f = px.spawn(poke)
      local i, ok = px.select(cases)
      assert.equal(2, i)
      assert.is_true(ok)
      f:join()
      assert.equal(2, (px.select{ a:recv_case(), px.readable(u:getfd()) }))   -- still readable
      assert.equal("x", u:receive())
      f = px.spawn(function() px.notify_closing(u) end)   -- closed while it waits
      local _, v, err = px.select(cases)
      assert.is_nil(v)
      assert.equal("ECLOSED", err.code)
      f:join()
      f = px.spawn(poke)                             -- the fd is free again for a plain wait
      assert.is_true(px.wait_readable(u))
      f:join()
      i, ok = px.select{ px.writable(u), a:recv_case() }
      assert.equal(1, i)
      assert.is_true(ok)
      u:close()
      assert.equal(0, a:waiters())
    end)
  end)

  it("deadline_case_fires_when_nothing_else_does", function()
    run(function()
      local a = px.channel()
      local t0 = px.now()
      local cases = { a:recv_case(), px.deadline(t0 + 0.02), px.deadline(t0 + 0.01) }
      local i, ok = px.select(cases)
      assert.equal(3, i)                             -- the earliest one
      assert.is_true(ok)
      assert.is_true(px.now() >= t0 + 0.01)
      assert.is_true((px.select(cases)) >= 2)        -- passed: ready at once
      assert.equal(0, a:waiters())
      px.sleep(0.001)                                -- no scope of the deadline is left
      assert.equal(1, (px.select{ px.deadline(-1), a:recv_case() }))   -- long past
      local r = px.timeout(0.005, px.select, { px.deadline(math.huge) })
      assert.is_nil(r)                               -- never
    end)
  end)

  it("a_scope_ends_the_wait_and_nothing_is_taken", function()
    run(function()
      local a, s = px.channel(), px.semaphore(0)
      local r, err = px.timeout(0.001, px.select, { a:send_case(1), s:acquire_case() })
      assert.is_nil(r)
      assert.equal("ETIMEDOUT", err.code)
      assert.equal(0, s:waiters())
      assert.equal(0, a:waiters())
      assert.equal("EBUSY", select(2, a:tryrecv()).code)   -- nothing sent
      assert.is_nil(next((debug.getuservalue(a))))
      local tok = px.token()
      local f = spawn_waiting(function()
        return px.with_cancel(tok, px.select, { a:recv_case(), s:acquire_case() })
      end)
      tok:cancel()
      s:release()                                    -- comes after the cancel: not taken
      local _, e2 = f:join()
      assert.equal("ECANCELED", e2.code)
      assert.equal(1, s:value())
      assert.equal(0, a:waiters())
    end)
  end)

  -- Lua's switched-off case is `false` in the list (Go's nil channel).
  it("cases_without_an_object_never_fire", function()
    run(function()
      local a = px.channel(1)
      a:send(1)
      local on = false
      local cases = { on and a:recv_case(), false, px.deadline(px.now() + 0.001) }
      assert.equal(3, (px.select(cases)))
      assert.equal(1, a:len())
      local r, err = px.timeout(0.001, px.select, { false, false })
      assert.is_nil(r)
      assert.equal("ETIMEDOUT", err.code)
      assert.equal("default", px.select{ false, default = true })
    end)
  end)

  -- A select sending and a select receiving meet on an unbuffered channel:
  -- the value the one sent is the value the other received, on one channel.
  it("two_selects_meet_on_a_channel", function()
    run(function()
      local a, b = px.channel(), px.channel()
      for first = 0, 1 do
        local received_on, got
        local function receiver()
          received_on, got = px.select{ a:recv_case(), b:recv_case() }
        end
        local f
        if first == 1 then f = spawn_waiting(receiver)
        else f = px.spawn(receiver) end            -- runs after this select parks
        local sent_on = px.select{ a:send_case(11), b:send_case(12) }
        f:join()
        assert.equal(sent_on, received_on)
        assert.equal(10 + sent_on, got)
      end
      assert.is_nil(next((debug.getuservalue(a))))
      assert.is_nil(next((debug.getuservalue(b))))
    end)
  end)

  it("hostile_arguments", function()
    run(function()
      local a = px.channel()
      local function code(...) return raised(...).code end
      assert.equal("EINVAL", code(px.select))
      assert.equal("EINVAL", code(px.select, "cases"))
      assert.equal("EINVAL", code(px.select, { 1 }))
      assert.equal("EINVAL", code(px.select, { {} }))
      assert.equal("EINVAL", code(px.select, { a }))
      assert.equal("EINVAL", code(px.select, { true }))
      assert.equal("EINVAL", code(px.select, { default = 1 }))
      local forged = a:recv_case()
      forged[2] = px.event()                         -- a case whose object is not a channel
      assert.equal("EINVAL", code(px.select, { forged }))
      forged[1] = 99
      assert.equal("EINVAL", code(px.select, { forged }))
      assert.equal("EINVAL", code(a.send_case, a))   -- nil cannot be sent
      assert.equal("EINVAL", code(a.recv_case, px.event()))
      assert.equal("EINVAL", code(px.event().wait_case, a))
      assert.equal("EINVAL", code(px.semaphore().acquire_case, a))
      assert.equal("EINVAL", code(px.readable, -1))
      assert.equal("EINVAL", code(px.readable, "0"))
      assert.equal("EINVAL", code(px.writable, {}))
      assert.equal("EINVAL", code(px.deadline, "soon"))
      assert.equal("EINVAL", code(px.deadline, 0 / 0))
      local fd = udp_self()
      local n = fd:getfd()
      fd:close()                                     -- not open now
      assert.equal("EINVAL", code(px.select, { px.readable(n), a:send_case(1) }))
      assert.is_nil(next((debug.getuservalue(a))))     -- the send's stash was undone
      -- a refused select changed nothing: the channel still works
      local f = px.spawn(function() a:send("ok") end)
      assert.equal("ok", a:recv())
      f:join()
      -- no cases: waits until a scope ends it
      assert.equal("ETIMEDOUT", select(2, px.timeout(0.001, px.select, {})).code)
      -- a coroutine inside a fiber cannot wait, but a default never waits
      local co = coroutine.wrap(function()
        assert.equal("ENOFIBER", code(px.select, { a:recv_case() }))
        return px.select{ a:recv_case(), default = true }
      end)
      assert.equal("default", co())
    end)
  end)

  -- The binding's own: a wake nobody granted (px._wake) finds the select's
  -- re-call unanswered, and it parks again, its cases still queued.
  it("a_stray_wake_keeps_the_select_waiting", function()
    run(function()
      local ch, ev = px.channel(), px.event()
      local f = spawn_waiting(function()
        return px.select{ ch:recv_case(), ev:wait_case() }
      end)
      for _ = 1, 3 do
        assert.is_true(px._wake(f:id()))
        px.yield(); px.yield()
        assert.is_false(f:done())
        assert.equal(1, ch:waiters())
        assert.equal(1, ev:waiters())
      end
      ch:send("v")
      local i, v = f:join()
      assert.equal(1, i)
      assert.equal("v", v)
      assert.equal(0, ev:waiters())
    end)
  end)
end)
