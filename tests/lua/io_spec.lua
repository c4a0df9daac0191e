-- Fibers doing I/O: px.wait_readable / wait_writable / notify_closing, the
-- px.socket wrapper over LuaSocket, px.serve, px.getaddrinfo and the files on
-- the blocking pool.  Names mirror the C suite (tests/c/io) and
-- tests/python/test_io.py where the behaviour is the same; the rest are the
-- Lua binding's own (LuaSocket's return conventions, the collector, os.exit).
--
-- Every wait here is ended by an event the spec makes (a byte sent, a close,
-- a scope's deadline), never by a sleep that hopes the other side is done.
local px = require "parataxis"
local socket = require "socket"
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")
local raised, yield_until, with_paths = h.raised, h.yield_until, h.with_paths

-- On a fiber: spawns fn(...) and yields once; the fiber must be parked then.
local function spawn_waiting(fn, ...)
  local args = table.pack(...)
  return h.spawn_waiting(function() return fn(table.unpack(args, 1, args.n)) end)
end

-- Lets every runnable fiber run (and park) a few times over.
local function settle(n)
  for _ = 1, n or 3 do px.yield() end
end

-- A listening socket on a free loopback port, and the port.
local function listener(backlog)
  local l = assert(px.socket.bind("127.0.0.1", 0, backlog))
  local _, port = l:getsockname()
  return l, tonumber(port)
end

-- On a fiber: a connected pair of wrapped TCP sockets (client, server end).
local function pair()
  local l, port = listener()
  local c = assert(px.socket.connect("127.0.0.1", port))
  local s = assert(l:accept())
  l:close()
  return c, s
end

-- Fills s's send side until a send would wait; what was sent.
local function fill(s)
  local block, total = s:gettimeout()
  s:settimeout(0)
  local chunk, sent = string.rep("f", 1 << 16), 0
  repeat
    local last, err, part = s:send(chunk)
    sent = sent + (last or part or 0)
  until err == "timeout"
  s:settimeout(block >= 0 and block or nil)
  s:settimeout(total >= 0 and total or nil, "t")
  return sent
end

-- n pseudo-random bytes, the same for the same seed (no global state touched).
local function bytes(n, seed)
  local t, x = {}, seed * 2654435761 % 4294967296 + 1
  for i = 1, n do
    x = (x * 1103515245 + 12345) % 2147483648
    t[i] = string.char(x >> 16 & 0xff)
  end
  return table.concat(t)
end

-- A wrapped UDP socket on fd number `fd`, just freed: the kernel gives the
-- lowest free number, so the sockets taking the lower ones are made, then closed.
local function udp_on(fd)
  local extra = {}
  for _ = 1, 64 do
    local u = assert(px.socket.udp4())   -- udp() makes its fd only when first used
    if u:getfd() == fd then
      for _, x in ipairs(extra) do x:close() end
      return u
    end
    extra[#extra + 1] = u
  end
  error("fd " .. fd .. " was not reused")
end

local function tmpname()
  local p = os.tmpname()
  os.remove(p)
  return p
end

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

local function mkfifo()
  local p = tmpname()
  assert(os.execute("mkfifo " .. p))
  return p
end

-- This process's pid, from /proc (io.open forks nothing).
local function pid()
  local f = assert(io.open("/proc/self/stat"))
  local n = f:read("n")
  f:close()
  return n
end

-- Runs the Lua chunk `code` in a child lua5.4 (this run's paths) under a
-- 30 s watchdog, with `limit` open files and the environment assignments
-- `env` ("NAME=value ...") if given; its output, with a last line "status=N".
local function child(code, limit, env)
  local script = tmpname()
  local f = assert(io.open(script, "w"))
  f:write(with_paths(code))
  f:close()
  local ul = limit and string.format(
    "ulimit -n %d 2>/dev/null || ulimit -n $(ulimit -Hn); ", limit) or ""
  local p = assert(io.popen(string.format("%s%s timeout -s KILL 30 lua5.4 %s 2>&1; echo \"status=$?\"",
    ul, env or "", script)))
  local out = p:read("a")
  p:close()
  os.remove(script)
  return out
end

describe("io", function()
  -- -- px.wait_readable, px.wait_writable, px.notify_closing ---------------------------

  it("read_waits_for_data_and_returns_what_is_there", function()
    px.run(function()
      local c, s = pair()
      local f = spawn_waiting(function()
        assert.is_true(px.wait_readable(s))
        s:settimeout(0)
        return s:receive(100)       -- LuaSocket's "what is there": the partial
      end)
      c:send("abc")
      assert.same({ nil, "timeout", "abc" }, { f:join() })
      c:close(); s:close()
    end)
  end)

  it("wait_fd_wakes_a_reader_when_data_comes", function()
    px.run(function()
      local c, s = pair()
      local f = spawn_waiting(px.wait_readable, s:getfd())
      c:send("!")
      assert.is_true(f:join())
      assert.equal("!", s:receive(1))
      c:close(); s:close()
    end)
  end)

  it("wait_fd_wakes_a_writer_when_there_is_room", function()
    px.run(function()
      local c, s = pair()
      local sent = fill(c)
      local f = spawn_waiting(px.wait_writable, c)
      assert(s:receive(sent))            -- room again
      assert.is_true(f:join())
      c:close(); s:close()
    end)
  end)

  it("a_second_waiter_in_the_same_direction_is_ebusy", function()
    px.run(function()
      local c, s = pair()
      local f = spawn_waiting(px.wait_readable, s)
      assert.equal("EBUSY", raised(px.wait_readable, s).code)
      assert.is_true(px.wait_writable(s))     -- the other direction is free
      c:send("x")
      assert.is_true(f:join())
      c:close(); s:close()
    end)
  end)

  it("a_second_reader_of_one_fd_gets_ebusy", function()
    px.run(function()
      local c, s = pair()
      local first = spawn_waiting(function() return s:receive(2) end)
      local second = px.spawn(function() return s:receive(2) end)
      settle()
      assert.equal("EBUSY", raised(second.join, second).code)
      c:send("ok")
      assert.equal("ok", first:join())
      c:close(); s:close()
    end)
  end)

  it("a_scope_ends_a_wait_and_leaves_nothing_registered", function()
    px.run(function()
      local c, s = pair()
      local r, err = px.timeout(0.02, px.wait_readable, s)
      assert.is_nil(r)
      assert.equal("ETIMEDOUT", err.code)
      local tok = px.token()
      local f = spawn_waiting(function() return px.with_cancel(tok, px.wait_readable, s) end)
      tok:cancel()
      local _, cerr = f:join()
      assert.equal("ECANCELED", cerr.code)
      -- nothing left behind: a new waiter is no second waiter
      local g = spawn_waiting(px.wait_readable, s)
      c:send("x")
      assert.is_true(g:join())
      c:close(); s:close()
    end)
  end)

  it("a_stray_wake_does_not_end_an_fd_wait", function()
    px.run(function()
      local c, s = pair()
      local f = spawn_waiting(function() return s:receive(1) end)
      assert.is_true(px._wake(f:id()))       -- a wake that is not the fd's
      settle()
      assert.is_false(f:done())             -- parked again
      c:send("q")
      assert.equal("q", f:join())
      c:close(); s:close()
    end)
  end)

  it("a_busy_run_does_not_starve_io", function()
    px.run(function()
      local c, s = pair()
      local got
      local reader = spawn_waiting(function() got = s:receive(2) end)
      c:send("go")
      yield_until(function() return got end)  -- never parks: yields only
      assert.equal("go", got)
      reader:join()
      c:close(); s:close()
    end)
  end)

  it("an_fd_waiter_is_not_a_deadlock", function()
    -- Every fiber waits on an fd; the byte comes from another process.
    local l, port = listener()
    local code = with_paths(string.format(
      "local s = require'socket'.connect('127.0.0.1', %d) s:send('late') s:close()", port))
    assert(os.execute(string.format("(sleep 0.05; lua5.4 -e %q) >/dev/null 2>&1 &", code)))
    local got = px.run(function()
      l:settimeout(20)
      local s = assert(l:accept())
      local data = s:receive("*a")
      s:close()
      return data
    end)
    assert.equal("late", got)
    l:close()
  end)

  it("notify_closing_wakes_every_waiter_with_eclosed", function()
    px.run(function()
      local c, s = pair()
      fill(s)
      local r = spawn_waiting(px.wait_readable, s)
      local w = spawn_waiting(px.wait_writable, s)
      assert.is_true(px.notify_closing(s:getfd()))
      for _, f in ipairs({ r, w }) do
        local ok, err = f:join()
        assert.is_nil(ok)
        assert.is_true(px.is_error(err, "ECLOSED"))
      end
      c:close(); s:close()
    end)
  end)

  it("a_closed_fd_of_any_number_is_einval", function()
    local t = socket.tcp4()              -- tcp() makes its fd only when bound or connected
    local fd = t:getfd()
    t:close()
    px.run(function()
      for _, n in ipairs({ fd, 65535, 1 << 30, math.maxinteger, -1 }) do
        assert.equal("EINVAL", raised(px.wait_readable, n).code)
        assert.equal("EINVAL", raised(px.wait_writable, n).code)
      end
      assert.equal("EINVAL", raised(px.wait_readable, t).code)    -- getfd() -1
      assert.equal("EINVAL", raised(px.wait_readable, "3").code)
    end)
  end)

  it("a_regular_file_is_enotsup_and_a_bad_fd_einval", function()
    -- Lua's files hide their fd: the lowest free number, just freed, is the
    -- file's; /proc confirms it.
    local path = tmpname()
    local t = socket.tcp4()
    local n = t:getfd()
    t:close()
    local f = assert(io.open(path, "w"))
    local p = assert(io.popen(string.format("readlink /proc/%d/fd/%d", pid(), n)))
    local target = p:read("l")
    p:close()
    assert.equal(path, target)
    px.run(function()
      assert.equal("ENOTSUP", raised(px.wait_readable, n).code)
      assert.equal("ENOTSUP", raised(px.wait_writable, n).code)
      assert.equal("EINVAL", raised(px.wait_readable, 1 << 30).code)
    end)
    f:close()
    os.remove(path)
  end)

  it("a_reused_fd_number_gets_no_stale_wake", function()
    px.run(function()
      local c, s = pair()
      local fd = s:getfd()
      local f = spawn_waiting(px.wait_readable, fd)
      px.notify_closing(fd)
      local ok, err = f:join()
      assert.is_nil(ok)
      assert.equal("ECLOSED", err.code)
      s:unwrap():close()                 -- the number is free: the next socket's
      local u = udp_on(fd)
      assert(u:setsockname("127.0.0.1", 0))
      local g = spawn_waiting(px.wait_readable, u)
      c:send("to the old socket")        -- wakes nobody
      settle()
      assert.is_false(g:done())
      local ip, port = u:getsockname()
      local v = assert(px.socket.udp())
      assert(v:sendto("new", ip, port))
      assert.is_true(g:join())
      assert.equal("new", u:receive())
      u:close(); v:close(); c:close()
    end)
  end)

  it("a_socket_closed_after_its_waiter_was_woken_touches_not_the_fds_next_owner", function()
    px.run(function()
      local c, s = pair()
      local fd = s:getfd()
      local f = spawn_waiting(function() return s:receive(4) end)
      c:send("wake")                     -- f's wake is on its way (seen or not yet),
      s:close()                          -- and its socket is closed before f runs again
      local u = udp_on(fd)               -- and its number reused
      assert(u:setsockname("127.0.0.1", 0))
      assert.same({ nil, "closed", "" }, { f:join() })
      -- the new owner is untouched: a wait on it works as if nothing happened
      local g = spawn_waiting(function() return u:receive() end)
      local ip, port = u:getsockname()
      local v = assert(px.socket.udp())
      assert(v:sendto("mine", ip, port))
      assert.equal("mine", g:join())
      u:close(); v:close(); c:close()
    end)
  end)

  -- -- Scopes mid-call ----------------------------------------------------------

  it("a_scope_ending_px_recv_loses_no_byte", function()
    px.run(function()
      local c, s = pair()
      c:send("abc")                      -- a part of what receive waits for
      local r, err = px.timeout(0.05, s.receive, s, 10)
      assert.is_nil(r)
      assert.equal("ETIMEDOUT", err.code)
      c:send("defghij")
      assert.equal("abcdefghij", s:receive(10))
      c:close(); s:close()
    end)
  end)

  it("a_scope_ending_px_write_returns_the_count_written", function()
    px.run(function()
      local c, s = pair()
      local data = bytes(4 << 20, 1)
      local r, err = px.timeout(0.05, c.send, c, data)   -- nobody reads: the scope ends it
      assert.is_nil(r)
      assert.equal("ETIMEDOUT", err.code)
      c:shutdown("send")
      local got = s:receive("*a")
      -- what the reader gets is exactly a prefix: no byte twice, none lost
      assert.is_true(#got > 0 and #got < #data)
      assert.is_true(data:sub(1, #got) == got)
      c:close(); s:close()
    end)
  end)

  it("a_scope_ending_px_connect_leaves_the_socket_to_close", function()
    -- A listener whose backlog is full leaves a TCP connect in SYN_SENT.
    px.run(function()
      local l, port = listener(0)
      local held, ended = {}, false
      for _ = 1, 16 do
        local s = assert(px.socket.tcp())
        held[#held + 1] = s
        local ok, err = px.timeout(0.05, s.connect, s, "127.0.0.1", port)
        if not ok and px.is_error(err, "ETIMEDOUT") then ended = true; break end
      end
      if ended then
        assert.is_true(held[#held]:getfd() >= 0)      -- left connecting: ours to close
      end
      for _, s in ipairs(held) do assert.equal(1, s:close()) end
      l:close()
      if not ended then pending("the kernel accepted every connection: no full backlog here") end
    end)
  end)

  -- -- Sockets ----------------------------------------------------------------------

  it("px_accept_waits_for_a_connection", function()
    px.run(function()
      local l, port = listener()
      local f = spawn_waiting(function() return l:accept() end)
      local c = assert(px.socket.connect("127.0.0.1", port))
      local s = f:join()
      assert.equal("parataxis.socket", getmetatable(s).__name)
      local ip, port_ = c:getsockname()
      local pip, pport = s:getpeername()
      assert.same({ ip, tonumber(port_) }, { pip, tonumber(pport) })
      s:close(); c:close(); l:close()
    end)
  end)

  it("px_connect_and_px_accept_make_a_connection_or_say_why_not", function()
    px.run(function()
      local c, s = pair()
      c:send("hello\n")
      assert.equal("hello", s:receive())
      c:close(); s:close()
      local l, port = listener()
      l:close()                          -- nobody listens there now
      assert.same({ nil, "connection refused" }, { px.socket.connect("127.0.0.1", port) })
      local t = assert(px.socket.tcp())
      assert.same({ nil, "connection refused" }, { t:connect("127.0.0.1", port) })
      t:close()
    end)
  end)

  it("names_are_looked_up_on_the_pool_when_connecting", function()
    px.run(function()
      local l, port = listener()
      local c = assert(px.socket.connect("localhost", port))
      local s = assert(l:accept())
      c:send("by name\n")
      assert.equal("by name", s:receive())
      c:close(); s:close(); l:close()
    end)
  end)

  it("px_recv_after_a_reset_is_econnreset", function()
    px.run(function()
      local c, s = pair()
      local f = spawn_waiting(function() return c:receive(1) end)
      s:setoption("linger", { on = true, timeout = 0 })
      s:close()                          -- an RST, not a FIN
      -- LuaSocket's answer to a reset: "closed", as a raw LuaSocket's receive gives
      assert.same({ nil, "closed", "" }, { f:join() })
      c:close()
    end)
  end)

  it("px_send_to_a_gone_peer_is_epipe_not_sigpipe", function()
    px.run(function()
      local c, s = pair()
      s:close()
      local err
      for _ = 1, 100 do                  -- the first sends may still be taken
        local last
        last, err = c:send("x")
        if not last then break end
        px.yield()
      end
      assert.is_truthy(err == "closed" or err == "connection reset by peer", err)
      c:close()
    end)
  end)

  it("a_socket_made_elsewhere_is_taken_over_without_patching", function()
    local function client_methods()    -- LuaSocket's class of connected TCP sockets
      local a = socket.tcp4()
      local ok = a:bind("127.0.0.1", 0) and a:listen()
      assert(ok)
      local b = socket.tcp4()
      assert(b:connect(a:getsockname()))
      local copy = {}
      for k, v in pairs(getmetatable(b).__index) do copy[k] = v end
      a:close(); b:close()
      return copy
    end
    local before = client_methods()
    local raw = socket.tcp4()
    px.run(function()
      local l, port = listener()
      local w = px.socket.wrap(raw)
      assert.equal(w, px.socket.wrap(w))
      assert.equal(raw, w:unwrap())
      assert.equal(1, w:connect("127.0.0.1", port))
      local s = assert(l:accept())
      local f = spawn_waiting(function() return w:receive(2) end)
      s:send("hi")
      assert.equal("hi", f:join())
      s:close(); w:close(); l:close()
      assert.equal("EINVAL", raised(px.socket.wrap, {}).code)
      assert.equal("EINVAL", raised(px.socket.wrap, io.stdout).code)
    end)
    assert.same(before, client_methods())    -- LuaSocket's methods untouched
  end)

  it("every_waiting_call_of_the_standard_socket_waits_in_a_fiber", function()
    px.run(function()
      local ticks, stop = 0, false
      local ticker = px.spawn(function()
        while not stop do ticks = ticks + 1; px.yield() end
      end)
      -- Each call parks only its fiber: the ticker runs on meanwhile.
      local function parks(call, release)
        local f = px.spawn(call)
        local t0 = ticks
        yield_until(function() return ticks > t0 + 3 end)
        assert.is_false(f:done())
        release()
        return f:join()
      end
      local l, port = listener()
      local c = assert(px.socket.tcp())
      local s = parks(function() return l:accept() end,
        function() assert(c:connect("127.0.0.1", port)) end)
      assert.equal("x", parks(function() return s:receive(1) end, function() c:send("x") end))
      c:settimeout(0)
      local sent = fill(c)
      c:settimeout(nil)
      local last = parks(function() return c:send("y") end,
        function() assert(s:receive(sent)) end)
      assert.equal(1, last)
      local u, v = assert(px.socket.udp()), assert(px.socket.udp())
      assert(u:setsockname("127.0.0.1", 0))
      local ip, uport = u:getsockname()
      local d, from = parks(function() return u:receivefrom() end,
        function() assert(v:sendto("dgram", ip, uport)) end)
      assert.equal("dgram", d)
      assert.equal("127.0.0.1", from)
      assert(v:setpeername(ip, uport))
      assert.equal("again", parks(function() return u:receive() end,
        function() assert(v:send("again")) end))
      stop = true
      ticker:join()
      for _, x in ipairs({ l, c, s, u, v }) do x:close() end
    end)
  end)

  it("a_socket_keeps_the_standard_sockets_timeout_rules", function()
    px.run(function()
      local c, s = pair()
      assert.same({ -1, -1 }, { s:gettimeout() })
      c:send("abc")
      assert.equal(1, s:settimeout(0.05))
      assert.same({ 0.05, -1 }, { s:gettimeout() })
      assert.same({ nil, "timeout", "abc" }, { s:receive(10) })
      -- "t" bounds the whole call: bytes that keep coming (each wait ends
      -- early) do not lengthen it
      s:settimeout(nil)
      s:settimeout(0.05, "t")
      assert.same({ -1, 0.05 }, { s:gettimeout() })
      local t0, ended = px.now(), false
      local ticker = px.spawn(function()
        for _ = 1, 500 do                -- 5 s at most: a failure, not a hang
          if ended then return end
          px.sleep(0.01)
          c:send("z")
        end
      end)
      local r, err, part = s:receive(100000)
      ended = true
      assert.is_nil(r)
      assert.equal("timeout", err)
      assert.matches("^z+$", part)
      local took = px.now() - t0
      assert.is_true(took >= 0.04 and took < 2, took)
      ticker:join()
      s:settimeout(0)
      s:receive(100000)                  -- what came after the call
      -- 0: never waits; a negative number or nil: no timeout
      s:settimeout(nil, "t")
      s:settimeout(0)
      assert.same({ nil, "timeout", "" }, { s:receive(1) })
      s:settimeout(-1)
      assert.same({ -1, -1 }, { s:gettimeout() })
      assert.equal("EINVAL", raised(s.settimeout, s, "soon").code)   -- "1" is taken, as LuaSocket takes it
      assert.equal("EINVAL", raised(s.settimeout, s, 1, "x").code)
      c:close(); s:close()
    end)
  end)

  it("a_receive_after_one_that_waited_gets_what_is_already_there", function()
    -- A receive that follows one that waited waits first (its try would
    -- fail): it must still return at once what came meanwhile, what
    -- LuaSocket's buffer holds, and under a timeout of 0 make the try.
    px.run(function()
      local c, s = pair()
      local f = spawn_waiting(function() return s:receive("*l") end)
      c:send("one\n")
      assert.equal("one", f:join())     -- it waited
      c:send("two\nthree\nfour")
      settle()
      local t0 = px.now()
      assert.equal("two", s:receive("*l"))    -- waits first: the fd is ready
      assert.equal("three", s:receive("*l"))  -- from LuaSocket's buffer
      assert.is_true(px.now() - t0 < 1)
      local g = spawn_waiting(function() return s:receive(8) end)
      c:send("five")
      assert.equal("fourfive", g:join())
      c:send("six")
      settle()
      s:settimeout(0)                   -- after a wait, a timeout of 0 still tries
      assert.same({ nil, "timeout", "six" }, { s:receive("*l") })
      c:close(); s:close()
    end)
  end)

  it("receive_takes_luasockets_patterns_and_prefix", function()
    px.run(function()
      local c, s = pair()
      local f = spawn_waiting(function()
        local out = {}
        out[1] = s:receive("*l")
        out[2] = s:receive()             -- "*l" too
        out[3] = s:receive(5)
        out[4] = s:receive(4, "pre")     -- the prefix counts in the size, as in LuaSocket
        out[5] = s:receive("*l")
        out[6] = s:receive("*a")
        return out
      end)
      for _, piece in ipairs({ "one\r", "\ntw", "o\n12", "345", "x", "yz\n", "rest", " of it" }) do
        c:send(piece)
        settle()
      end
      c:close()
      assert.same({ "one", "two", "12345", "prex", "yz", "rest of it" }, f:join())
      s:close()
    end)
  end)

  it("receive_from_a_closed_peer_returns_nil_closed_and_the_partial", function()
    px.run(function()
      local c, s = pair()
      local byte = spawn_waiting(function() return s:receive(10) end)
      c:send("part")
      settle()
      c:close()
      assert.same({ nil, "closed", "part" }, { byte:join() })
      s:close()
      c, s = pair()
      local line = spawn_waiting(function() return s:receive("*l") end)
      c:send("no newline")
      c:close()
      assert.same({ nil, "closed", "no newline" }, { line:join() })
      assert.same({ nil, "closed", "" }, { s:receive("*l") })
      assert.same({ nil, "closed", "" }, { s:receive("*a") })   -- nothing more: LuaSocket's "closed"
      s:close()
    end)
  end)

  it("send_keeps_luasockets_indices_when_the_peer_does_not_read", function()
    px.run(function()
      local c, s = pair()
      assert.equal(5, c:send("hello"))
      assert.equal(4, c:send("hello", 2, 4))       -- the index of the last byte sent
      assert.equal(3, c:send("abc", 1, -1))
      assert.equal("helloellabc", s:receive(11))
      -- Partial: a total timeout ends the send; the index says how far it got.
      local data = bytes(8 << 20, 2)
      c:settimeout(0.05, "t")
      local last, err, sent = c:send(data, 11)
      assert.is_nil(last)
      assert.equal("timeout", err)
      assert.is_true(sent >= 10 and sent < #data)
      c:settimeout(nil, "t")
      -- the rest, from sent + 1, while the peer reads: every byte once
      local reader = px.spawn(function() return s:receive(#data - 10) end)
      assert.equal(#data, c:send(data, sent + 1))
      assert.is_true(reader:join() == data:sub(11))
      c:close(); s:close()
    end)
  end)

  it("closing_a_socket_wakes_its_parked_fibers_with_closed", function()
    px.run(function()
      local c, s = pair()
      fill(s)
      local r = spawn_waiting(function() return s:receive(1) end)
      local w = spawn_waiting(function() return s:send("more") end)
      assert.equal(1, s:close())
      assert.same({ nil, "closed", "" }, { r:join() })
      local last, err = w:join()
      assert.is_nil(last)
      assert.equal("closed", err)
      -- a listener too
      local l = listener()
      local a = spawn_waiting(function() return l:accept() end)
      l:close()
      assert.same({ nil, "closed" }, { a:join() })
      c:close()
    end)
  end)

  it("udp_sendto_and_recvfrom_wait_in_fibers", function()
    px.run(function()
      local u, v = assert(px.socket.udp()), assert(px.socket.udp())
      assert(u:setsockname("127.0.0.1", 0))
      assert(v:setsockname("127.0.0.1", 0))
      local uip, uport = u:getsockname()
      local vip, vport = v:getsockname()
      local f = spawn_waiting(function() return u:receivefrom() end)
      assert.equal(5, v:sendto("hello", uip, uport))
      assert.same({ "hello", vip, tonumber(vport) }, { f:join() })
      assert.equal(2, u:sendto("hi", "localhost", vport))   -- a name, looked up on the pool
      assert.same({ "hi", uip, tonumber(uport) }, { v:receivefrom() })
      u:settimeout(0.02)
      assert.same({ nil, "timeout" }, { u:receivefrom() })
      u:close(); v:close()
    end)
  end)

  -- -- px.serve -------------------------------------------------------------------------

  it("serve_runs_a_handler_per_connection", function()
    px.run(function()
      local srv = assert(px.serve("127.0.0.1", 0, function(c)
        while true do
          local line = c:receive()
          if not line then return end
          c:send(line:upper() .. "\n")
        end
      end))
      local _, port = srv:getsockname()
      local clients = {}
      for i = 1, 20 do
        clients[i] = px.spawn(function()
          local c = assert(px.socket.connect("127.0.0.1", port))
          local got = {}
          for k = 1, 3 do
            c:send(string.format("client %d line %d\n", i, k))
            got[k] = c:receive()
          end
          c:close()
          return got
        end)
      end
      for i = 1, 20 do
        assert.same({ "CLIENT " .. i .. " LINE 1", "CLIENT " .. i .. " LINE 2",
                      "CLIENT " .. i .. " LINE 3" }, clients[i]:join())
      end
      srv:close()
    end)
  end)

  it("a_handler_that_raises_ends_its_connection_only", function()
    px.run(function()
      local srv = assert(px.serve("127.0.0.1", 0, function(c)
        local line = c:receive()
        if line == "boom" then error("a handler's own error") end
        c:send("echo " .. line .. "\n")
      end))
      local _, port = srv:getsockname()
      local good = assert(px.socket.connect("127.0.0.1", port))
      local bad = assert(px.socket.connect("127.0.0.1", port))
      bad:send("boom\n")
      assert.same({ nil, "closed", "" }, { bad:receive() })
      good:send("still here\n")
      assert.equal("echo still here", good:receive())
      local later = assert(px.socket.connect("127.0.0.1", port))   -- the server goes on
      later:send("later\n")
      assert.equal("echo later", later:receive())
      for _, x in ipairs({ good, bad, later, srv }) do x:close() end
    end)
  end)

  it("a_server_stopped_with_clients_connected_runs_every_handlers_finally", function()
    px.run(function()
      local started, finals, errs = 0, 0, {}
      local srv = assert(px.serve("127.0.0.1", 0, function(c)
        local _ <close> = setmetatable({}, { __close = function() finals = finals + 1 end })
        started = started + 1
        local ok, err = pcall(c.receive, c)  -- parks until the server stops
        errs[#errs + 1] = not ok and err.code
        error(err, 0)
      end))
      local _, port = srv:getsockname()
      local clients = {}
      for i = 1, 3 do clients[i] = assert(px.socket.connect("127.0.0.1", port)) end
      yield_until(function() return started == 3 end)
      settle()
      srv:close()                        -- stops the server, cancels its handlers
      yield_until(function() return finals == 3 end)
      assert.same({ "ECANCELED", "ECANCELED", "ECANCELED" }, errs)
      for _, c in ipairs(clients) do
        assert.same({ nil, "closed", "" }, { c:receive() })   -- each handler's connection closed
        c:close()
      end
      assert.same({ nil, "connection refused" }, { px.socket.connect("127.0.0.1", port) })
    end)
  end)

  it("echo_of_200_clients_on_own_stacks_checks_every_byte", function()
    local size = 16384
    px.run(function()
      local srv = assert(px.serve("127.0.0.1", 0, function(c)
        while true do
          local data, err, part = c:receive(4096)
          local out = data or part
          if #out > 0 then assert(c:send(out)) end
          if err then return end
        end
      end, 256))
      local _, port = srv:getsockname()
      local clients = {}
      for i = 1, 200 do
        clients[i] = px.spawn(function()
          local data = bytes(size, i)
          local c = assert(px.socket.connect("127.0.0.1", port))
          local writer = px.spawn(function()
            local at = 1
            while at <= size do                -- pieces of varied sizes
              local j = math.min(size, at + (i * 97 + at) % 3000)
              assert.equal(j, c:send(data, at, j))
              at = j + 1
              px.yield()
            end
            c:shutdown("send")
          end)
          local got = c:receive(size)
          writer:join()
          c:close()
          return got == data
        end)
      end
      for i = 1, 200 do assert.is_true(clients[i]:join(), "client " .. i) end
      srv:close()
    end)
  end)

  it("ten_thousand_fibers_parked_on_sockets_are_released", function()
    -- 5,000 TCP pairs, a fiber parked on each end: 10,000 fds, more than the
    -- usual soft limit, which a Lua process cannot raise itself.
    local out = child([[
      local px = require "parataxis"
      local pairs_ = 5000
      local f = io.popen("ulimit -n") local limit = tonumber(f:read("l")) f:close()
      if limit and limit < 2 * pairs_ + 64 then print("limit " .. limit) os.exit(3) end
      px.run(function()
        local l = assert(px.socket.bind("127.0.0.1", 0, 1024))
        local _, port = l:getsockname()
        local ends, received = {}, 0
        for i = 1, pairs_ do
          local c = assert(px.socket.connect("127.0.0.1", port))
          ends[2 * i - 1], ends[2 * i] = c, assert(l:accept())
        end
        for k, s in ipairs(ends) do
          px.spawn(function()
            assert(s:receive(#tostring(k)) == tostring(k))
            received = received + 1
          end)
        end
        px.yield()                       -- all of them wait now
        assert(received == 0)
        for i = 1, pairs_ do             -- each end's bytes, from its peer
          local a, b = ends[2 * i - 1], ends[2 * i]
          assert(b:send(tostring(2 * i - 1)))
          assert(a:send(tostring(2 * i)))
        end
        while received < 2 * pairs_ do px.yield() end
        for _, s in ipairs(ends) do s:close() end
        l:close()
        print("released " .. received)
      end)
    ]], 30000)
    if out:find("status=3", 1, true) then
      pending("RLIMIT_NOFILE's hard limit is below 10,064: " .. out)
      return
    end
    assert.equal("released 10000\nstatus=0\n", out)
  end)

  -- -- The collector, os.exit, off-fiber ----------------------------------------------

  it("a_collected_socket_with_a_parked_reader_still_completes", function()
    px.run(function()
      local l, port = listener()
      local function parked_reader()
        -- the accepted socket is the fiber's only: nothing else references it
        return spawn_waiting(function() return assert(l:accept()):receive(5) end)
      end
      local f = parked_reader()
      local c = assert(px.socket.connect("127.0.0.1", port))
      settle()
      collectgarbage(); collectgarbage()
      c:send("hello")
      assert.equal("hello", f:join())
      local g = parked_reader()
      local d = assert(px.socket.connect("127.0.0.1", port))
      settle()
      collectgarbage(); collectgarbage()
      d:close()                          -- or it is closed cleanly
      assert.same({ nil, "closed", "" }, { g:join() })
      c:close(); l:close()
    end)
  end)

  it("os_exit_with_open_sockets_exits_with_its_code", function()
    for _, close in ipairs({ "false", "true" }) do
      local out = child(string.format([[
        local px = require "parataxis"
        px.run(function()
          local l = assert(px.socket.bind("127.0.0.1", 0))
          local _, port = l:getsockname()
          local c = assert(px.socket.connect("127.0.0.1", port))
          local s = assert(l:accept())
          px.spawn(function() s:receive() end)          -- parked on a socket
          px.spawn(function() l:accept() end)           -- and on a listener
          px.spawn(function() px.read_file("/dev/zero_no_such") end)
          px.yield()
          io.stdout:write("exiting\n") io.stdout:flush()
          os.exit(7, %s)
        end)
      ]], close))
      assert.equal("exiting\nstatus=7\n", out)
    end
  end)

  it("off_fiber_the_calls_wait_on_the_thread", function()
    local l, port = listener()
    local c = assert(px.socket.connect("127.0.0.1", port))   -- no run: the thread waits
    local s = assert(l:accept())
    c:send("off\n")
    assert.equal("off", s:receive())
    s:settimeout(0.05)
    local t0 = px.now()
    assert.same({ nil, "timeout", "" }, { s:receive(1) })
    assert.is_true(px.now() - t0 >= 0.04)
    assert.equal("ENOFIBER", raised(px.wait_readable, s).code)
    assert.equal("ENOFIBER", raised(px.wait_writable, s).code)
    local path = tmpname()
    assert.is_true(px.write_file(path, "on the thread"))
    assert.equal("on the thread", px.read_file(path))
    os.remove(path)
    c:close(); s:close(); l:close()
  end)

  -- -- DNS ----------------------------------------------------------------------------

  it("dns_localhost_resolves_to_loopback", function()
    px.run(function()
      local list = assert(px.getaddrinfo("localhost"))
      assert.is_true(#list > 0)
      for _, a in ipairs(list) do
        assert.is_truthy(a.addr == "127.0.0.1" or a.addr == "::1", a.addr)
        assert.equal(a.addr == "::1" and "inet6" or "inet", a.family)
      end
      local with_port = assert(px.getaddrinfo("localhost", 8080))
      assert.equal(8080, with_port[1].port)
    end)
  end)

  it("dns_numeric_hosts_resolve", function()
    px.run(function()
      assert.same({ { family = "inet", addr = "127.0.0.1", port = 80 } },
                  px.getaddrinfo("127.0.0.1", 80))
      assert.same({ { family = "inet6", addr = "::1" } }, px.getaddrinfo("::1"))
      assert.same({ { family = "inet", addr = "10.1.2.3", port = 443 } },
                  px.getaddrinfo("10.1.2.3", "443"))
    end)
  end)

  it("dns_an_invalid_name_fails_with_getaddrinfos_code", function()
    px.run(function()
      local r, err = px.getaddrinfo("no-such-host.invalid")
      assert.is_nil(r)
      assert.equal("EAI_NONAME", err.code)
      assert.is_true(px.is_error(err))
      assert.matches("px.getaddrinfo: ", err.message, 1, true)
      -- the sockets say it in LuaSocket's words
      assert.same({ nil, "host or service not provided, or not known" },
                  { px.socket.connect("no-such-host.invalid", 80) })
    end)
  end)

  it("dns_off_fiber_calls_getaddrinfo", function()
    local list = assert(px.getaddrinfo("localhost", 1))
    assert.is_true(#list > 0)
    local r, err = px.getaddrinfo("no-such-host.invalid")
    assert.is_nil(r)
    assert.equal("EAI_NONAME", err.code)
  end)

  -- -- Files on the pool ----------------------------------------------------------------

  it("files_are_read_written_and_appended_on_the_pool", function()
    local path = tmpname()
    px.run(function()
      local data = bytes(100000, 3) .. "\0tail"
      assert.is_true(px.write_file(path, data))
      assert.is_true(px.read_file(path) == data)
      assert.is_true(px.write_file(path, "more", "a"))
      assert.is_true(px.read_file(path) == data .. "more")
      assert.is_true(px.write_file(path, "short"))        -- "w" truncates
      assert.equal("short", px.read_file(path))
      assert.is_true(px.write_file(path, ""))
      assert.equal("", px.read_file(path))
      assert.equal("EINVAL", raised(px.write_file, path, "x", "r").code)
      assert.equal("EINVAL", raised(px.write_file, path, 1).code)
      assert.equal("EINVAL", raised(px.read_file, path .. "\0x").code)
    end)
    os.remove(path)
  end)

  it("a_missing_file_gives_nil_message_and_errno_as_io_open", function()
    local path = tmpname() .. "/missing"
    local expected = { io.open(path) }
    px.run(function()
      assert.same(expected, { px.read_file(path) })
      assert.same(expected, { px.write_file(path, "x") })
    end)
    assert.same(expected, { px.read_file(path) })          -- off-fiber alike
  end)

  it("pool_cancelled_before_start_never_runs_and_is_released_with_null", function()
    -- A pool of one thread (PARATAXIS_BLOCKING_THREADS, read at its start: a
    -- child process), held by a read of a FIFO nobody writes yet: the jobs
    -- queued behind it cannot start before the spec lets it go.
    local fifo, path = mkfifo(), tmpname()
    local out = child(string.format([[
      local px = require "parataxis"
      local fifo, path = %q, %q
      px.run(function()
        local holder = px.spawn(px.read_file, fifo)
        px.yield()
        local r, err = px.timeout(0.05, px.write_file, path, "never")
        assert(r == nil and err.code == "ETIMEDOUT", tostring(err))
        local tok = px.token()
        local f = px.spawn(px.with_cancel, tok, px.write_file, path, "never")
        px.yield()
        tok:cancel()
        r, err = f:join()
        assert(r == nil and err.code == "ECANCELED", tostring(err))
        local w = assert(io.open(fifo, "w"))     -- lets the holder go
        w:write("held")
        w:close()
        assert(holder:join() == "held")
        assert(px.read_file(path) == nil)        -- nothing left behind
        print("never ran")
      end)
    ]], fifo, path), nil, "PARATAXIS_BLOCKING_THREADS=1")
    assert.equal("never ran\nstatus=0\n", out)
    assert.is_false(exists(path))
    os.remove(fifo)
  end)

  it("pool_a_scope_fired_before_the_call_runs_no_job", function()
    local path = tmpname()
    px.run(function()
      assert.equal("", px.read_file("/dev/null"))   -- an idle pool thread, ready
      local tok = px.token()
      tok:cancel()
      for _ = 1, 200 do
        local r, err = px.with_cancel(tok, px.write_file, path, "never")
        assert.is_nil(r)
        assert.equal("ECANCELED", err.code)
      end
    end)
    assert.is_false(exists(path))
  end)

  it("pool_cancelled_while_running_waits_for_the_result_by_default", function()
    -- px.write_file waits for a job that runs: a half-written file is worse
    -- than a late wake.  The reader opens the FIFO (so "opened" says the
    -- job's open went through: it runs), then reads nothing until told, and
    -- the job blocks in its write of more than the pipe holds.
    local fifo, ctl = mkfifo(), mkfifo()
    local data = string.rep("x", 1 << 20)
    local p = assert(io.popen(string.format(
      "exec 3<%s; echo opened; read x <%s; wc -c <&3", fifo, ctl)))
    px.run(function()
      local f = px.spawn(function() return px.timeout(0.05, px.write_file, fifo, data) end)
      px.yield()
      assert.equal("opened", p:read("l"))   -- the job is in its write
      px.sleep(0.2)                         -- past the scope's deadline
      assert.is_false(f:done())             -- it waits for the job
      local w = assert(io.open(ctl, "w"))
      w:write("go\n")
      w:close()
      assert.is_true(f:join())              -- the job's outcome, delivered
    end)
    assert.equal(#data, tonumber(p:read("a")))   -- every byte was written
    p:close()
    os.remove(fifo); os.remove(ctl)
  end)

  it("pool_cancelled_while_running_with_abandon_returns_at_once_and_releases_later", function()
    -- px.read_file abandons a job that runs: the call raises at the deadline,
    -- and the job frees what it read when its read ends.
    local fifo, ctl = mkfifo(), mkfifo()
    local p = assert(io.popen(string.format(
      "exec 3>%s; echo opened; read x <%s; printf late >&3", fifo, ctl)))
    px.run(function()
      local f = px.spawn(function() return px.timeout(0.05, px.read_file, fifo) end)
      px.yield()
      assert.equal("opened", p:read("l"))   -- the job is in its read
      local r, err = f:join()               -- at the deadline, with no data yet
      assert.is_nil(r)
      assert.equal("ETIMEDOUT", err.code)
      local w = assert(io.open(ctl, "w"))   -- now the data, which nobody reads
      w:write("go\n")
      w:close()
    end)
    assert.is_true(p:close())               -- the writer wrote and ended
    os.remove(fifo); os.remove(ctl)
  end)

  it("pool_fn_sees_px_blocking_cancelled_and_may_stop_early", function()
    -- A FIFO whose writer never stops: the read ends only because the job
    -- sees that its fiber gave up.
    local fifo = mkfifo()
    local p = assert(io.popen(string.format(
      "exec 3>%s; echo opened; while printf x >&3; do sleep 0.01; done 2>/dev/null", fifo)))
    px.run(function()
      local f = px.spawn(function() return px.timeout(0.1, px.read_file, fifo) end)
      px.yield()
      assert.equal("opened", p:read("l"))
      local r, err = f:join()
      assert.is_nil(r)
      assert.equal("ETIMEDOUT", err.code)
    end)
    p:close()                               -- the writer ended on the closed FIFO
    os.remove(fifo)
  end)

  it("pool_stray_wake_does_not_end_the_wait", function()
    local fifo = mkfifo()
    px.run(function()
      local f = spawn_waiting(function() return px.read_file(fifo) end)
      assert.is_true(px._wake(f:id()))      -- a wake that is not the job's
      settle()
      assert.is_false(f:done())
      local w = assert(io.open(fifo, "w"))  -- waits for the job's open
      w:write("data")
      w:close()
      assert.equal("data", f:join())
    end)
    os.remove(fifo)
  end)

  it("pool_thousand_jobs_from_a_hundred_fibers_each_get_their_result", function()
    local dir = tmpname()
    assert(os.execute("mkdir " .. dir))
    px.run(function()
      local fs = {}
      for i = 1, 100 do
        fs[i] = px.spawn(function()
          local ok = 0
          for j = 1, 5 do
            local path = string.format("%s/%d-%d", dir, i, j)
            local text = string.format("fiber %d job %d", i, j)
            assert.is_true(px.write_file(path, text))
            if px.read_file(path) == text then ok = ok + 1 end
          end
          return ok
        end)
      end
      for i = 1, 100 do assert.equal(5, fs[i]:join()) end
    end)
    assert(os.execute("rm -r " .. dir))
  end)

  it("pool_job_that_never_ends_is_abandoned_and_the_process_exits", function()
    local fifo = mkfifo()
    local out = child(string.format([[
      local px = require "parataxis"
      px.run(function()
        px.spawn(function() px.read_file(%q) end)     -- nobody ever writes: never ends
        px.spawn(function() px.timeout(0.01, px.read_file, %q) end)
        px.sleep(0.05)
        io.stdout:write("exiting\n") io.stdout:flush()
        os.exit(5)
      end)
    ]], fifo, fifo))
    assert.equal("exiting\nstatus=5\n", out)
    os.remove(fifo)
  end)
end)
