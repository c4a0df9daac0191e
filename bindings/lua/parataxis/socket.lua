--- parataxis.socket -- LuaSocket sockets whose waits park only the fiber.
--
--   px.socket.wrap(s)              a LuaSocket tcp or udp object, made fiber-aware
--   px.socket.tcp(), .tcp4(), .tcp6(), .udp(), .udp4(), .udp6()
--   px.socket.bind(host, port [, backlog])     a listening socket
--   px.socket.connect(host, port [, locaddr, locport])
--   px.serve(host, port, handler [, backlog])  a handler fiber per connection
--
-- A wrapped socket keeps LuaSocket's methods and return conventions
-- (receive's patterns and partial results, send's i, j and last index,
-- "timeout" and "closed"); underneath, the LuaSocket object is held at timeout
-- 0, so each call tries at once and, when it would block, the fiber waits on
-- the fd (parataxis_core.io().sock_wait, C) and tries again -- LuaSocket's own
-- buffer is never bypassed.  settimeout(t [, "b" | "t"]) is LuaSocket's: "b"
-- bounds each wait, "t" the whole call, and either ends it with nil,
-- "timeout" (and what was done so far); the default is no timeout.  The
-- scopes of the fiber (px.timeout, px.with_cancel, a cancelled run) bound
-- every wait too, and raise, as every wait of the module does.  Off a fiber
-- the socket blocks its thread as a LuaSocket socket does.  Host names are
-- looked up on the blocking pool (px.getaddrinfo) before LuaSocket sees them,
-- since its own lookup would block the run.
local socket = require "socket"
local core = require "parataxis_core"
local fibers = require "parataxis.fibers"

local IO = core.io()
local sock_wait, now, getaddrinfo = IO.sock_wait, core.now, IO.getaddrinfo
local READ, WRITE = 1, 2

local M = {}

local Socket = {}
local Meta = { __index = Socket, __name = "parataxis.socket" }

local function raise_arg(where, arg, name, expected, got)
  error(setmetatable({ code = "EINVAL", message = string.format(
    "%s: bad argument #%d (%s): %s expected, got %s", where, arg, name, expected,
    type(got)) }, fibers.Error), 3)
end

-- "tcp", "client" for a LuaSocket object, from its tostring ("tcp{client}: 0x...")
local function kind_of(s)
  if type(s) ~= "userdata" then return nil end
  local mt = getmetatable(s)
  if type(mt) ~= "table" or type(mt.__index) ~= "table" or mt.__index.getfd == nil then
    return nil
  end
  return tostring(s):match("^(%a+){(%a+)}")
end

--- px.socket.wrap(s): s, a LuaSocket tcp (master, client or server) or udp
-- object, as a fiber-aware socket, with the timeouts s had.  s belongs to it
-- from then on: close it through the wrapper (whose close wakes the fibers
-- waiting on it).  A socket already wrapped is returned as it is.
function M.wrap(s)
  if getmetatable(s) == Meta then return s end
  local proto = kind_of(s)
  if proto ~= "tcp" and proto ~= "udp" then
    raise_arg("px.socket.wrap", 1, "socket", "a LuaSocket tcp or udp object", s)
  end
  local block, total = s:gettimeout()           -- -1: none
  s:settimeout(0)
  return setmetatable({ sock = s, udp = proto == "udp",
                        block = block >= 0 and block or nil,
                        total = total >= 0 and total or nil }, Meta)
end
local wrap = M.wrap

function Meta:__tostring()
  return "parataxis." .. tostring(self.sock)
end

-- -- Waiting ------------------------------------------------------------------------

-- The deadline of the next wait (px.now() seconds; nil: none): the block
-- timeout from now, or the call's total deadline, whichever comes first.
local function next_deadline(self, total)
  local b = self.block
  local d = b and now() + b
  if total and (d == nil or total < d) then d = total end
  return d
end

-- The call's deadline under a total timeout, taken when it first would block.
local function total_deadline(self)
  local t = self.total
  return t and now() + t
end

