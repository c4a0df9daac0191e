#!/usr/bin/env python3
"""io_bench.py -- the I/O benchmarks of issue 20, peers in the same run.

    python3 tests/bench/io_bench.py [--build DIR] [--quick] [--runs R] [--base REV]
                                    [echo] [latency] [lateness] [rss]

With no section named, all four run.  DIR (default build-bench) holds the
programs (cmake --build DIR: the io_* targets of tests/bench/CMakeLists.txt);
the Go program (tests/bench/go_io) is built here into DIR/go/io_go when `go` is
found (Debian golang-go).  A peer that is missing is left out with a message.
Every figure is the median of R runs (default 5; --quick: 1 run, shorter
windows), the peers interleaved in each run so that the machine's noise hits
them alike.  Servers and loops run on CPU 0, the load generator (and the
pinger thread of the cross-CPU case) on CPU 1.

echo      TCP echo on 127.0.0.1, one server process at a time (parataxis: a
          fiber per connection, px_accept/px_recv/px_send; parataxis-shared: the
          same on shared stacks; libuv; Go with GOMAXPROCS=1; a hand-written
          level-triggered epoll loop), driven by io_echo_load: N connections
          each sending a message and reading all of it back, 1 KiB and 16 KiB,
          N = 10 / 100 / 1,000.  Server CPU per request = the server's utime +
          stime over the measured window (after a warm-up) / requests.
latency   Wake latency, median ns per round trip: two tasks of one loop
          ping-ponging a byte over two pipes (fibers, goroutines, uv_poll
          callbacks), and a thread writing a pipe that the loop reads and
          answers on another pipe -- the thread on the loop's CPU (the software
          path) and on the other CPU (the cross-CPU wake, where this machine's
          idle wake-up dominates).
lateness  How late a fiber's 50 us px_sleep wakes, p50 / p99, with no fd and
          with 1,000 idle fds registered (fibers parked in px_wait_fd), beside
          clock_nanosleep on a plain thread (the machine's floor).  --base REV
          also builds io_lateness against the library of git revision REV (say,
          the commit before the I/O layer) and runs it in the same rounds:
          "today's figure" with no fd.
rss       Resident bytes per fiber parked in px_recv at 10,000 TCP connections
          (own stacks and shared stacks) vs goroutines parked in conn.Read; the
          client ends live in another process (io_echo_load --hold).
"""

import argparse
import os
import shutil
import select
import signal
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def cpus():
    have = sorted(os.sched_getaffinity(0))
    if len(have) >= 2:
        return have[0], have[1]
    print("io_bench: one CPU only: server and load share it", file=sys.stderr)
    return have[0], have[0]


CPU_SERVER, CPU_LOAD = cpus()


def pinned(cpu):
    return lambda: os.sched_setaffinity(0, {cpu})


def raise_nofile():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def go_build(build):
    if shutil.which("go") is None:
        print("(go not found: no Go rows; .ci/deps bench installs Debian's golang-go)")
        return None
    out = os.path.join(build, "go", "io_go")
    env = dict(os.environ, GOCACHE=os.path.join(build, "go", "cache"),
               GOPATH=os.path.join(build, "go", "path"), GOPROXY="off", GOFLAGS="",
               GO111MODULE="on", GOTOOLCHAIN="local")
    r = subprocess.run(["go", "build", "-o", out, "."], cwd=os.path.join(HERE, "go_io"),
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        print("io_bench: FAILED: go build of tests/bench/go_io")
        return None
    return out


def built(build, target):
    """DIR/tests/bench/TARGET, built when missing in a configured DIR; None
    when it cannot be had."""
    exe = os.path.join(build, "tests", "bench", target)
    if not os.access(exe, os.X_OK) and os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        subprocess.run(["cmake", "--build", build, "--target", target], capture_output=True)
    return exe if os.access(exe, os.X_OK) else None


class Peers:
    def __init__(self, build):
        self.bin = os.path.join(build, "tests", "bench")
        self.go = go_build(build)

    def path(self, name):
        p = os.path.join(self.bin, name)
        return p if os.access(p, os.X_OK) else None

    def have(self, *names):
        missing = [n for n in names if self.path(n) is None]
        for n in missing:
            print(f"({n} not built in {self.bin}: its rows are left out)")
        return not missing


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec="8.2f", none="       -"):
    return none if x is None else format(x, spec)


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


