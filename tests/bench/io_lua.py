#!/usr/bin/env python3
"""io_lua.py -- Lua fiber I/O (issue 22) beside copas and a plain socket.select loop.

    python3 tests/bench/io_lua.py [--build DIR] [--installed] [--lua LUA] [--quick]
                                  [--runs R] [echo]

DIR (default build-bench) holds the load generator io_echo_load and the C
reference server io_echo_epoll (a Release build with PARATAXIS_BENCH=ON; built
here when DIR is configured and they are missing) and, unless --installed is
given, the Lua module: the parataxis server runs with
LUA_CPATH=DIR/bindings/?.so and LUA_PATH=bindings/lua/?.lua of this checkout
(the build tree's module, as tests/bench/run.sh runs bench_lua_fibers.lua);
--installed leaves both paths alone, so that the module LUA finds by itself
(luarocks make, cmake --install) is measured.  LUA (default lua5.4) runs every
Lua server.  The peers need LuaSocket (Debian lua-socket) and copas (Debian
lua-copas: Copas 1.1.7, installed for Lua 5.1 and 5.2 only but pure Lua, so
/usr/share/lua/5.2 is searched after LUA's own path, as bench_lua_fibers.lua
does; it needs lua-coxpcall).  A peer LUA cannot load is left out with a
message; a parataxis module that cannot be loaded or lacks px.serve (the fiber
I/O of issue 22) is a failure, and the exit status is 1.  Every figure is the
median of R runs (default 5; --quick: 1 run and shorter windows), the servers
interleaved in each run so that the machine's noise hits them alike.  Servers
run on CPU 0, the load generator on CPU 1 (io_bench.py's rule).  The full
default run takes about three minutes on two cores.

echo      TCP echo of 1 KiB messages on 127.0.0.1 at N = 10 / 100 / 1,000
          connections, one server process at a time, driven by io_echo_load
          (each connection sends a message, reads all of it back, sends the
          next).  Server CPU per request = the server's utime + stime over the
          measured window (after a warm-up) / requests, read by the load
          generator from /proc; requests/s from the same window.  The warm-up
          begins once every connection has had its first echo: copas 1.x
          accepts one connection per round of its loop and takes seconds to
          take 1,000 in (the "settle" lines).  Servers, each a small Lua
          program below (SERVERS) run as `LUA FILE`, every handler reading
          1024 bytes with LuaSocket's receive(1024) and sending them back:
            parataxis    px.run; px.serve("127.0.0.1", 0, handler), a fiber
                         per connection: c:receive(1024), c:send(d)
            copas        copas.addserver with a socket.bind listener, a
                         coroutine per connection on copas.wrap(skt):
                         receive(1024), send; copas.loop()
            select loop  no library: one socket.select(readers, writers)
                         loop over non-blocking sockets; accepts, receives
                         with receive(1024, partial) keeping the partial,
                         echoes with send, keeping an unsent rest and
                         selecting for write until it is out
          and a row that is not Lua, for reference:
            C epoll      io_bench.py's hand-written level-triggered epoll
                         loop (io_echo_epoll): one read and one write per
                         request, the floor this machine's loopback TCP sets
          copas 1.x waits in socket.select too, and LuaSocket's select refuses
          a descriptor >= FD_SETSIZE (1024): a peer that reaches it gives the
          cell "n/a: select limit" rather than a failure.  The LuaSocket
          listeners get a backlog of 4096 (LuaSocket's default is 32).
          Goal (issue 22), printed as a "luaio target" line: parataxis server
          CPU per request <= 0.5x copas's at every concurrency.  The ratios
          "above C epoll" compare what each server adds to the C floor (its
          figure minus C epoll's), for reading the goal's ratio; they are
          not a goal.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from io_bench import (CPU_LOAD, CPU_SERVER, built, fmt, last_words,  # noqa: E402
                      load_window, med, raise_nofile, ratio, said, start_reporting,
                      window_figures)

REPORT_TIMEOUT = 60    # seconds a server may take to say its port before it is a failure
CONNS = (10, 100, 1000)
SELECT_LIMIT = "select limit"   # what a cell says when socket.select refused an fd

# ---------------------------------------------------------------- the servers

# Every server begins with this.  `listening(port)` tells the driver the port;
# the driver reads nothing more from stdout.  Debian's copas lives in the Lua
# 5.2 tree only: that tree is searched after LUA's own path.
PRELUDE = r'''
package.path = package.path .. ";/usr/share/lua/5.3/?.lua;/usr/share/lua/5.2/?.lua"
local BACKLOG = 4096

local function listening(port)
  io.stdout:write("port ", tostring(port), "\n")
  io.stdout:flush()
end
'''

PARATAXIS = r'''
local px = require "parataxis"

local function handler(c)
  while true do
    local d = c:receive(1024)
    if not d then return end
    c:send(d)
  end
end

px.run(function()
  local srv = px.serve("127.0.0.1", 0, handler)
  local _, port = srv:getsockname()
  listening(port)
  -- main returns here: the run goes on while the server's accept fiber lives.
end)
'''

COPAS = r'''
local socket = require "socket"
local copas = require "copas"

local server = assert(socket.bind("127.0.0.1", 0, BACKLOG))
copas.addserver(server, function(skt)
  skt = copas.wrap(skt)
  while true do
    local d = skt:receive(1024)
    if not d then return end
    skt:send(d)
  end
end)
local _, port = server:getsockname()
listening(port)
copas.loop()
'''

# Readers and writers are the arrays socket.select takes, each with an index
# of its own (socket -> position) so that a socket leaves in O(1): the last
# one moves into its place.  A client is in readers while it waits for a
# message and in writers while the rest of an echo is unsent, never in both:
# the load generator sends its next message only after the whole echo.
SELECT_LOOP = r'''
local socket = require "socket"
local LIMIT = socket._SETSIZE or 1024

local function set()
  return { list = {}, at = {} }
end

local function add(s, x)
  if s.at[x] then return end
  local n = #s.list + 1
  s.list[n], s.at[x] = x, n
end

local function remove(s, x)
  local i = s.at[x]
  if not i then return end
  local n = #s.list
  local last = s.list[n]
  s.list[i], s.at[last] = last, i
  s.list[n], s.at[x] = nil, nil
end

local readers, writers = set(), set()
local partial = {}   -- client -> the bytes of a message received so far
local unsent = {}    -- client -> the rest of an echo send did not take

local function drop(c)
  remove(readers, c)
  remove(writers, c)
  partial[c], unsent[c] = nil, nil
  c:close()
end

-- Sends data to c, or keeps what send did not take and waits for writable.
local function echo(c, data)
  local last, err, sent = c:send(data)
  if last then
    unsent[c] = nil
    remove(writers, c)
    add(readers, c)
  elseif err == "timeout" then
    unsent[c] = data:sub(sent + 1)
    remove(readers, c)
    add(writers, c)
  else
    drop(c)
  end
end

local function receive(c)
  local data, err, part = c:receive(1024, partial[c])
  if data then
    partial[c] = nil
    echo(c, data)
  elseif err == "timeout" then
    partial[c] = part
  else
    drop(c)
  end
end

local server = assert(socket.bind("127.0.0.1", 0, BACKLOG))
server:settimeout(0)

-- Accepts every pending connection.  A descriptor socket.select cannot take
-- ends the server with a message the driver reports as the select limit.
local function accept()
  while true do
    local c = server:accept()
    if not c then return end
    if c:getfd() >= LIMIT then
      io.stderr:write("select limit: descriptor ", c:getfd(), " >= FD_SETSIZE ", LIMIT, "\n")
      os.exit(3)
    end
    c:settimeout(0)
    add(readers, c)
  end
end

add(readers, server)
local _, port = server:getsockname()
listening(port)
while true do
  local r, w = socket.select(readers.list, writers.list)
  for _, c in ipairs(w) do
    echo(c, unsent[c])
  end
  for _, c in ipairs(r) do
    if c == server then accept() else receive(c) end
  end
end
'''

# name -> (the module it needs, source).  The order is the table's.
SERVERS = {
    "parataxis": ("parataxis", PARATAXIS),
    "copas": ("copas", COPAS),
    "select loop": ("socket", SELECT_LOOP),
}
PX_ROW = "parataxis"
PEERS = ("copas", "select loop")
# Not Lua: the hand epoll loop in C of io_bench.py (one read and one write per
# request), a row of its own that says what of a figure is the kernel's.
FLOOR = "C epoll"
ROWS = [*SERVERS, FLOOR]

# ---------------------------------------------------------------- what LUA has

# Prints one line per module: "MODULE ok [WHAT]", "MODULE missing WHY", or for
# parataxis "parataxis lacks NAME..." when it loads without the fiber I/O API.
PROBE = PRELUDE + r'''
local API = { "serve" }
for _, m in ipairs(arg) do
  local ok, mod = pcall(require, m)
  if not ok then
    print(m, "missing", (tostring(mod):gsub("\n.*", "")))
  elseif m == "parataxis" then
    local lacks = {}
    for _, name in ipairs(API) do
      if type(mod[name]) ~= "function" then lacks[#lacks + 1] = "px." .. name end
    end
    print(m, #lacks > 0 and "lacks" or "ok", table.concat(lacks, " "))
  elseif m == "copas" then
    print(m, "ok", mod._VERSION or "?", package.searchpath("copas", package.path) or "")
  elseif m == "socket" then
    print(m, "ok", mod._VERSION or "?")
  else
    print(m, "ok")
  end
end
'''


class Lua:
    """The interpreter the servers run in, its environment, and what it can load."""

    def __init__(self, exe, build, installed):
        self.exe = exe
        self.failures = []
        self.env = dict(os.environ)
        if not installed:
            # ";;" keeps LUA's default paths after the build's (LuaSocket, copas).
            self.env["LUA_CPATH"] = os.path.join(build, "bindings", "?.so") + ";;"
            self.env["LUA_PATH"] = os.path.join(ROOT, "bindings", "lua", "?.lua") + ";;"
        self.where = "installed module" if installed else f"module of {build}"
        mods = sorted({m for m, _ in SERVERS.values()})
        with tempfile.NamedTemporaryFile("w", suffix=".lua") as f:
            f.write(PROBE)
            f.flush()
            try:
                r = subprocess.run([exe, f.name, *mods], capture_output=True, text=True,
                                   env=self.env, timeout=60)
            except (OSError, subprocess.TimeoutExpired) as e:
                sys.exit(f"io_lua: cannot run {exe}: {e}")
        lines = [line.split("\t") for line in r.stdout.splitlines()]
        if r.returncode != 0 or len(lines) != len(mods):
            sys.exit(f"io_lua: {exe} did not run the probe: {r.stderr.strip()}")
        self.why = {}     # module -> why it is left out (absent: usable)
        self.about = {}   # module -> what the probe said of it
        for f in lines:
            name, state, rest = f[0], f[1], " ".join(f[2:]).strip()
            if state == "missing":
                self.why[name] = f"{exe} cannot load {name}: {rest}"
            elif state == "lacks":
                self.why[name] = (f"parataxis ({self.where}) lacks {rest} (the fiber I/O "
                                  f"of issue 22)")
            else:
                self.about[name] = rest
        if "parataxis" in self.why:
            px = self.why["parataxis"]
            print(f"io_lua: FAILED: {px}: its rows are empty")
            self.failures.append(px)

    def usable(self, names):
        """The names whose module loads; a message for each other one."""
        out = []
        for name in names:
            mod = SERVERS[name][0]
            if mod in self.why:
                print(f"({name}: left out: {self.why[mod]})")
            else:
                out.append(name)
        return out


# ---------------------------------------------------------------- echo

def at_select_limit(err):
    """Whether the server ended on LuaSocket's select refusing an fd (copas's
    loop: an error with a traceback) or on the select loop's own check."""
    text = said(err)
    return SELECT_LIMIT in text or "too large for set size" in text