-- Waits until the socket is ready for `ev`: nil; "timeout" (its own timeout);
-- "closed" (closed meanwhile, by another fiber's close).
local function wait(self, ev, total)
  local fd = self.sock:getfd()
  if fd < 0 then return "closed" end
  if self.block == 0 or self.total == 0 then return "timeout" end
  return sock_wait(fd, ev, next_deadline(self, total))
end

-- -- Names ------------------------------------------------------------------------

-- LuaSocket's words for a failed lookup (its pierror.h), by EAI_* name.
local GAI_WORDS = {
  EAI_AGAIN = "temporary failure in name resolution",
  EAI_BADFLAGS = "invalid value for ai_flags",
  EAI_FAIL = "non-recoverable failure in name resolution",
  EAI_FAMILY = "ai_family not supported",
  EAI_MEMORY = "memory allocation failure",
  EAI_NONAME = "host or service not provided, or not known",
  EAI_SERVICE = "service not supported for socket type",
  EAI_SOCKTYPE = "ai_socktype not supported",
}

-- The addresses of host, or nil and LuaSocket's message; a dotted quad and
-- "*" (any address) as they are, anything else through px.getaddrinfo, which
-- parses a numeric host at once and looks a name up on the pool.  `plain`:
-- the C library's message, as LuaSocket's sendto gives it.  A number is its
-- digits, as LuaSocket takes it; any other value that is not a string raises
-- (argument `arg` of `where`), as LuaSocket's calls do: an empty list would
-- make the caller's loop answer nil, nil.
local function addresses(host, where, arg, plain)
  if type(host) == "number" then host = tostring(host) end
  if type(host) ~= "string" then
    raise_arg(where, arg or 1, "host", "a string", host)
  end
  if host == "*" or host:match("^%d+%.%d+%.%d+%.%d+$") then return { host } end
  local list, err = getaddrinfo(host)
  if not list then
    if plain then return nil, (err.message:gsub("^px%.getaddrinfo: ", "")) end
    return nil, GAI_WORDS[err.code] or err.message
  end
  local out = {}
  for i, a in ipairs(list) do out[i] = a.addr end
  if #out == 0 then return nil, "host not found" end
  return out
end

-- -- The methods that wait ----------------------------------------------------------------

-- call(s, ...) on the LuaSocket object until it stops answering "timeout"
-- (it would block), waiting for `ev` before each new try: its first three
-- results, or nil and why a wait ended ("timeout", "closed").  For the calls
-- that carry nothing from one try to the next.
local function retrying(self, ev, call, ...)
  local s = self.sock
  local a, b, c = call(s, ...)
  if a or b ~= "timeout" then return a, b, c end
  local total = total_deadline(self)
  repeat
    local why = wait(self, ev, total)
    if why then return nil, why end
    a, b, c = call(s, ...)
  until a or b ~= "timeout"
  return a, b, c
end

-- A datagram receive, LuaSocket's receivefrom (`from`) or receive: waits while
-- none is queued.  LuaSocket's results, as many as it gives: the datagram,
-- and its ip and port for receivefrom; or nil, err.
local function receive_datagram(self, from, size)
  local s = self.sock
  local data, ip, port = retrying(self, READ, from and s.receivefrom or s.receive, size)
  if not data then return nil, ip end
  if not from then return data end
  return data, ip, port
end

-- A receive (a send) parked in its wait owns the direction: another fiber's
-- receive would take the bytes it waits to complete from LuaSocket's buffer,
-- or leave it parked on an fd whose data that buffer now holds; another send
-- would slip its bytes into the middle of the parked one's.  So such a call
-- raises EBUSY, as a second waiter on the fd does, even when it need not wait.
local function busy()
  error(setmetatable({ code = "EBUSY", message = "px.socket: busy" }, fibers.Error), 3)
end

-- Whether a receive of `pattern` with `prefix` must read from the socket
-- before it can return.  A receive that had to wait usually follows a send
-- whose answer has not come yet (a request and its reply): its next try,
-- LuaSocket's buffer empty, fails with EAGAIN, a system call for nothing.
-- So a receive after one that waited waits first, when it needs data (and
-- may wait: a timeout of 0 asks for the try alone).
local function needs_data(pattern, prefix)
  if pattern == nil or pattern == "*l" or pattern == "*a" then return true end
  return type(pattern) == "number" and pattern > (prefix and #tostring(prefix) or 0)
end

--- As LuaSocket's: the data; or nil, err ("timeout", "closed", ...) and the
-- partial data received.
-- A scope that ends the wait raises; the bytes received so far are kept
-- (self.pending) and come first in the next receive, so none is lost.  The
-- caller's prefix is not kept: the socket never received it.
function Socket:receive(pattern, prefix)
  if self.udp then return receive_datagram(self, false, pattern) end
  if self.reading then busy() end
  local s = self.sock
  local own = prefix and #tostring(prefix) or 0     -- the caller's, as LuaSocket reads it
  local pending = self.pending
  if pending then
    prefix = (prefix or "") .. pending              -- received after the caller's prefix
  end
  local data, err, partial
  if self.waited and needs_data(pattern, prefix) and self.block ~= 0 and self.total ~= 0
     and not s:dirty() then
    err, partial = "timeout", prefix and tostring(prefix) or ""   -- see needs_data
  else
    data, err, partial = s:receive(pattern, prefix)
  end
  self.pending = nil        -- only now: a call LuaSocket refused keeps them
  self.waited = not data and err == "timeout"
  if self.waited then
    local total = total_deadline(self)
    repeat
      self.reading = true
      local ok, why = pcall(wait, self, READ, total)
      self.reading = nil
      if not ok then
        if partial and #partial > own then self.pending = partial:sub(own + 1) end
        error(why, 0)
      end
      if why then return nil, why, partial end
      data, err, partial = s:receive(pattern, partial)
    until data or err ~= "timeout"
  end
  -- "*a" reads until the peer closes, and succeeds when it read anything; a
  -- blocking LuaSocket makes it one call, here the last of several (or the
  -- one after a scope ended the last receive) may read nothing more: what the
  -- earlier ones read counts.
  if err == "closed" and type(pattern) == "string" and pattern:match("^%*?a") and
     #partial > own then
    return partial, nil, nil
  end
  return data, err, partial
end

-- TCP's send, as LuaSocket's: the index of the last byte sent; or nil, err
-- and that index.  A scope that ends the wait raises its error with that
-- index as err.last.
local function send_stream(self, data, i, j)
  if self.writing then busy() end
  local s = self.sock
  local last, err, sent = s:send(data, i, j)
  if last or err ~= "timeout" then return last, err, sent end
  local total = total_deadline(self)
  repeat
    self.writing = true
    local ok, why = pcall(wait, self, WRITE, total)
    self.writing = nil
    if not ok then
      if fibers.is_error(why) then why.last = sent end
      error(why, 0)
    end
    if why then return nil, why, sent end
    last, err, sent = s:send(data, sent + 1, j)
  until last or err ~= "timeout"
  return last, err, sent
end

--- As LuaSocket's: a client (wrapped); or nil, err.
function Socket:accept()
  local c, err = retrying(self, READ, self.sock.accept)
  if not c then return nil, err end
  return wrap(c)
end

-- One connect to a numeric address: 1, or nil, err.
local function connect_one(self, addr, port, total)
  local s = self.sock
  local ok, err = s:connect(addr, port)
  if ok then return 1 end
  if err ~= "timeout" then return nil, err end
  local why = wait(self, WRITE, total)
  if why then return nil, why end
  err = s:getoption("error")
  if err then return nil, err end
  return 1
end

--- As LuaSocket's: 1, or nil, err.  A host name is looked up on the pool, and
-- its addresses are tried in turn.
-- LuaSocket's blocking connect gives a socket with no descriptor yet
-- (socket.tcp(), unbound) a new one for each family it tries, and leaves it
-- free of any when every try failed; at timeout 0 the first try fixes the
-- family, and an address of the other family is refused after it.  So such a
-- socket is made anew after each failed try, to the same end.
function Socket:connect(host, port)
  local list, err = addresses(host, "socket:connect")
  if not list then return nil, err end
  local unset = self.sock:getfd() < 0
  local total = total_deadline(self)
  for _, addr in ipairs(list) do
    local ok
    ok, err = connect_one(self, addr, port, total)
    if ok then return ok end                  -- one value, as LuaSocket's
    if err == "timeout" or err == "closed" then return nil, err end
    if unset then
      self.sock:close()
      self.sock = socket.tcp()
      self.sock:settimeout(0)
    end
  end
  return nil, err
end

-- LuaSocket's method `name` (host, port), the host looked up on the pool
-- first (its first address).
local function at_address(name)
  local where = "socket:" .. name
  return function(self, host, port)
    local list, err = addresses(host, where)
    if not list then return nil, err end
    local s = self.sock
    return s[name](s, list[1], port)
  end
end

--- As LuaSocket's; a host name is looked up on the pool.
Socket.bind = at_address("bind")

--- UDP, as LuaSocket's: the datagram, ip and port; or nil, err.
function Socket:receivefrom(size)
  return receive_datagram(self, true, size)
end

-- A datagram send (send or sendto): waits while the socket buffer is full.
local function send_datagram(self, send, ...)
  local ok, err = retrying(self, WRITE, send, ...)
  if ok then return ok end          -- one value, as LuaSocket's
  return nil, err
end

--- UDP, as LuaSocket's (a host name is looked up on the pool).
function Socket:sendto(data, ip, port)
  local list, err = addresses(ip, "socket:sendto", 2, true)
  if not list then return nil, err end
  return send_datagram(self, self.sock.sendto, data, list[1], port)
end

--- As LuaSocket's: TCP, the index of the last byte sent (of data from i to
-- j), or nil, err and that index; UDP (connected), 1, or nil, err.
function Socket:send(data, i, j)
  if self.udp then return send_datagram(self, self.sock.send, data) end
  return send_stream(self, data, i, j)
end

--- UDP, as LuaSocket's setpeername and setsockname (names on the pool).
Socket.setpeername = at_address("setpeername")
Socket.setsockname = at_address("setsockname")

-- -- The rest ---------------------------------------------------------------------

--- Wakes the fibers waiting on the socket (their call returns nil, "closed"),
-- then closes it.  1, as LuaSocket's.
function Socket:close()
  local s = self.sock
  local fd = s:getfd()
  if fd >= 0 then IO.notify_closing(fd) end
  return s:close()
end
Meta.__close = Socket.close

--- LuaSocket's settimeout: `t` seconds (nil or negative: none); mode "b"
-- (the default) bounds each wait, "t" the whole call.  1.
function Socket:settimeout(t, mode)
  if type(t) == "string" then t = tonumber(t) or t end   -- LuaSocket takes "0.5"
  if t ~= nil and type(t) ~= "number" then
    raise_arg("socket:settimeout", 1, "timeout", "a number or nil", t)
  end
  if t ~= nil and (t ~= t or t < 0) then t = nil end
  if mode == nil or mode == "b" then
    self.block = t
  elseif mode == "t" or mode == "r" then
    self.total = t
  else
    raise_arg("socket:settimeout", 2, "mode", '"b" or "t"', mode)
  end
  return 1
end

--- LuaSocket's gettimeout: the block and total timeouts, -1 for none.
function Socket:gettimeout()
  return self.block or -1, self.total or -1
end

--- The LuaSocket object under it.
function Socket:unwrap()
  return self.sock
end

-- Every other method of LuaSocket's (getfd, listen, shutdown, getpeername,
-- setoption, dirty, ...) never waits: it is called on the object under it.
-- By name, not as the function found here: tcp and udp objects each have a
-- getsockname, setoption, ... of their own, which refuses the other kind.
for _, proto in ipairs({ socket.tcp(), socket.udp() }) do
  for name, fn in pairs(getmetatable(proto).__index) do
    if Socket[name] == nil and type(fn) == "function" then
      Socket[name] = function(self, ...)
        local s = self.sock
        return s[name](s, ...)
      end
    end
  end
  proto:close()
