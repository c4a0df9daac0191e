-- A hostile review of the Lua fiber I/O (issue 22): each test is a defect that
-- was found, kept so that it stays fixed.  The wrapped socket is compared with
-- a plain blocking LuaSocket object wherever LuaSocket's conventions are the
-- contract.
local px = require "parataxis"
local socket = require "socket"
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or ""
local h = dofile(dir .. "helpers.lua")

-- A connected pair of wrapped TCP sockets over the loopback (client, peer).
local function tcp_pair()
  local srv = assert(px.socket.bind("127.0.0.1", 0))
  local _, port = srv:getsockname()
  local c = assert(px.socket.connect("127.0.0.1", port))
  local p = assert(srv:accept())
  srv:close()
  return c, p
end

-- A port on 127.0.0.1 that a plain LuaSocket server listens on (IPv4 only).
local function ipv4_listener()
  local srv = assert(socket.bind("127.0.0.1", 0))
  local _, port = srv:getsockname()
  return srv, tonumber(port)
end

-- Whether ::1 can be connected to at all (a host without IPv6 cannot show
-- what a refused IPv6 address does).
local function has_ipv6_loopback()
  local s = socket.tcp6()
  if not s then return false end
  local ok = s:bind("::1", 0)
  s:close()
  return ok ~= nil
end

