#!/usr/bin/env python3
"""io_python.py -- Python fiber I/O (issue 21) beside gevent, asyncio, uvloop and trio.

    python3 tests/bench/io_python.py [--build DIR] [--python PY] [--quick] [--runs R]
                                     [echo] [idle] [blocking]

With no section named, all three run.  DIR (default build-bench) holds the
load generator io_echo_load (a Release build with PARATAXIS_BENCH=ON; built
here when DIR is configured and it is missing).  PY runs every server and
every blocking-pool case (default $PYTHON, else this interpreter); it needs
parataxis installed (pip install .) and whichever peers are to be measured.
A peer PY cannot import is left out with a message; a parataxis that lacks
the fiber I/O API (create_server, serve_tcp, run_blocking) is a failure, and
the exit status is 1.  Every figure is the median of R runs (default 5;
--quick: 1 run and shorter windows), the servers interleaved in each run so
that the machine's noise hits them alike.  Servers run on CPU 0, the load
generator on CPU 1 (io_bench.py's rule).  The full default run takes about
six minutes on two cores.

echo      TCP echo of 1 KiB messages on 127.0.0.1 at N = 10 / 100 / 1,000
          connections, one server process at a time, driven by io_echo_load
          (each connection sends a message, reads all of it back, sends the
          next).  Server CPU per request = the server's utime + stime over the
          measured window (after a warm-up) / requests, read by the load
          generator from /proc; requests/s from the same window.  Servers,
          each a small program below (SERVERS) run as `PY -c SOURCE echo 0`:
            parataxis sockets  px.run; px.create_server, accept in a loop, a
                               fiber per connection: recv_into a 4 KiB
                               buffer, sendall of what came
            parataxis streams  px.serve_tcp; receive_some(65536), send_all
            gevent             gevent.server.StreamServer (no monkey
                               patching), recv_into a 4 KiB buffer, sendall
            asyncio streams    asyncio.start_server; read(65536), write, drain
            asyncio protocol   loop.create_server; data_received -> write
            uvloop streams     the asyncio streams server under uvloop.run
            trio               trio.serve_tcp; receive_some(65536), send_all
          Goals (issue 21), printed as "pyio target" lines: parataxis server
          CPU per request <= 0.5x gevent's and <= 1.0x uvloop streams', and
          requests/s >= gevent's, at every concurrency.
idle      Resident bytes per idle connection: the same servers run as
          `PY -c SOURCE idle 10000`; io_echo_load --hold (another process)
          opens 10,000 connections that send nothing; once every handler has
          reached its first read the server prints VmRSS after - before / N,
          before = at listening, after the imports and the loop's start.  The
          handlers of px sockets and gevent each hold their 4 KiB bytearray
          (about 4,080 B of their figure: 8.3 KB and 9.9 KB with a 16 B one
          here); the streams' handlers hold no buffer while they wait.
          parataxis sockets and streams, gevent, asyncio streams; median of 3
          runs (1 with --quick).  Needs RLIMIT_NOFILE >= 10,100 (raised to the
          hard limit here).
blocking  Round trip of an empty job through a thread pool, one job at a time
          in one process: px.run_blocking(f) in a fiber, trio.to_thread.run_sync,
          gevent.get_hub().threadpool.apply and asyncio's run_in_executor on the
          default executor.  Each call is timed alone (perf_counter_ns); a
          process prints the median and the mean of its calls after a warm-up,
          the figure is the median of the R processes' medians.  Twice: the
          process (its pool threads too) pinned to one CPU, where a round trip
          is the libraries' work and two thread switches, and free on two,
          where the pool thread usually wakes on the other, idle CPU and this
          machine's wake-up latency (tens of us on a VM) swamps the rest.
          Goal: parataxis <= 0.5x trio (a target line for each).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from io_bench import (CPU_LOAD, CPU_SERVER, built, fmt, last_words,  # noqa: E402
                      load_window, med, pinned, raise_nofile, ratio, read_line,
                      start_reporting, stop, window_figures)

IDLE_CONNS = 10000
REPORT_TIMEOUT = 180   # seconds a server may take to print a line before it is a failure

# ---------------------------------------------------------------- the servers

# Every server begins with this.  argv: MODE ("echo" or "idle") and N (the
# idle connections to wait for).  `parked` counts the handlers that reached
# their first read; `listening(port)` reads VmRSS (the idle baseline) and
# tells the driver the port; `report()` prints the idle line.
PRELUDE = r'''
import os, sys
MODE, N = sys.argv[1], int(sys.argv[2])
BUF, BACKLOG = 4096, 4096
parked = 0
before = 0

def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1

def listening(port):
    global before
    before = rss_kib()
    print("port", port, flush=True)

def report():
    after = rss_kib()
    print(f"rss parked {N} before_kib {before} after_kib {after} "
          f"bytes_per {(after - before) * 1024 / N:.0f}", flush=True)
'''

PX_SOCKETS = r'''
import parataxis as px

def handle(conn):
    global parked
    buf = bytearray(BUF)
    view = memoryview(buf)
    with conn:
        parked += 1
        while True:
            n = conn.recv_into(buf)
            if n == 0:
                return
            conn.sendall(view[:n])

def watch():
    while parked < N:
        px.sleep(0.02)
    px.sleep(0.1)
    report()

def main():
    lst = px.create_server(("127.0.0.1", 0), backlog=BACKLOG)
    if MODE == "idle":
        px.spawn(watch)
    listening(lst.getsockname()[1])
    while True:
        conn, _ = lst.accept()
        px.spawn(handle, conn)

px.run(main)
'''

PX_STREAMS = r'''
import parataxis as px

def handler(stream):
    global parked
    parked += 1
    while True:
        data = stream.receive_some(65536)
        if not data:
            return
        stream.send_all(data)

def watch():
    while parked < N:
        px.sleep(0.02)
    px.sleep(0.1)
    report()

def main():
    if MODE == "idle":
        px.spawn(watch)
    px.serve_tcp(handler, 0, "127.0.0.1", backlog=BACKLOG,
                 ready=lambda lst: listening(lst.getsockname()[1]))

px.run(main)
'''

GEVENT = r'''
import gevent, gevent.server

def handle(sock, addr):
    global parked
    buf = bytearray(BUF)
    view = memoryview(buf)
    parked += 1
    while True:
        n = sock.recv_into(buf)
        if n == 0:
            return
        sock.sendall(view[:n])

def watch():
    while parked < N:
        gevent.sleep(0.02)
    gevent.sleep(0.1)
    report()

server = gevent.server.StreamServer(("127.0.0.1", 0), handle, backlog=BACKLOG)
server.start()
if MODE == "idle":
    gevent.spawn(watch)
listening(server.server_port)
server.serve_forever()
'''

# The asyncio servers end with RUN(main()): asyncio.run, or uvloop.run.
ASYNCIO_WATCH = r'''
import asyncio

async def watch():
    while parked < N:
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)
    report()

async def serve(server):
    # The loop keeps only a weak reference to a task: this frame holds it.
    watcher = asyncio.create_task(watch()) if MODE == "idle" else None
    listening(server.sockets[0].getsockname()[1])
    await server.serve_forever()
    return watcher
'''

ASYNCIO_STREAMS = ASYNCIO_WATCH + r'''
async def handle(reader, writer):
    global parked
    parked += 1
    while True:
        data = await reader.read(65536)
        if not data:
            break
        writer.write(data)
        await writer.drain()
    writer.close()

async def main():
    await serve(await asyncio.start_server(handle, "127.0.0.1", 0, backlog=BACKLOG))

RUN(main())
'''

ASYNCIO_PROTOCOL = ASYNCIO_WATCH + r'''
class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        global parked
        parked += 1
        self.transport = transport

    def data_received(self, data):
        self.transport.write(data)

async def main():
    loop = asyncio.get_running_loop()
    await serve(await loop.create_server(Echo, "127.0.0.1", 0, backlog=BACKLOG))

RUN(main())
'''

TRIO = r'''
import functools, trio

async def handle(stream):
    global parked
    parked += 1
    while True:
        data = await stream.receive_some(65536)
        if not data:
            return
        await stream.send_all(data)

async def watch():
    while parked < N:
        await trio.sleep(0.02)
    await trio.sleep(0.1)
    report()

async def main():
    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, host="127.0.0.1", backlog=BACKLOG)
        listeners = await nursery.start(serve, handle, 0)
        if MODE == "idle":
            nursery.start_soon(watch)
        listening(listeners[0].socket.getsockname()[1])

trio.run(main)
'''

ASYNCIO_RUN = "import asyncio\nRUN = asyncio.run\n"
UVLOOP_RUN = "import asyncio, uvloop\nRUN = uvloop.run\n"

# name -> (the module it needs, source).  The order is the tables'.
SERVERS = {
    "px sockets": ("parataxis", PX_SOCKETS),
    "px streams": ("parataxis", PX_STREAMS),
    "gevent": ("gevent", GEVENT),
    "asyncio streams": ("asyncio", ASYNCIO_RUN + ASYNCIO_STREAMS),
    "asyncio protocol": ("asyncio", ASYNCIO_RUN + ASYNCIO_PROTOCOL),
    "uvloop streams": ("uvloop", UVLOOP_RUN + ASYNCIO_STREAMS),
    "trio": ("trio", TRIO),
}
IDLE_SERVERS = ("px sockets", "px streams", "gevent", "asyncio streams")
PX_ROWS = ("px sockets", "px streams")

# ---------------------------------------------------------------- the blocking pool

# argv: N calls (after N // 10 of warm-up).  Prints "blocking median_ns M mean_ns A".
BLOCKING_PRELUDE = r'''
import statistics, sys, time
N = int(sys.argv[1])
WARM = N // 10
clock = time.perf_counter_ns

def f():
    return None

def say(ts, total):
    print(f"blocking median_ns {statistics.median(ts):.0f} mean_ns {total / len(ts):.0f}")
'''

BLOCKING = {
    "parataxis": ("parataxis", r'''
import parataxis as px

def main():
    for _ in range(WARM):
        px.run_blocking(f)
    ts = [0] * N
    t0 = clock()
    for i in range(N):
        a = clock()
        px.run_blocking(f)
        ts[i] = clock() - a
    return ts, clock() - t0

say(*px.run(main))
'''),
    "trio": ("trio", r'''
import trio

async def main():
    for _ in range(WARM):
        await trio.to_thread.run_sync(f)
    ts = [0] * N
    t0 = clock()
    for i in range(N):
        a = clock()
        await trio.to_thread.run_sync(f)
        ts[i] = clock() - a
    return ts, clock() - t0

say(*trio.run(main))
'''),
    "gevent": ("gevent", r'''
import gevent

def main():
    pool = gevent.get_hub().threadpool
    for _ in range(WARM):
        pool.apply(f)
    ts = [0] * N
    t0 = clock()
    for i in range(N):
        a = clock()
        pool.apply(f)
        ts[i] = clock() - a
    return ts, clock() - t0

say(*main())
'''),
    "asyncio": ("asyncio", r'''
import asyncio

async def main():
    loop = asyncio.get_running_loop()
    for _ in range(WARM):
        await loop.run_in_executor(None, f)
    ts = [0] * N
    t0 = clock()
    for i in range(N):
        a = clock()
        await loop.run_in_executor(None, f)
        ts[i] = clock() - a
    return ts, clock() - t0

say(*asyncio.run(main()))
'''),
}

# ---------------------------------------------------------------- what PY has

PX_API = ("create_server", "serve_tcp", "run_blocking")

# Prints one line per module: "MODULE ok", "MODULE missing", or for parataxis
# "parataxis lacks NAME..." when it imports without the fiber I/O API.
PROBE = r'''
import importlib, sys
for m in sys.argv[1:]:
    try:
        mod = importlib.import_module(m)
    except ImportError as e:
        print(m, "missing", e)
        continue
    lacks = [a for a in %r if not hasattr(mod, a)] if m == "parataxis" else []
    if lacks:
        print(m, "lacks", *lacks)
    else:
        print(m, "ok")
''' % (PX_API,)


class Python:
    """The interpreter the servers and the pool cases run in, and what it can import."""

    def __init__(self, exe):
        self.exe = exe
        self.failures = []
        mods = sorted({m for m, _ in SERVERS.values()} | {m for m, _ in BLOCKING.values()})
        try:
            r = subprocess.run([exe, "-c", PROBE, *mods], capture_output=True, text=True)
        except OSError as e:
            sys.exit(f"io_python: cannot run {exe}: {e}")
        self.why = {}     # module -> why it is left out (absent: usable)
        for line in r.stdout.splitlines():
            f = line.split(None, 2)
            if f[1] == "missing":
                self.why[f[0]] = f"{exe} cannot import {f[0]}"
            elif f[1] == "lacks":
                self.why[f[0]] = (f"parataxis in {exe} lacks {f[2]} (the fiber I/O of "
                                  f"issue 21)")
        if r.returncode != 0 or len(r.stdout.splitlines()) != len(mods):
            sys.exit(f"io_python: {exe} did not run the probe: {r.stderr.strip()}")
        px = self.why.get("parataxis", "")
        if "lacks" in px:
            print(f"io_python: FAILED: {px}: its rows are empty")
            self.failures.append(px)

    def usable(self, names, table):
        """The names whose module imports; a message for each other one."""
        out = []
        for name in names:
            mod = table[name][0]
            if mod in self.why:
                print(f"({name}: left out: {self.why[mod]})")
            else:
                out.append(name)
        return out


def start_server(py, name, mode, n, err):
    """Runs SERVERS[name] pinned to the server CPU; (process, port) or (None, why)."""
    return start_reporting([py.exe, "-c", PRELUDE + SERVERS[name][1], mode, str(n)], err,
                           REPORT_TIMEOUT)


# ---------------------------------------------------------------- echo

def echo_once(py, load, name, conns, warm, span):
    with tempfile.TemporaryFile() as err:
        server, port = start_server(py, name, "echo", 0, err)
        if server is None:
            return None, port
        r, why = load_window(load, server, port, conns, warm, span)
        if r is None:
            return None, why
        if r.returncode != 0:
            return None, f"{r.stderr.strip()} (server: {last_words(err)})"
    v = window_figures(r.stdout)
    return (v, None) if v is not None else (None, "no request answered")


def run_echo(py, load, a):
    names = py.usable(SERVERS, SERVERS)
    conns = (10, 100, 1000)
    warm, span = (0.3, 0.7) if a.quick else (0.5, 2.0)
    print(f"== Python TCP echo, 1 KiB: server CPU per request (us, utime+stime over a {span} s "
          f"window after {warm} s of warm-up) and requests/s, median of {a.runs}; servers on "
          f"CPU {CPU_SERVER}, load on CPU {CPU_LOAD}; {py.exe}")
    res, clock = {}, set()
    for run in range(a.runs):
        for n in conns:
            for name in names:
                m, why = echo_once(py, load, name, n, warm, span)
                if m is None:
                    print(f"io_python: FAILED: echo {name} at {n} connections: {why}")
                    if name in PX_ROWS:
                        py.failures.append(f"echo {name}")
                else:
                    clock.add(m["clock"])
                res.setdefault((name, n), []).append(m)
        print(f"   (run {run + 1} of {a.runs} done)", file=sys.stderr)
    cell = {k: {key: med([m[key] for m in v if m]) for key in ("us", "kreq", "load")}
            for k, v in res.items()}
    every = list(SERVERS)

    def row(name, key):
        return [cell.get((name, n), {}).get(key) for n in conns]

    cols = "".join(f"{n:>8}" for n in conns)
    print(f"{'connections':<18}{cols}  {cols}  {cols}")
    print(f"{'':18}{'server CPU us/request':>24}  {'thousand requests/s':>24}  "
          f"{'load gen CPU/s':>24}")
    for name in every:
        line = f"{name:<18}"
        for key, spec in (("us", "8.2f"), ("kreq", "8.1f"), ("load", "8.2f")):
            line += "".join(fmt(x, spec, "       -") for x in row(name, key)) + "  "
        print(line.rstrip())
    print(f"(server CPU read from {'/'.join(sorted(clock)) or '-'}; load gen 1.00: saturated)")
    print("ratios parataxis / peer (CPU: lower is better; requests/s: higher is better)")
    print(f"{'':34}{cols}  {cols}")
    print(f"{'':34}{'server CPU us/request':>24}  {'requests/s':>24}")
    for px in PX_ROWS:
        for peer in ("gevent", "uvloop streams"):
            cpu = [ratio(x, y) for x, y in zip(row(px, "us"), row(peer, "us"))]
            rps = [ratio(x, y) for x, y in zip(row(px, "kreq"), row(peer, "kreq"))]
            print(f"{px + ' / ' + peer:<34}" + "".join(fmt(q, "8.2f", "       -") for q in cpu)
                  + "  " + "".join(fmt(q, "8.2f", "       -") for q in rps))
    for px in PX_ROWS:
        target(f"echo {px} cpu/req / gevent, worst", row(px, "us"),
               row("gevent", "us"), max, "<=", 0.5)
        target(f"echo {px} cpu/req / uvloop streams, worst", row(px, "us"),
               row("uvloop streams", "us"), max, "<=", 1.0)
        target(f"echo {px} requests/s / gevent, worst", row(px, "kreq"), row("gevent", "kreq"),
               min, ">=", 1.0)


def target(what, ours, theirs, worst, rel, bound):
    """A "pyio target" line: the worst cell's ratio ours / theirs against bound;
    n/a when a cell of either side is missing."""
    qs = [ratio(x, y) for x, y in zip(ours, theirs)]
    if not qs or None in qs:
        print(f"pyio target {what}: n/a (goal {rel} {bound})")
        return
    q = worst(qs)
    ok = q <= bound if rel == "<=" else q >= bound
    print(f"pyio target {what}: {'PASS' if ok else 'MISS'} ({q:.2f}x, goal {rel} {bound})")


# ---------------------------------------------------------------- idle

def idle_once(py, load, name, n):
    with tempfile.TemporaryFile() as err:
        server, port = start_server(py, name, "idle", n, err)
        if server is None:
            return None, port
        hold = subprocess.Popen([load, "--hold", str(port), str(n)], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, preexec_fn=pinned(CPU_LOAD))
        try:
            line = read_line(server, REPORT_TIMEOUT).split()
        finally:
            hold.stdin.close()
            hold.wait()
            stop(server)
        v = dict(zip(line[1::2], line[2::2]))
        if "bytes_per" not in v:
            return None, f"no rss line in {REPORT_TIMEOUT} s: {last_words(err)}"
    return float(v["bytes_per"]), None


def run_idle(py, load, a):
    n = IDLE_CONNS
    limit = raise_nofile()
    if limit < n + 100:
        print(f"(RLIMIT_NOFILE hard limit {limit} < {n + 100}: no idle rows)")
        return
    names = py.usable(IDLE_SERVERS, SERVERS)
    runs = 1 if a.quick else 3
    print(f"== resident bytes per idle connection, {n:,} TCP connections that send nothing "
          f"(VmRSS after - before / {n:,}; median of {runs}; px sockets and gevent include "
          f"their handler's 4 KiB buffer); {py.exe}")
    res = {}
    for _ in range(runs):
        for name in names:
            b, why = idle_once(py, load, name, n)
            if b is None:
                print(f"io_python: FAILED: idle {name}: {why}")
                if name in PX_ROWS:
                    py.failures.append(f"idle {name}")
            res.setdefault(name, []).append(b)
    b = {name: med(res.get(name, [])) for name in IDLE_SERVERS}
    for name in IDLE_SERVERS:
        print(f"{name:<18}{fmt(b[name], '8.0f', '       -')} B   ratio to gevent "
              f"{fmt(ratio(b[name], b['gevent']), '5.2f', '    -')}, to asyncio streams "
              f"{fmt(ratio(b[name], b['asyncio streams']), '5.2f', '    -')}")


# ---------------------------------------------------------------- blocking

def blocking_once(py, name, n, cpus):
    """One process of BLOCKING[name]: (median ns, mean ns), or None after a message."""
    r = subprocess.run([py.exe, "-c", BLOCKING_PRELUDE + BLOCKING[name][1], str(n)],
                       capture_output=True, text=True, timeout=600,
                       preexec_fn=(lambda: os.sched_setaffinity(0, cpus)))
    f = r.stdout.split()
    if r.returncode == 0 and len(f) == 5 and f[0] == "blocking":
        return float(f[2]), float(f[4])
    why = (r.stderr.strip().splitlines() or ["no message"])[-1]
    print(f"io_python: FAILED: blocking {name}: {why}")
    if name == "parataxis":
        py.failures.append("blocking parataxis")
    return None


def run_blocking(py, a):
    n = 5000 if a.quick else 20000
    names = py.usable(BLOCKING, BLOCKING)
    wheres = (("one CPU", {CPU_SERVER}), ("two CPUs", {CPU_SERVER, CPU_LOAD}))
    print(f"== empty job through a thread pool and back, ns per call: median of each process's "
          f"{n:,} calls (mean in brackets), median of {a.runs} processes; the process pinned "
          f"to one CPU (the software path) or free on two (a pool thread's wake-up on the "
          f"other, idle CPU adds this machine's wake-up latency); {py.exe}")
    res = {}
    for _ in range(a.runs):
        for where, cpus in wheres:
            for name in names:
                m = blocking_once(py, name, n, cpus)
                if m is not None:
                    res.setdefault((where, name), []).append(m)
    print(f"{'':12}" + "".join(f"{where:>22}{'px / it':>9}" for where, _ in wheres))
    cell = {}
    for where, _ in wheres:
        for name in BLOCKING:
            v = res.get((where, name), [])
            cell[where, name] = med([m for m, _ in v]), med([x for _, x in v])
    for name in BLOCKING:
        line = f"{name:<12}"
        for where, _ in wheres:
            m, mean = cell[where, name]
            q = ratio(cell[where, "parataxis"][0], m) if name != "parataxis" else None
            line += (f"{fmt(m, '8.0f', '       -')} ns {'(' + fmt(mean, '.0f', '-') + ')':>10}"
                     f"{fmt(q, '9.2f', '         ')}")
        print(line.rstrip())
    for where, _ in wheres:
        target(f"blocking round trip parataxis / trio, {where}", [cell[where, "parataxis"][0]],
               [cell[where, "trio"][0]], max, "<=", 0.5)


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sections", nargs="*", help="echo idle blocking (default: all)")
    ap.add_argument("--build", default="build-bench",
                    help="the CMake build dir with io_echo_load (default build-bench)")
    ap.add_argument("--python", default=os.environ.get("PYTHON") or sys.executable,
                    help="the interpreter of the servers and pool cases (default $PYTHON, "
                         "else this one)")
    ap.add_argument("--quick", action="store_true", help="1 run, shorter windows")
    ap.add_argument("--runs", type=int, help="runs per cell (default 5, --quick 1)")
    a = ap.parse_args()
    for s in a.sections:
        if s not in ("echo", "idle", "blocking"):
            ap.error(f"unknown section {s}")
    if not os.path.isdir(a.build):
        a.build = os.path.join(ROOT, a.build)
    build = os.path.abspath(a.build)
    if a.runs is None:
        a.runs = 1 if a.quick else 5
    sections = a.sections or ["echo", "idle", "blocking"]
    print(f"io_python.py: {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    py = Python(a.python)
    raise_nofile()
    load = built(build, "io_echo_load")
    if load is None and ("echo" in sections or "idle" in sections):
        print(f"io_python: FAILED: no io_echo_load in {build}/tests/bench (cmake "
              f"-DCMAKE_BUILD_TYPE=Release -DPARATAXIS_BENCH=ON; --target io_echo_load)")
        py.failures.append("io_echo_load")
        sections = [s for s in sections if s == "blocking"]
    if "echo" in sections:
        run_echo(py, load, a)
        sys.stdout.flush()
    if "idle" in sections:
        run_idle(py, load, a)
        sys.stdout.flush()
    if "blocking" in sections:
        run_blocking(py, a)
    if py.failures:
        print(f"io_python: FAILED: {', '.join(dict.fromkeys(py.failures))}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