end

-- -- Constructors -----------------------------------------------------------------

local function made(s, err)
  if not s then return nil, err end
  return wrap(s)
end

for _, name in ipairs({ "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6" }) do
  local new = socket[name]
  if new then
    M[name] = function() return made(new()) end
  end
end

--- A listening TCP socket (LuaSocket's socket.bind, the name looked up on the
-- pool): the wrapped socket, or nil, err.
function M.bind(host, port, backlog)
  local list, err = addresses(host, "px.socket.bind")
  if not list then return nil, err end
  return made(socket.bind(list[1], port, backlog))
end

--- A connected TCP socket (LuaSocket's socket.connect): or nil, err.
-- One try of M.connect on its new socket s: 1, or nil, err.
local function connect_new(s, addr, port, locaddr, locport)
  if locaddr then
    local ok, e = s:bind(locaddr, locport or 0)
    if not ok then return nil, e end
  end
  return s:connect(addr, port)
end

function M.connect(host, port, locaddr, locport)
  local list, err = addresses(host, "px.socket.connect")
  if not list then return nil, err end
  for _, addr in ipairs(list) do
    local family = addr:find(":", 1, true) and socket.tcp6 or socket.tcp4 or socket.tcp
    local s
    s, err = made(family())
    if not s then return nil, err end
    -- A scope that ends the wait raises (so does a bad locaddr): the socket,
    -- which the caller never saw, is closed first, not left to the collector.
    local tried, ok, e = pcall(connect_new, s, addr, port, locaddr, locport)
    if tried and ok then return s end
    s:close()
    if not tried then error(ok, 0) end
    err = e
    if e == "timeout" then break end
  end
  return nil, err
end

-- -- px.serve ------------------------------------------------------------------------

-- Errors of accept that say "no descriptor now" (LuaSocket's strerror text):
-- the loop sleeps a little instead of spinning.
local RESOURCE = { ["Too many open files"] = true, ["Too many open files in system"] = true,
                   ["Cannot allocate memory"] = true, ["No buffer space available"] = true }

local function run_handler(handler, tok, c)
  local ok, err = pcall(fibers.with_cancel, tok, handler, c)
  c:close()
  if not ok and not fibers.is_error(err, "ECANCELED") then
    -- An error tostring cannot show must not end this fiber instead of warning.
    local shown, text = pcall(tostring, err)
    warn("parataxis: px.serve: a handler raised: ",
         shown and text or "(an error value that tostring cannot show)")
  end
end

--- px.serve(host, port, handler [, backlog]): listens on host:port (as
-- px.socket.bind) and runs handler(client) in a new fiber for each connection,
-- closing the client when the handler returns or raises (its error goes to
-- warn()).  Returns the listening socket, or nil, err.  Closing it stops the
-- server: the accept loop ends and every handler still running is cancelled
-- (its waits raise ECANCELED and its connection is closed).
function M.serve(host, port, handler, backlog)
  if type(handler) ~= "function" and not (getmetatable(handler) or {}).__call then
    raise_arg("px.serve", 3, "handler", "a function", handler)
  end
  local srv, err = M.bind(host, port, backlog or 128)
  if not srv then return nil, err end
  local tok = fibers.token()
  -- Off a fiber the spawn raises: the listener, which the caller never gets,
  -- is closed first, not left holding the port until the collector runs.
  local spawned, why = pcall(fibers.spawn, function()
    while true do
      local c, e = srv:accept()
      if c then
        fibers.spawn(run_handler, handler, tok, c)
      elseif e == "closed" then
        break
      elseif RESOURCE[e] then
        fibers.sleep(0.1)
      elseif e ~= "timeout" then
        fibers.sleep(0.01)       -- a connection that failed before accept took it,
      end                        -- or an error that stays: a pause, never a spin
    end
    tok:cancel()
  end)
  if not spawned then
    srv:close()
    error(why, 0)
  end
  return srv
end

return M
