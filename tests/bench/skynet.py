"""Cold fan-outs (issue 25): skynet and a million parked fibers, parataxis beside
Go, Python's fiber libraries and a plain Lua coroutine scheduler.

    python3 tests/bench/skynet.py [--build DIR] [--quick] [--runs N]

Every case runs as a fresh process (no case starts on the stacks, pages or heap
another one left), --runs times (5; 1 with --quick), the cases of a section
interleaved round by round; each cell is the median of its runs.  A case
times itself on a monotonic clock around the work (a scheduler or loop made and
run to the answer) and reports its own peak RSS: VmHWM of /proc/self/status,
the high-water mark of its own image.  Not ru_maxrss: Linux carries that across
execve, so a child spawned from this driver would start from the driver's peak
(about 10 MB) -- a floor that would swallow the smallest rows.

  1. C skynet (1,000,000 leaves; 100,000 with --quick): each fiber spawns ten
     children down to the leaves, joins them in spawn order and returns the
     sum, checked (499999500000 at 1M).  parataxis with a stack per fiber and
     with 1 and 4 shared stacks (tests/bench/skynet_px.c) beside the usual Go
     program (goroutines, an unbuffered channel per node, GOMAXPROCS=1;
     tests/bench/go_skynet).  Time, peak RSS, minor faults.
  2. 1e6 parked (1e5 with --quick): N fibers each spawned and parked on one
     event until the main fiber, told by a wait group that all are parked,
     sets it; then all end.  Go: N goroutines each blocked on a receive of one
     channel that main closes, with two WaitGroups.
  3. Python skynet (100,000 leaves; 10,000 with --quick): px.spawn / join
     beside gevent (spawn / join), asyncio (tasks awaited in spawn order) and
     trio (a nursery per node, results in a list), each in a fresh interpreter:
     $PYTHON, else the project's .venv, else this interpreter.
  4. Lua skynet (1,000,000; 100,000 with --quick): px.spawn(fn):join() beside
     a hand-written scheduler of the same shape in plain Lua 5.4 (a FIFO ready
     queue of coroutines; a join parks the joiner until the child ends), both
     timed with parataxis.now().  Needs lua5.4 and DIR/bindings/parataxis_core.so.

Ratios are parataxis / peer: below 1, parataxis is faster or smaller.  The goals
of issue 25 end the output as "skynet target ..." lines, PASS, MISS or n/a.  A
peer that is missing prints n/a and skips its goals; a parataxis case that
fails (a crash, a wrong sum) makes the exit status 1.  The Python cases run as
`skynet.py --child py LIB LEAVES`, the Lua ones from LUA_CHILD below through
`lua5.4 -`.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from io_bench import built  # noqa: E402

TIMEOUT = 900  # seconds per process: a run that hangs is a failure, not a wait
NA = 3         # a child's exit status when its library is not importable


def peak_rss_kib():
    """VmHWM of /proc/self/status in KiB (-1 when unreadable)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


# ---------------------------------------------------------------------------
# The Python children: one library, one skynet, one line on stdout.
# ---------------------------------------------------------------------------

def py_parataxis(leaves):
    import parataxis as px

    def skynet(num, size):
        if size == 1:
            return num
        step = size // 10
        kids = [px.spawn(skynet, num + i * step, step) for i in range(10)]
        return sum(k.join() for k in kids)

    t0 = time.perf_counter()
    r = px.run(skynet, 0, leaves)
    return time.perf_counter() - t0, r


def py_gevent(leaves):
    import gevent

    def skynet(num, size):
        if size == 1:
            return num
        step = size // 10
        kids = [gevent.spawn(skynet, num + i * step, step) for i in range(10)]
        s = 0
        for k in kids:
            k.join()
            s += k.value
        return s

    t0 = time.perf_counter()
    root = gevent.spawn(skynet, 0, leaves)
    root.join()
    return time.perf_counter() - t0, root.value


def py_asyncio(leaves):
    import asyncio

    async def skynet(num, size):
        if size == 1:
            return num
        step = size // 10
        kids = [asyncio.create_task(skynet(num + i * step, step)) for i in range(10)]
        s = 0
        for k in kids:
            s += await k
        return s

    t0 = time.perf_counter()
    r = asyncio.run(skynet(0, leaves))
    return time.perf_counter() - t0, r


def py_trio(leaves):
    import trio

    async def skynet(out, slot, num, size):
        if size == 1:
            out[slot] = num
            return
        step = size // 10
        sums = [0] * 10
        async with trio.open_nursery() as nursery:
            for i in range(10):
                nursery.start_soon(skynet, sums, i, num + i * step, step)
        out[slot] = sum(sums)

    async def root(out):
        await skynet(out, 0, 0, leaves)

    out = [0]
    t0 = time.perf_counter()
    trio.run(root, out)
    return time.perf_counter() - t0, out[0]