# ---------------------------------------------------------------- echo

def start_server(argv, env=None):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env,
                         preexec_fn=pinned(CPU_SERVER))
    line = p.stdout.readline().split()
    if len(line) != 2 or line[0] != "port":
        p.kill()
        p.wait()
        raise RuntimeError(f"{argv[0]} did not say its port")
    return p, int(line[1])


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


# The helpers of io_python.py and io_lua.py, whose servers are programs of
# another language that say "port N" on their first line.

def read_line(p, timeout):
    """p's next stdout line, or "" if it ended or said nothing for timeout s."""
    ready, _, _ = select.select([p.stdout], [], [], timeout)
    return p.stdout.readline() if ready else ""


def said(err):
    """All a server wrote to its stderr (the file err)."""
    err.seek(0)
    return err.read().decode(errors="replace").strip()


def last_words(err):
    """The last line a server wrote to its stderr (the file err)."""
    lines = said(err).splitlines()
    return lines[-1] if lines else "no message"


def start_reporting(argv, err, timeout, env=None):
    """Runs argv pinned to the server CPU, its stderr into the file err:
    (process, port) once it said its port within timeout s, or (None, why)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                         preexec_fn=pinned(CPU_SERVER))
    f = read_line(p, timeout).split()
    if len(f) == 2 and f[0] == "port":
        return p, int(f[1])
    stop(p)
    return None, f"did not say its port: {last_words(err)}"


def load_window(load, server, port, conns, warm, span):
    """io_echo_load on the load CPU against server (a process) on port, then
    stops the server: (the load generator's completed run, None), or (None,
    why) when it hung."""
    try:
        r = subprocess.run([load, str(port), str(conns), "1024", str(warm), str(span),
                            str(server.pid)], capture_output=True, text=True,
                           preexec_fn=pinned(CPU_LOAD), timeout=warm + span + 120)
    except subprocess.TimeoutExpired:
        return None, "the load generator timed out"
    finally:
        stop(server)
    return r, None


def window_figures(stdout):
    """The figures of io_echo_load's report line (us, kreq, load, settle,
    clock), or None when no request was answered."""
    f = stdout.split()
    v = dict(zip(f[0::2], f[1::2]))
    req, secs = int(v["requests"]), float(v["seconds"])
    if req == 0:
        return None
    return {"us": float(v["server_cpu_s"]) / req * 1e6, "kreq": req / secs / 1e3,
            "load": float(v["load_cpu_s"]) / secs, "settle": float(v.get("settle_s", "nan")),
            "clock": v.get("clock", "?")}


def echo_servers(peers):
    s = []
    if peers.path("io_echo_px"):
        s.append(("parataxis", [peers.path("io_echo_px")], None))
        s.append(("px-shared", [peers.path("io_echo_px"), "shared"], None))
    else:
        print("(io_echo_px not built: no parataxis rows; it needs px_recv in parataxis.h)")
    if peers.path("io_echo_uv"):
        s.append(("libuv", [peers.path("io_echo_uv")], None))
    if peers.go:
        s.append(("go", [peers.go, "echo"], dict(os.environ, GOMAXPROCS="1")))
    if peers.path("io_echo_epoll"):
        s.append(("epoll", [peers.path("io_echo_epoll")], None))
    return s


def echo_once(peers, argv, env, conns, size, warm, span):
    server, port = start_server(argv, env)
    try:
        r = subprocess.run([peers.path("io_echo_load"), str(port), str(conns), str(size),
                            str(warm), str(span), str(server.pid)],
                           capture_output=True, text=True, preexec_fn=pinned(CPU_LOAD),
                           timeout=warm + span + 120)
    finally:
        stop(server)
    if r.returncode != 0:
        print(f"io_bench: FAILED: load against {argv}: {r.stderr.strip()}")
        return None
    f = r.stdout.split()
    v = dict(zip(f[0::2], f[1::2]))
    req = int(v["requests"])
    if req == 0:
        return None
    return {"us": float(v["server_cpu_s"]) / req * 1e6,
            "kreq": req / float(v["seconds"]) / 1e3,
            "load": float(v["load_cpu_s"]) / float(v["seconds"]),
            "clock": v.get("clock", "?")}


def run_echo(peers, a):
    if not peers.have("io_echo_load"):
        return
    servers = echo_servers(peers)
    sizes, conns = (1024, 16384), (10, 100, 1000)
    warm, span = (0.3, 0.7) if a.quick else (0.5, 2.0)
    print(f"== TCP echo: server CPU per request (us, utime+stime over a {span} s window after "
          f"{warm} s of warm-up, median of {a.runs}); servers on CPU {CPU_SERVER}, load on "
          f"CPU {CPU_LOAD}")
    res = {}
    clock = set()
    for run in range(a.runs):
        for size in sizes:
            for n in conns:
                for name, argv, env in servers:
                    m = echo_once(peers, argv, env, n, size, warm, span)
                    res.setdefault((size, n, name), []).append(m)
                    if m:
                        clock.add(m["clock"])
        print(f"   (run {run + 1} of {a.runs} done)", file=sys.stderr)
    names = [s[0] for s in servers]

    def table(key, title, spec):
        print(title)
        head = "size   conns " + "".join(f"{n:>11}" for n in names)
        ratios = [("parataxis", "libuv"), ("parataxis", "go"), ("px-shared", "libuv"),
                  ("px-shared", "go")] if key == "us" else []
        ratios = [r for r in ratios if r[0] in names and r[1] in names]
        short = {"parataxis": "px", "px-shared": "pxs"}
        head += "".join(f"{short[r[0]] + '/' + r[1]:>11}" for r in ratios)
        print(head)
        worst = {}
        for size in sizes:
            for n in conns:
                row = {nm: med([m[key] for m in res[(size, n, nm)] if m]) for nm in names}
                line = f"{size // 1024:>2} KiB {n:>5} " + "".join(
                    f"{fmt(row[nm], spec, '          -'):>11}" for nm in names)
                for r in ratios:
                    q = ratio(row[r[0]], row[r[1]])
                    line += f"{fmt(q, '.2f', '-'):>11}"
                    if q is not None:
                        worst[r] = max(worst.get(r, 0), q)
                print(line)
        return worst

    worst = table("us", "server CPU us / request (lower is better); ratios: parataxis / peer",
                  "11.2f")
    table("kreq", "thousand requests / s (the load generator, one core, often saturates first)",
          "11.1f")
    table("load", "load generator CPU / s (1.00: saturated)", "11.2f")
    print(f"(server CPU read from {'/'.join(sorted(clock))})")
    for (x, y), q in worst.items():
        goal = 1.0 if y == "libuv" else 0.8
        print(f"io target echo cpu/req {x}/{y}: worst cell {q:.2f} (goal <= {goal})")


# ---------------------------------------------------------------- latency

def parse_lines(text, first):
    out = {}
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == first:
            out[tuple(f[1:3])] = dict(zip(f[3::2], (float(x) for x in f[4::2])))
    return out


def run_latency(peers, a):
    n = 20000 if a.quick else 100000
    progs = []
    if peers.path("io_latency_px"):
        progs.append(("parataxis", [peers.path("io_latency_px"), str(n)], None))
    else:
        print("(io_latency_px not built: no parataxis rows)")
    if peers.path("io_latency_uv"):
        progs.append(("libuv", [peers.path("io_latency_uv"), str(n)], None))
    if peers.go:
        progs.append(("go", [peers.go, "latency", str(n)], dict(os.environ, GOMAXPROCS="1")))
    print(f"== wake latency: median ns per round trip ({n} trips, the first tenth a warm-up; "
          f"median of {a.runs} runs)")
    res = {}
    for run in range(a.runs):
        for where, cpu in (("same CPU", CPU_SERVER), ("other CPU", CPU_LOAD)):
            for name, argv, env in progs:
                e = dict(env or os.environ, PXB_PINGER_CPU=str(cpu))
                r = subprocess.run(argv, capture_output=True, text=True, env=e,
                                   preexec_fn=pinned(CPU_SERVER), timeout=600)
                if r.returncode != 0:
                    print(f"io_bench: FAILED: {argv}: {r.stderr.strip()}")
                    continue
                for (peer, case), v in parse_lines(r.stdout, "latency").items():
                    if case == "thread->loop":
                        case += f" ({where})"
                    elif cpu != CPU_SERVER:
                        continue   # the loop<->loop case once per run
                    res.setdefault((case, name), []).append(v)
    names = [p[0] for p in progs]
    cases = ["loop<->loop", "thread->loop (same CPU)", "thread->loop (other CPU)"]
    targets = []
    print(f"{'case':<26}" + "".join(f"{nm:>16}" for nm in names) + "    px/libuv   px/go")
    for c in cases:
        row = {nm: (med([v["median_ns"] for v in res.get((c, nm), [])]),
                    med([v["p99_ns"] for v in res.get((c, nm), [])])) for nm in names}
        line = f"{c:<26}" + "".join(
            f"{fmt(row[nm][0], '.0f', '-'):>8} p99 {fmt(row[nm][1], '.0f', '-'):>3}"
            if row[nm][0] is not None else f"{'-':>16}" for nm in names)
        px = row.get("parataxis", (None,))[0]
        line += f"{fmt(ratio(px, row.get('libuv', (None,))[0]), '.2f', '-'):>11}"
        line += f"{fmt(ratio(px, row.get('go', (None,))[0]), '.2f', '-'):>8}"
        print(line)
        if px is not None:
            targets.append(f"io target latency {c}: px/libuv "
                           f"{fmt(ratio(px, row.get('libuv', (None,))[0]), '.2f', '-')}, px/go "
                           f"{fmt(ratio(px, row.get('go', (None,))[0]), '.2f', '-')} "
                           f"(goal <= 1 both)")
    for t in targets:
        print(t)


# ---------------------------------------------------------------- lateness

def build_base(rev, build):
    """io_lateness (-DPXB_NO_IO) against the library of git revision rev."""
    src = tempfile.mkdtemp(prefix="pxb-base-")
    try:
        arch = subprocess.run(["git", "-C", ROOT, "archive", rev], capture_output=True,
                              check=True).stdout
        subprocess.run(["tar", "-x", "-C", src], input=arch, check=True)
        b = os.path.join(src, "build")
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.run(["cmake", "-S", src, "-B", b, *gen, "-DCMAKE_BUILD_TYPE=Release",
                        "-DPARATAXIS_TESTS=OFF"], check=True, capture_output=True)
        subprocess.run(["cmake", "--build", b, "-j2", "--target", "parataxis_static"],
                       check=True, capture_output=True)
        lib = os.path.join(b, "libparataxis.a")
        out = os.path.join(build, "tests", "bench", "io_lateness_base")
        subprocess.run(["cc", "-O2", "-std=c11", "-DPXB_NO_IO", "-I",
                        os.path.join(src, "core", "include"), os.path.join(HERE, "io_lateness.c"),
                        lib, "-pthread", "-o", out], check=True)
        return out
    except (subprocess.CalledProcessError, OSError) as e:
        print(f"io_bench: FAILED: building io_lateness against {rev}: {e}")
        return None
    finally:
        shutil.rmtree(src, ignore_errors=True)


def run_lateness(peers, a):
    if not peers.have("io_lateness"):
        return
    sleeps = 2000 if a.quick else 10000
    lat = peers.path("io_lateness")
    rows = [("nanosleep (floor)", [lat, "-1", str(sleeps)]),
            ("parataxis, no fd", [lat, "0", str(sleeps)]),
            ("parataxis, 1,000 idle fds", [lat, "1000", str(sleeps)])]
    if a.base:
        base = build_base(a.base, a.build)
        if base:
            rows.insert(1, (f"{a.base[:10]}, no fd", [base, "0", str(sleeps)]))
    print(f"== timer lateness of 50 us sleeps (ns late; {sleeps} sleeps, the first tenth a "
          f"warm-up; median of {a.runs} runs), on CPU {CPU_SERVER}")
    res = {}
    for run in range(a.runs):
        for name, argv in rows:
            r = subprocess.run(argv, capture_output=True, text=True,
                               preexec_fn=pinned(CPU_SERVER), timeout=600)
            if r.returncode != 0:
                print(f"io_bench: FAILED: {argv}: {r.stderr.strip()}")
                continue
            for _, v in parse_lines(r.stdout, "lateness").items():
                res.setdefault(name, []).append(v)
    print(f"{'':<28}{'p50':>9}{'p99':>9}{'max':>11}")
    p50 = {}
    for name, _ in rows:
        v = res.get(name, [])
        p50[name] = med([x["p50_ns"] for x in v])
        print(f"{name:<28}{fmt(p50[name], '9.0f', '        -')}"
              f"{fmt(med([x['p99_ns'] for x in v]), '9.0f', '        -')}"
              f"{fmt(med([x['max_ns'] for x in v]), '11.0f', '          -')}")
    ref = f"{a.base[:10]}, no fd" if a.base and f"{a.base[:10]}, no fd" in p50 else \
        "parataxis, no fd"
    q = ratio(p50.get("parataxis, 1,000 idle fds"), p50.get(ref))
    print(f"io target lateness p50 1,000 fds / {ref}: {fmt(q, '.2f', '-')} (goal <= 1.2)")


# ---------------------------------------------------------------- rss

def rss_once(peers, argv, env, n):
    server, port = start_server(argv, env)
    hold = subprocess.Popen([peers.path("io_echo_load"), "--hold", str(port), str(n)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            preexec_fn=pinned(CPU_LOAD))
    try:
        line = server.stdout.readline().split()
    finally:
        hold.stdin.close()
        hold.wait()
        stop(server)
    v = dict(zip(line[2::2], line[3::2]))
    return float(v["bytes_per"]) if "bytes_per" in v else None


def run_rss(peers, a):
    if not peers.have("io_echo_load"):
        return
    n = 10000
    limit = raise_nofile()
    if limit < n + 100:
        print(f"(RLIMIT_NOFILE hard limit {limit} < {n + 100}: no memory rows)")
        return
    progs = []
    if peers.path("io_rss_px"):
        progs.append(("parataxis own stacks", [peers.path("io_rss_px"), str(n)], None))
        progs.append(("parataxis shared stacks", [peers.path("io_rss_px"), str(n), "shared"],
                      None))
    else:
        print("(io_rss_px not built: no parataxis rows)")
    if peers.go:
        progs.append(("go", [peers.go, "rss", str(n)], dict(os.environ, GOMAXPROCS="1")))
    runs = 1 if a.quick else 3
    print(f"== resident bytes per connection parked in a read, {n} TCP connections "
          f"(VmRSS after - before / {n}; 1 KiB read buffer each; median of {runs})")
    res = {}
    for run in range(runs):
        for name, argv, env in progs:
            res.setdefault(name, []).append(rss_once(peers, argv, env, n))
    go = med(res.get("go", []))
    for name, _, _ in progs:
        b = med(res[name])
        print(f"{name:<26}{fmt(b, '8.0f', '       -')} B   ratio to go "
              f"{fmt(ratio(b, go), '.2f', '-')}")
    shared = med(res.get("parataxis shared stacks", []))
    if shared is not None:
        print(f"io target rss shared stacks / go: {fmt(ratio(shared, go), '.2f', '-')} "
              f"(goal <= 0.5)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sections", nargs="*", help="echo latency lateness rss (default: all)")
    ap.add_argument("--build", default="build-bench")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--base", help="git revision whose library gives today's lateness")
    a = ap.parse_args()
    for s in a.sections:
        if s not in ("echo", "latency", "lateness", "rss"):
            ap.error(f"unknown section {s}")
    if not os.path.isdir(a.build):
        a.build = os.path.join(ROOT, a.build)
    a.build = os.path.abspath(a.build)
    if a.runs is None:
        a.runs = 1 if a.quick else 5
    sections = a.sections or ["echo", "latency", "lateness", "rss"]
    raise_nofile()
    peers = Peers(a.build)
    for s in ["echo", "latency", "lateness", "rss"]:
        if s in sections:
            globals()["run_" + s](peers, a)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