describe("io", function()
  it("a_wrapped_udp_socket_keeps_luasockets_methods_that_do_not_wait", function()
    px.run(function()
      local u = assert(px.socket.udp())
      assert.equal(1, u:setsockname("127.0.0.1", 0))
      local ip, port = u:getsockname()
      assert.equal("127.0.0.1", ip)
      assert.is_true(tonumber(port) > 0)
      assert.equal(1, u:setoption("broadcast", true))
      assert.is_true(u:getoption("broadcast"))
      assert.is_true(u:getfd() >= 0)
      u:close()
    end)
  end)

  it("udp_calls_return_as_many_values_as_luasockets_do", function()
    -- select("#") of each call's results, for a plain and a wrapped pair.
    local function counts(wrap)
      local a, b = socket.udp(), socket.udp()
      a:setsockname("127.0.0.1", 0)
      b:setsockname("127.0.0.1", 0)
      local _, port = a:getsockname()
      if wrap then a, b = px.socket.wrap(a), px.socket.wrap(b) end
      a:settimeout(0.01)
      local n = {}
      local function count(...) n[#n + 1] = select("#", ...) end
      count(b:sendto("x", "127.0.0.1", port))
      count(a:receivefrom())
      count(a:receivefrom())            -- nil, "timeout"
      b:setpeername("127.0.0.1", port)
      count(b:send("y"))
      count(a:receive())
      count(a:receive())                -- nil, "timeout"
      a:close(); b:close()
      return n
    end
    local plain = counts(false)
    px.run(function() assert.same(plain, counts(true)) end)
  end)

  it("a_sockets_connect_returns_as_many_values_as_luasockets_does", function()
    local srv, port = ipv4_listener()
    local plain = socket.tcp()
    local n = select("#", plain:connect("127.0.0.1", port))
    plain:close()
    px.run(function()
      local t = px.socket.tcp()
      assert.equal(n, select("#", t:connect("127.0.0.1", port)))
      t:close()
    end)
    srv:close()
  end)

  it("a_receive_after_a_scope_fired_does_not_repeat_the_callers_prefix", function()
    px.run(function()
      local c, p = tcp_pair()
      c:send("ab")
      local _, err = px.timeout(0.02, function() return p:receive("*l", "PRE:") end)
      assert.equal("ETIMEDOUT", err.code)
      c:send("c\n")
      -- "ab" was received and is kept; "PRE:" was the caller's, not the socket's
      assert.equal("abc", p:receive("*l"))
      c:send("d")
      px.timeout(0.02, function() return p:receive(5, "xyz") end)
      c:send("efgh")
      assert.equal("Qdefg", p:receive(5, "Q"))
      c:close(); p:close()
    end)
  end)

  it("a_star_a_receive_counts_the_bytes_a_scope_kept_as_received", function()
    px.run(function()
      local c, p = tcp_pair()
      c:send("kept")
      local _, err = px.timeout(0.02, function() return p:receive("*a") end)
      assert.equal("ETIMEDOUT", err.code)
      c:close()
      -- "kept" came from the socket: "*a" read something, as one blocking call would
      assert.same({ "kept" }, { p:receive("*a") })
      p:close()
    end)
  end)

  it("a_receive_with_a_bad_pattern_loses_none_of_the_bytes_a_scope_kept", function()
    px.run(function()
      local c, p = tcp_pair()
      c:send("kept")
      px.timeout(0.02, function() return p:receive("*l") end)
      assert.is_false(pcall(p.receive, p, "*x"))          -- LuaSocket's argument error
      assert.is_false(pcall(p.receive, p, "*l", {}))
      c:send("\n")
      assert.equal("kept", p:receive("*l"))
      c:close(); p:close()
    end)
  end)

  it("a_receive_while_another_fiber_waits_in_one_raises_ebusy_and_takes_none_of_its_bytes",
     function()
    px.run(function()
      local c, p = tcp_pair()
      c:send("abc")
      local first = h.spawn_waiting(function() return p:receive("*l") end)
      c:send("def\n")
      local err = h.raised(p.receive, p, "*l")      -- no wait needed: still refused
      assert.equal("EBUSY", err.code)
      assert.equal("abcdef", first:join())
      c:send("next\n")
      assert.equal("next", p:receive("*l"))
      c:close(); p:close()
    end)
  end)

  it("a_send_while_another_fiber_waits_in_one_raises_ebusy_and_interleaves_nothing",
     function()
    px.run(function()
      local c, p = tcp_pair()
      local big = string.rep("x", 16 * 1024 * 1024)
      local first = h.spawn_waiting(function() return c:send(big) end)
      local head = assert(p:receive(1024 * 1024))     -- room in the buffers again
      px.sleep(0.01)
      local err = h.raised(c.send, c, "y")            -- no wait needed: still refused
      assert.equal("EBUSY", err.code)
      local rest = px.spawn(function() return p:receive(#big - #head) end)
      assert.equal(#big, first:join())
      assert.equal(big, head .. rest:join())
      c:close(); p:close()
    end)
  end)

  it("connect_with_a_host_that_is_not_a_string_or_number_raises_einval", function()
    px.run(function()
      local _, port = ipv4_listener()
      assert.equal("EINVAL", h.raised(px.socket.connect, nil, port).code)
      assert.equal("EINVAL", h.raised(px.socket.connect, {}, port).code)
      local t = px.socket.tcp()
      assert.equal("EINVAL", h.raised(t.connect, t, nil, port).code)
      t:close()
    end)
  end)

  it("a_numeric_host_given_as_a_number_is_taken_as_luasocket_takes_it", function()
    px.run(function()
      -- LuaSocket turns a number into its digits: 2130706433 is 127.0.0.1
      local srv, port = ipv4_listener()
      local c = assert(px.socket.connect(2130706433, port))
      c:close(); srv:close()
    end)
  end)

  it("a_sockets_connect_after_a_refused_address_of_the_other_family_tries_the_next",
     function()
    if not has_ipv6_loopback() then return end
    local srv, port = ipv4_listener()
    -- A plain blocking LuaSocket socket, as the contract.
    local plain = socket.tcp()
    assert.same({ nil, "connection refused" }, { plain:connect("::1", port) })
    assert.equal(1, plain:connect("127.0.0.1", port))
    plain:close()
    px.run(function()
      local t = px.socket.tcp()
      assert.same({ nil, "connection refused" }, { t:connect("::1", port) })
      assert.equal(1, t:connect("127.0.0.1", port))
      t:close()
    end)
    srv:close()
  end)

  it("a_scope_ending_px_socket_connect_closes_the_socket_it_made", function()
    -- A listener with a backlog of 1 that never accepts: the kernel drops the
    -- handshakes after the first few, and those connects wait.
    local srv = assert(socket.bind("127.0.0.1", 0, 1))
    local _, port = srv:getsockname()
    local pid = assert(io.open("/proc/self/stat")):read("n")
    local function open_sockets()
      local n = 0
      for l in io.popen("ls -l /proc/" .. pid .. "/fd"):lines() do
        if l:find("socket:", 1, true) then n = n + 1 end
      end
      return n
    end
    collectgarbage("stop")      -- an fd left to the collector stays open
    local ok, err = pcall(px.run, function()
      local before, made, ended = open_sockets(), {}, 0
      for _ = 1, 10 do
        local c, e = px.timeout(0.05, px.socket.connect, "127.0.0.1", port)
        if c then made[#made + 1] = c else ended = ended + 1; assert.equal("ETIMEDOUT", e.code) end
      end
      assert.is_true(ended > 0)
      assert.equal(before + #made, open_sockets())
      for _, c in ipairs(made) do c:close() end
    end)
    collectgarbage("restart")
    srv:close()
    assert(ok, err)
  end)

  it("px_serve_off_a_fiber_raises_enofiber_and_leaves_the_port_free", function()
    local probe = assert(socket.bind("127.0.0.1", 0))
    local _, port = probe:getsockname()
    probe:close()
    collectgarbage("stop")      -- a socket left to the collector keeps the port
    local err = h.raised(px.serve, "127.0.0.1", port, function() end)
    local again, why = socket.bind("127.0.0.1", port)
    collectgarbage("restart")
    assert.equal("ENOFIBER", err.code)
    assert(again, why)
    again:close()
  end)

  it("getaddrinfo_refuses_a_host_with_a_nul_and_a_port_out_of_range", function()
    px.run(function()
      assert.equal("EINVAL", h.raised(px.getaddrinfo, "localhost\0.invalid").code)
      assert.equal("EINVAL", h.raised(px.getaddrinfo, "127.0.0.1", 65536).code)
      assert.equal("EINVAL", h.raised(px.getaddrinfo, "127.0.0.1", -1).code)
      assert.equal("EINVAL", h.raised(px.getaddrinfo, "127.0.0.1", "99999").code)
      assert.equal(80, px.getaddrinfo("127.0.0.1", "http")[1].port)
      assert.equal(65535, px.getaddrinfo("127.0.0.1", 65535)[1].port)
    end)
  end)

  it("settimeout_takes_a_numeric_string_as_luasocket_does", function()
    px.run(function()
      local c, p = tcp_pair()
      assert.equal(1, p:settimeout("0.01"))
      assert.same({ nil, "timeout", "" }, { p:receive("*l") })
      c:close(); p:close()
    end)
  end)

  it("wrap_keeps_the_timeouts_the_luasocket_object_had", function()
    px.run(function()
      local c, p = tcp_pair()
      local raw = p:unwrap()
      raw:settimeout(0.05)
      raw:settimeout(2, "t")
      local w = px.socket.wrap(raw)     -- wrap gives back the wrapper of a wrapper only
      assert.same({ 0.05, 2 }, { w:gettimeout() })
      local t0 = px.now()
      assert.same({ nil, "timeout", "" }, { w:receive("*l") })
      assert.is_true(px.now() - t0 < 1)
      c:close(); w:close()
    end)
  end)

  it("a_serve_handler_error_that_tostring_cannot_show_is_still_warned", function()
    local warned = {}
    local real_warn = _G.warn
    _G.warn = function(...) warned[#warned + 1] = table.concat({ ... }) end
    local ok, err = pcall(px.run, function()
      local srv = assert(px.serve("127.0.0.1", 0, function()
        error(setmetatable({}, { __tostring = function() error("no way to show it") end }))
      end))
      local _, port = srv:getsockname()
      local c = assert(px.socket.connect("127.0.0.1", port))
      assert.same({ nil, "closed", "" }, { c:receive("*a") })
      c:close()
      h.yield_until(function() return #warned > 0 end)
      srv:close()
    end)
    _G.warn = real_warn
    assert(ok, err)
    assert.equal(1, #warned)
    assert.matches("a handler raised", warned[1])
  end)
end)