PY_LIBS = {"parataxis": py_parataxis, "gevent": py_gevent,
           "asyncio": py_asyncio, "trio": py_trio}


def child_py(lib, leaves):
    try:
        t, r = PY_LIBS[lib](leaves)
    except ImportError as e:
        print(f"{lib}: {e}", file=sys.stderr)
        return NA
    if r != leaves * (leaves - 1) // 2:
        print(f"{lib}: sum {r}, want {leaves * (leaves - 1) // 2}", file=sys.stderr)
        return 1
    print(f"{t:.6f} {peak_rss_kib()} -")
    return 0


# ---------------------------------------------------------------------------
# The Lua children (`lua5.4 - WHICH LEAVES`, this text on stdin).
# ---------------------------------------------------------------------------

LUA_CHILD = r"""
local which, leaves = arg[1], math.tointeger(tonumber(arg[2]))
local px = require "parataxis"
local now = px.now   -- the library's monotonic clock; plain Lua has none

local function peak_rss_kib()
  local f = io.open("/proc/self/status")
  if not f then return -1 end
  for line in f:lines() do
    local kib = line:match("^VmHWM:%s*(%d+) kB")
    if kib then f:close(); return tonumber(kib) end
  end
  f:close()
  return -1
end

local function px_skynet(num, size)
  if size == 1 then return num end
  local step, kids, sum = size // 10, {}, 0
  for i = 0, 9 do kids[i + 1] = px.spawn(px_skynet, num + i * step, step) end
  for i = 1, 10 do sum = sum + kids[i]:join() end
  return sum
end

-- The plain scheduler: a ring of ready coroutines (FIFO, grows by doubling);
-- a task is {co, done, result, joiners}.  join parks the running task (it
-- yields, off the ring) on the child's joiners; a task's end puts its joiners
-- back on the ring in the order they joined.
local ring, head, count, cap = {}, 0, 0, 1024
local current

local function push(t)
  if count == cap then
    local grown = {}
    for i = 0, count - 1 do grown[i] = ring[(head + i) % cap] end
    ring, head, cap = grown, 0, cap * 2
  end
  ring[(head + count) % cap] = t
  count = count + 1
end

local function pop()
  local t = ring[head]
  ring[head] = nil
  head, count = (head + 1) % cap, count - 1
  return t
end

local function spawn(fn, ...)
  local args = table.pack(...)
  local t = { done = false, joiners = {} }
  t.co = coroutine.create(function() return fn(table.unpack(args, 1, args.n)) end)
  push(t)
  return t
end

local function join(t)
  if not t.done then
    local j = t.joiners
    j[#j + 1] = current
    coroutine.yield()
  end
  return t.result
end

local function run(fn, ...)
  local main = spawn(fn, ...)
  while count > 0 do
    local t = pop()
    current = t
    local ok, r = coroutine.resume(t.co)
    if not ok then error(r, 0) end
    if coroutine.status(t.co) == "dead" then
      t.done, t.result, t.co = true, r, nil
      for _, w in ipairs(t.joiners) do push(w) end
      t.joiners = nil
    end
  end
  return main.result
end

local function co_skynet(num, size)
  if size == 1 then return num end
  local step, kids, sum = size // 10, {}, 0
  for i = 0, 9 do kids[i + 1] = spawn(co_skynet, num + i * step, step) end
  for i = 1, 10 do sum = sum + join(kids[i]) end
  return sum
end

local t0, r = now()
if which == "parataxis" then
  r = px.run(px_skynet, 0, leaves)
elseif which == "coroutines" then
  r = run(co_skynet, 0, leaves)
else
  error("which: parataxis or coroutines")
end
local t = now() - t0
local want = leaves * (leaves - 1) // 2
if r ~= want then
  io.stderr:write(string.format("%s: sum %s, want %d\n", which, tostring(r), want))
  os.exit(1)
end
print(string.format("%.6f %d -", t, peak_rss_kib()))
"""


# ---------------------------------------------------------------------------
# The driver.
# ---------------------------------------------------------------------------