def echo_once(lua, load, argv, conns, warm, span):
    """One window against the server argv: a dict of figures, or (None, why);
    why is SELECT_LIMIT when select refused an fd."""
    with tempfile.TemporaryFile() as err:
        server, port = start_reporting(argv, err, REPORT_TIMEOUT, lua.env)
        if server is None:
            return None, port
        r, why = load_window(load, server, port, conns, warm, span)
        if r is None:
            return None, why
        if r.returncode != 0:
            if at_select_limit(err):
                return None, SELECT_LIMIT
            return None, f"{r.stderr.strip()} (server: {last_words(err)})"
    v = window_figures(r.stdout)
    return (v, None) if v is not None else (None, "no request answered")


def write_servers(lua, names, tmp):
    """The command of each server in names, a Lua program written as a file in
    tmp (a traceback then names it): name -> argv."""
    argv = {}
    for name in names:
        path = os.path.join(tmp, "echo_" + name.replace(" ", "_") + ".lua")
        with open(path, "w") as f:
            f.write(PRELUDE + SERVERS[name][1])
        argv[name] = [lua.exe, path]
    return argv


def run_echo(lua, load, build, a):
    names = lua.usable(SERVERS)
    floor = built(build, "io_echo_epoll")
    if floor is None:
        print(f"({FLOOR}: left out: no io_echo_epoll in {build}/tests/bench)")
    warm, span = (0.3, 0.7) if a.quick else (0.5, 2.0)
    print(f"== Lua TCP echo, 1 KiB: server CPU per request (us, utime+stime over a {span} s "
          f"window after {warm} s of warm-up from every connection's first echo) and "
          f"requests/s, median of {a.runs}; servers on "
          f"CPU {CPU_SERVER}, load on CPU {CPU_LOAD}; {lua.exe}, parataxis: {lua.where}; "
          f"copas: {lua.about.get('copas', '-')}; LuaSocket {lua.about.get('socket', '-')}")
    res, clock, limited = {}, set(), set()
    with tempfile.TemporaryDirectory(prefix="io_lua.") as tmp:
        argv = write_servers(lua, names, tmp)
        if floor:
            argv[FLOOR] = [floor]
        for run in range(a.runs):
            for n in CONNS:
                for name in argv:
                    if (name, n) in limited:
                        continue
                    m, why = echo_once(lua, load, argv[name], n, warm, span)
                    if why == SELECT_LIMIT and name != PX_ROW:
                        limited.add((name, n))
                    elif m is None:
                        print(f"io_lua: FAILED: echo {name} at {n} connections: {why}")
                        if name == PX_ROW:
                            lua.failures.append(f"echo {name}")
                    else:
                        clock.add(m["clock"])
                    res.setdefault((name, n), []).append(m)
            print(f"   (run {run + 1} of {a.runs} done)", file=sys.stderr)
    cell = {k: {key: med([m[key] for m in v if m]) for key in ("us", "kreq", "load", "settle")}
            for k, v in res.items()}

    def row(name, key):
        return [None if (name, n) in limited else cell.get((name, n), {}).get(key)
                for n in CONNS]

    def shown(name, n, x, spec):
        return f"{'n/a*':>8}" if (name, n) in limited else fmt(x, spec, "       -")

    cols = "".join(f"{n:>8}" for n in CONNS)
    print(f"{'connections':<14}{cols}  {cols}  {cols}")
    print(f"{'':14}{'server CPU us/request':>24}  {'thousand requests/s':>24}  "
          f"{'load gen CPU/s':>24}")
    for name in ROWS:
        line = f"{name:<14}"
        for key, spec in (("us", "8.2f"), ("kreq", "8.1f"), ("load", "8.2f")):
            line += "".join(shown(name, n, x, spec)
                            for n, x in zip(CONNS, row(name, key))) + "  "
        print(line.rstrip())
    print(f"(server CPU read from {'/'.join(sorted(clock)) or '-'}; load gen 1.00: saturated; "
          f"{FLOOR}: tests/bench/io_echo_epoll, the floor of this machine's loopback TCP)")
    print("settle: seconds from the last connect to every connection's first echo, "
          "before the warm-up (median)")
    for name in ROWS:
        print(f"{name:<14}" + "".join(shown(name, n, x, "8.2f")
                                      for n, x in zip(CONNS, row(name, "settle"))))
    for name, n in sorted(limited, key=lambda k: (ROWS.index(k[0]), k[1])):
        print(f"* {name} at {n:,} connections: n/a: {SELECT_LIMIT} (socket.select refuses "
              f"a descriptor >= FD_SETSIZE, 1024)")
    print("ratios parataxis / peer (CPU: lower is better; requests/s: higher is better)")
    print(f"{'':34}{cols}  {cols}")
    print(f"{'':34}{'server CPU us/request':>24}  {'requests/s':>24}")
    for peer in PEERS:
        cpu = [ratio(x, y) for x, y in zip(row(PX_ROW, "us"), row(peer, "us"))]
        rps = [ratio(x, y) for x, y in zip(row(PX_ROW, "kreq"), row(peer, "kreq"))]
        print(f"{PX_ROW + ' / ' + peer:<34}" + "".join(fmt(q, "8.2f", "       -") for q in cpu)
              + "  " + "".join(fmt(q, "8.2f", "       -") for q in rps))
    # What the kernel's loopback TCP costs every server alike, taken out: the
    # ratio of what each server adds to it (for reading a MISS; not a goal).
    for peer in PEERS:
        qs = [ratio(minus(x, f), minus(y, f)) for x, y, f in
              zip(row(PX_ROW, "us"), row(peer, "us"), row(FLOOR, "us"))]
        print(f"{'above ' + FLOOR + ': px / ' + peer:<34}" +
              "".join(fmt(q, "8.2f", "       -") for q in qs))
    target(f"echo {PX_ROW} cpu/req / copas, worst", row(PX_ROW, "us"), row("copas", "us"),
           max, "<=", 0.5)


