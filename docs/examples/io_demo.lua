-- io_demo.lua -- Lua fibers doing I/O: an echo server and its clients.
--
-- Run:  make demo   (or, from a build: LUA_CPATH="build/bindings/?.so;;"
--       LUA_PATH="bindings/lua/?.lua;;" lua5.4 docs/examples/io_demo.lua)
--
-- px.serve runs a fiber per connection on LuaSocket sockets whose waits park
-- only the fiber; three client fibers connect by name (looked up on the pool),
-- a receive on a quiet socket ends by its own timeout, and a file is written
-- and read on the blocking pool while the fibers run.
local px = require "parataxis"

local function echo(conn)              -- a fiber per connection; px.serve closes conn
  while true do
    local line = conn:receive("*l")    -- LuaSocket's patterns: a line
    if not line then return end        -- nil, "closed": the client is gone
    conn:send(line .. "\n")
  end
end

local function client(port, i)
  local c <close> = assert(px.socket.connect("localhost", port))
  c:send("hello from client " .. i .. "\n")
  print(string.format('client %d got back "%s"', i, c:receive("*l")))
end

px.run(function()
  local listener = assert(px.serve("127.0.0.1", 0, echo))
  local _, port = listener:getsockname()
  print("echo server on 127.0.0.1, port " .. port)
  local clients = {}
  for i = 0, 2 do clients[#clients + 1] = px.spawn(client, port, i) end
  for _, f in ipairs(clients) do f:join() end

  local quiet <close> = assert(px.socket.connect("127.0.0.1", port))
  quiet:settimeout(0.02)               -- LuaSocket's timeout: the fiber waits, the run goes on
  local _, err = quiet:receive("*l")
  print("receive on a quiet socket for 20 ms: " .. err)

  local path = os.tmpname()
  assert(px.write_file(path, "written on the pool"))
  print("px.read_file on the blocking pool got \"" .. px.read_file(path) .. "\"")
  os.remove(path)

  listener:close()                     -- stops the server: its handlers are cancelled
  print("server stopped: its listener was closed")
end)