class Case:
    """One row: a command run --runs times, each a fresh process printing
    "<seconds> <peak RSS KiB> <minor faults or ->"."""

    def __init__(self, label, argv, env=None, stdin=None, peer=False):
        self.label, self.argv, self.env, self.stdin = label, argv, env, stdin
        self.peer = peer           # a peer's failure to import is n/a, not a failure
        self.samples = []          # (seconds, KiB, faults or None)
        self.na = None             # why the row is n/a
        self.failed = None         # why the row failed

    def run_once(self):
        if self.na or self.failed:
            return
        env = dict(os.environ, **(self.env or {}))
        try:
            p = subprocess.run(self.argv, input=self.stdin, env=env, text=True,
                               capture_output=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.failed = f"no answer in {TIMEOUT} s"
            return
        except OSError as e:
            self.na = str(e)
            return
        if p.returncode == NA and self.peer:
            self.na = "not importable"
            return
        try:
            t, kib, flt = p.stdout.split()
            if p.returncode != 0:
                raise ValueError
            self.samples.append((float(t), int(kib), None if flt == "-" else int(flt)))
        except ValueError:
            err = (p.stderr.strip().splitlines() or ["no output"])[-1]
            self.failed = f"exit {p.returncode}: {err}"

    def ok(self):
        return not (self.na or self.failed) and bool(self.samples)

    def time(self):
        return statistics.median(s[0] for s in self.samples)

    def rss_mb(self):
        return statistics.median(s[1] for s in self.samples) / 1024

    def faults(self):
        f = [s[2] for s in self.samples if s[2] is not None]
        return statistics.median(f) if f else None


def run_section(cases, runs):
    """Runs the cases round by round, the order rotating, so that a drift of
    the machine touches every row alike."""
    for r in range(runs):
        k = r % len(cases)
        for c in cases[k:] + cases[:k]:
            c.run_once()


def show(title, cases, faults):
    print(title)
    head = f"  {'':34} {'time (median)':>14} {'min-max':>15} {'peak RSS':>10}"
    print(head + (f" {'minor faults':>13}" if faults else ""))
    for c in cases:
        if not c.ok():
            print(f"  {c.label:34} n/a ({c.na})" if c.na else f"  {c.label:34} FAILED ({c.failed})")
            continue
        ts = [s[0] for s in c.samples]
        line = (f"  {c.label:34} {c.time():12.3f} s {min(ts):6.3f}-{max(ts):6.3f} s"
                f" {c.rss_mb():7.1f} MB")
        if faults:
            f = c.faults()
            line += f" {f:13,.0f}" if f is not None else f" {'-':>13}"
        print(line)


def ratios(cases, peer, faults):
    """One line per parataxis row: its time, peak RSS (and faults) over the peer's."""
    for c in cases:
        if c is peer:
            continue
        if not (c.ok() and peer.ok()):
            print(f"  ratio {c.label} / {peer.label}: n/a")
            continue
        line = (f"  ratio {c.label} / {peer.label}: time {c.time() / peer.time():.2f}x,"
                f" peak RSS {c.rss_mb() / peer.rss_mb():.2f}x")
        if faults and c.faults() and peer.faults():
            line += f", minor faults {c.faults() / peer.faults():.2f}x"
        print(line)


def goal(text, ours, theirs, value, bound):
    """A "skynet target" line: ours.value / theirs.value <= bound."""
    if not (ours.ok() and theirs.ok()):
        print(f"skynet target {text}: n/a")
        return
    r = value(ours) / value(theirs)
    print(f"skynet target {text}: {'PASS' if r <= bound else 'MISS'} ({r:.2f}x)")


def python_for_children():
    if os.environ.get("PYTHON"):
        return os.environ["PYTHON"]
    venv = os.path.join(ROOT, ".venv", "bin", "python")
    return venv if os.access(venv, os.X_OK) else sys.executable


def build_go(build):
    """Builds tests/bench/go_skynet as run.sh builds tests/bench/go: the build
    cache in the build dir, standard library only, nothing fetched."""
    go = shutil.which("go")
    if go is None:
        return None, "go not found"
    out = os.path.join(build, "go", "go_skynet")
    env = dict(os.environ, GOCACHE=os.path.join(build, "go", "cache"),
               GOPATH=os.path.join(build, "go", "path"), GOPROXY="off", GOFLAGS="",
               GO111MODULE="on", GOTOOLCHAIN="local")
    p = subprocess.run([go, "build", "-o", out, "."], cwd=os.path.join(HERE, "go_skynet"),
                       env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return None, "go build failed: " + (p.stderr.strip().splitlines() or ["?"])[-1]
    return out, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-bench"),
                    help="the CMake build dir with PARATAXIS_BENCH=ON (default build-bench)")
    ap.add_argument("--quick", action="store_true", help="1 run each, smaller sizes")
    ap.add_argument("--runs", type=int, help="processes per case (default 5, --quick 1)")
    ap.add_argument("--child", nargs=3, metavar=("py", "LIB", "LEAVES"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child_py(a.child[1], int(a.child[2]))

    build = os.path.abspath(a.build)
    runs = a.runs or (1 if a.quick else 5)
    c_leaves, parked_n = (100_000, 100_000) if a.quick else (1_000_000, 1_000_000)
    py_leaves = 10_000 if a.quick else 100_000
    lua_leaves = 100_000 if a.quick else 1_000_000
    status = 0
    print(f"skynet.py: {runs} fresh process(es) per case, medians; {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")

    px_exe = built(build, "skynet_px")
    gobin, go_why = build_go(build)
    gomax = {"GOMAXPROCS": "1"}

    def px_case(label, n, shared, mode):
        c = Case(label, [px_exe or "skynet_px", str(n), str(shared), mode])
        if px_exe is None:
            c.failed = f"no skynet_px in {build}/tests/bench (cmake -DPARATAXIS_BENCH=ON)"
        return c

    def go_case(n, mode):
        c = Case("go, GOMAXPROCS=1", [gobin or "go_skynet", str(n), mode], env=gomax, peer=True)
        c.na = go_why
        return c

    # 1. C skynet.
    go1 = go_case(c_leaves, "skynet")
    px0 = px_case("parataxis, default stacks", c_leaves, 0, "skynet")
    px1 = px_case("parataxis, 1 shared stack", c_leaves, 1, "skynet")
    px4 = px_case("parataxis, 4 shared stacks", c_leaves, 4, "skynet")
    cs = [go1, px0, px1, px4]
    run_section(cs, runs)
    show(f"== 1. C skynet, {c_leaves:,} leaves (sum {c_leaves * (c_leaves - 1) // 2})", cs, True)
    ratios(cs, go1, True)

    # 2. Parked.
    go2 = go_case(parked_n, "parked")
    pp0 = px_case("parataxis, default stacks", parked_n, 0, "parked")
    pp1 = px_case("parataxis, 1 shared stack", parked_n, 1, "parked")
    ps = [go2, pp0, pp1]
    run_section(ps, runs)
    show(f"== 2. {parked_n:,} parked: spawn, park all, release all, all end", ps, True)
    ratios(ps, go2, True)

    # 3. Python skynet.
    py = python_for_children()
    pys = [Case(lib, [py, os.path.abspath(__file__), "--child", "py", lib, str(py_leaves)],
                peer=True) for lib in PY_LIBS]
    run_section(pys, runs)
    show(f"== 3. Python skynet, {py_leaves:,} leaves ({py})", pys, False)
    pyx = pys[0]
    for c in pys[1:]:
        if pyx.ok() and c.ok():
            print(f"  ratio parataxis / {c.label}: time {pyx.time() / c.time():.2f}x,"
                  f" peak RSS {pyx.rss_mb() / c.rss_mb():.2f}x")
        else:
            print(f"  ratio parataxis / {c.label}: n/a")

    # 4. Lua skynet.
    lua = shutil.which("lua5.4")
    so = os.path.join(build, "bindings", "parataxis_core.so")
    lua_env = {"LUA_CPATH": os.path.join(build, "bindings", "?.so") + ";;",
               "LUA_PATH": os.path.join(ROOT, "bindings", "lua", "?.lua") + ";;"}
    lus = [Case(f"lua {w}", [lua or "lua5.4", "-", w, str(lua_leaves)], env=lua_env,
                stdin=LUA_CHILD) for w in ("parataxis", "coroutines")]
    if lua is None or not os.path.isfile(so):
        for c in lus:
            c.na = "no lua5.4" if lua is None else f"no {so}"
    run_section(lus, runs)
    show(f"== 4. Lua skynet, {lua_leaves:,} leaves (a plain FIFO coroutine scheduler beside)",
         lus, False)
    if lus[0].ok() and lus[1].ok():
        print(f"  ratio parataxis / coroutines: time {lus[0].time() / lus[1].time():.2f}x,"
              f" peak RSS {lus[0].rss_mb() / lus[1].rss_mb():.2f}x")

    # The goals of issue 25.
    goal("C skynet default stacks time <= 1.0x Go", px0, go1, Case.time, 1.0)
    goal("C skynet default stacks peak RSS <= 1.0x Go", px0, go1, Case.rss_mb, 1.0)
    goal("C skynet 1 shared stack time <= 0.7x Go", px1, go1, Case.time, 0.7)
    goal("C skynet 4 shared stacks time <= 0.7x Go", px4, go1, Case.time, 0.7)
    goal(f"{parked_n:,} parked time <= 1.0x Go", pp0, go2, Case.time, 1.0)
    asy = next(c for c in pys if c.label == "asyncio")
    goal("Python skynet peak RSS <= asyncio", pyx, asy, Case.rss_mb, 1.0)

    # A row that failed (a crash, a wrong sum, a hang) fails the run; a row
    # that is n/a (a missing peer, a Python without parataxis) does not.
    for c in cs + ps + pys + lus:
        if c.failed:
            print(f"skynet.py: FAILED: {c.label}: {c.failed}")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