def minus(x, y):
    return None if x is None or y is None else x - y


def target(what, ours, theirs, worst, rel, bound):
    """A "luaio target" line: the worst cell's ratio ours / theirs against
    bound; n/a when a cell of either side is missing."""
    qs = [ratio(x, y) for x, y in zip(ours, theirs)]
    if not qs or None in qs:
        print(f"luaio target {what}: n/a (goal {rel} {bound})")
        return
    q = worst(qs)
    ok = q <= bound if rel == "<=" else q >= bound
    print(f"luaio target {what}: {'PASS' if ok else 'MISS'} ({q:.2f}x, goal {rel} {bound})")


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sections", nargs="*", help="echo (default: all)")
    ap.add_argument("--build", default="build-bench",
                    help="the CMake build dir with io_echo_load and the Lua module "
                         "(default build-bench)")
    ap.add_argument("--installed", action="store_true",
                    help="measure the parataxis module LUA finds itself, not the build's")
    ap.add_argument("--lua", default="lua5.4", help="the interpreter of the servers "
                                                    "(default lua5.4)")
    ap.add_argument("--quick", action="store_true", help="1 run, shorter windows")
    ap.add_argument("--runs", type=int, help="runs per cell (default 5, --quick 1)")
    a = ap.parse_args()
    for s in a.sections:
        if s != "echo":
            ap.error(f"unknown section {s}")
    if not os.path.isdir(a.build):
        a.build = os.path.join(ROOT, a.build)
    build = os.path.abspath(a.build)
    if a.runs is None:
        a.runs = 1 if a.quick else 5
    if shutil.which(a.lua) is None:
        sys.exit(f"io_lua: no {a.lua} (Debian lua5.4)")
    print(f"io_lua.py: {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    lua = Lua(a.lua, build, a.installed)
    # 1,000 connections and the listener: the servers inherit the raised limit.
    raise_nofile()
    load = built(build, "io_echo_load")
    if load is None:
        print(f"io_lua: FAILED: no io_echo_load in {build}/tests/bench (cmake "
              f"-DCMAKE_BUILD_TYPE=Release -DPARATAXIS_BENCH=ON; --target io_echo_load)")
        lua.failures.append("io_echo_load")
    else:
        run_echo(lua, load, build, a)
    if lua.failures:
        print(f"io_lua: FAILED: {', '.join(dict.fromkeys(lua.failures))}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
