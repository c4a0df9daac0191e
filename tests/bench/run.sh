#!/bin/sh
# run.sh -- builds and runs every benchmark (timers, fibers, sync) and prints a summary.
#
#   sh tests/bench/run.sh [BUILD_DIR] [--no-build]     (make bench calls this)
#
# BUILD_DIR defaults to build-bench.  Set PXB_QUICK=1 to skip the 1e6 rounds of
# the peer benchmark and shorten the Python, Lua and I/O ones; PYTHON picks the
# interpreter of the Python benchmarks (default python3).  The full output is
# kept in BUILD_DIR/bench-results.txt.  Where `go` is found (Debian golang-go),
# the Go program of tests/bench/go is built (even with --no-build: go's cache
# makes that a no-op when nothing changed) and bench_fiber and bench_sync run
# it beside them.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build-bench}
case $build in /*) ;; *) build=$root/$build ;; esac
if [ "${2:-}" != "--no-build" ]; then
    gen=""
    command -v ninja >/dev/null 2>&1 && gen="-G Ninja"
    # A configured dir (make bench configures it) keeps its settings; a fresh
    # one is made without the tests, which the benchmarks do not need.
    if [ ! -f "$build/CMakeCache.txt" ]; then
        cmake -S "$root" -B "$build" $gen -DCMAKE_BUILD_TYPE=Release \
            -DPARATAXIS_BENCH=ON -DPARATAXIS_TESTS=OFF >/dev/null
    fi
    # bench_fiber, bench_sync and bench_switch exist only where Boost has them,
    # the Lua module (for bench_lua_fibers.lua) where SWIG and Lua 5.4 are.
    targets="bench_timers bench_tset bench_wake bench_faults prof_px io_pool skynet_px bench_structure"
    targets="$targets bench_observe prof_fiber"
    for t in bench_fiber bench_sync bench_switch parataxis_core io_echo_load io_echo_epoll \
             io_echo_uv io_latency_uv io_lateness io_echo_px io_latency_px io_rss_px; do
        if cmake --build "$build" --target help 2>/dev/null | grep -q "$t"; then
            targets="$targets $t"
        fi
    done
    if ! cmake --build "$build" --target $targets \
            >"$build/bench-build.log" 2>&1; then
        tail -30 "$build/bench-build.log"
        echo "run.sh: the benchmarks did not build (full log: $build/bench-build.log)" >&2
        exit 1
    fi
fi
bin=$build/tests/bench
out=$build/bench-results.txt
: >"$out"
say() { echo "$@" | tee -a "$out"; }
# Runs a benchmark into the log; a crash or failure is reported and makes the
# script exit non-zero at the end (a pipe into tee would hide it).
status=0
step() {
    t=$build/bench-step.txt
    if "$@" >"$t" 2>&1; then :; else
        echo "run.sh: FAILED (exit $?): $*" >>"$t"
        status=1
    fi
    tee -a "$out" <"$t"
}

say "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC')"

say "== 3. ordered set vs heaps (data structure alone, wall clock)"
step "$bin/bench_tset"

if command -v valgrind >/dev/null 2>&1; then
    say "== 3b. the same under callgrind (instructions per op, N=1e5, one round)"
    cg=$(mktemp -d)
    (cd "$cg" && valgrind --tool=callgrind --collect-atstart=no \
        --callgrind-out-file="$cg/cg.out" "$bin/bench_tset" cg 100000 >/dev/null 2>&1)
    for f in "$cg"/cg.out.*; do
        label=$(sed -n 's/^desc: Trigger: Client Request: //p' "$f")
        ir=$(sed -n 's/^totals: //p;s/^summary: //p' "$f" | head -1)
        kind=${label%%-*}; phase=${label#*-}
        case $kind in 0) kind="wheel+heap" ;; 1) kind="binary heap" ;; 2) kind="4-ary heap" ;; esac
        say "callgrind $phase $kind: $(awk -v ir="$ir" 'BEGIN { printf "%.1f", ir / 100000 }') instructions/op"
    done
    rm -rf "$cg"
else
    say "(valgrind not found: no callgrind figures)"
fi

say "== 4. worker wakes during 1e5 adds"
step "$bin/bench_wake" 100000
if command -v strace >/dev/null 2>&1; then
    strace -f -c -e trace=futex -o "$build/bench-wake.strace" "$bin/bench_wake" 100000 >/dev/null
    say "strace -f -c -e trace=futex (both cases, whole process):"
    grep -E 'futex|calls' "$build/bench-wake.strace" | tee -a "$out"
fi

say "== the blocking pool beside libuv's (target: round trip <= 1.0x libuv)"
step "$bin/io_pool"

say "== what a first touch costs (48 MiB of records; docs/performance.md, Cold adds)"
step "$bin/bench_faults"

say "== 1, 2. parataxis vs libuv vs Asio vs naive (one process, interleaved rounds)"
if [ "${PXB_QUICK:-0}" = 1 ]; then
    step "$bin/bench_timers" ops 1000
    step "$bin/bench_timers" ops 100000
    step "$bin/bench_timers" cold 100000
    step "$bin/bench_timers" lateness
else
    step "$bin/bench_timers" all
fi

if [ -x "$bin/switch/bench_switch" ]; then
    say "== fiber context switch (tests/bench/switch, built by make bench)"
    step "$bin/switch/bench_switch"
fi

# Go beside the fibers and the sync family (tests/bench/go).  Its build cache
# and GOPATH live in the build dir, so nothing is written under $HOME; it uses
# the standard library only, so nothing is fetched (GOPROXY=off makes sure).
# bench_fiber and bench_sync run it (PXB_GO) and interleave its rounds with
# theirs; without them it runs alone.
gobin=""
if command -v go >/dev/null 2>&1; then
    if (cd "$here/go" && env GOCACHE="$build/go/cache" GOPATH="$build/go/path" \
            GOPROXY=off GOFLAGS= GO111MODULE=on GOTOOLCHAIN=local \
            go build -o "$build/go/bench_go" .) >"$build/go-build.log" 2>&1; then
        gobin=$build/go/bench_go
        say "== Go: $(go version | cut -d' ' -f3), GOMAXPROCS=1 (rows beside ours in bench_fiber and bench_sync)"
        if [ ! -x "$bin/bench_fiber" ] && [ ! -x "$bin/bench_sync" ]; then
            step env GOMAXPROCS=1 "$gobin"
        fi
    else
        cat "$build/go-build.log"
        say "run.sh: FAILED: go build of $here/go (log: $build/go-build.log)"
        status=1
    fi
else
    say "(go not found: no Go rows; .ci/deps bench installs Debian's golang-go)"
fi

if [ -x "$bin/bench_fiber" ]; then
    say "== fibers beside Boost.Fiber (targets: yield and spawn+join <= 0.5x, <= 5 KiB/parked fiber)"
    step env PXB_GO="$gobin" GOMAXPROCS=1 "$bin/bench_fiber"
fi
if [ -x "$bin/bench_sync" ]; then
    say "== sync family beside Boost.Fiber (targets: uncontended <= 2x a plain call pair;"
    say "   hand-off and channels faster than Boost.Fiber)"
    step env PXB_GO="$gobin" GOMAXPROCS=1 "$bin/bench_sync"
fi

say "== structured concurrency (targets: group <= 1.2x a spawn loop + joins; select over"
say "   2 channels <= 1.0x Go's select)"
step env PXB_GO="$gobin" GOMAXPROCS=1 "$bin/bench_structure"

say "== seeing into a run: locals, names, a dump, sleeps on the virtual clock (issue 24)"
step "$bin/bench_observe" 5
if command -v valgrind >/dev/null 2>&1; then
    say "instructions per op of the fiber hot paths (callgrind; names and locals unused)"
    sh "$here/prof_fiber.sh" "$bin/prof_fiber" | tee -a "$out"
fi

# Cold fan-outs (issue 25): skynet in C, Python and Lua and a million parked
# fibers, each case a fresh process, beside Go (tests/bench/go_skynet, built
# into $build/go as above), gevent, asyncio, trio and a plain Lua coroutine
# scheduler; a missing peer prints n/a.  Its Python cases use $PYTHON.
if command -v python3 >/dev/null 2>&1; then
    say "== skynet and 1e6 parked (targets: C skynet, default stacks <= 1.0x Go's time and"
    say "   peak RSS, shared stacks <= 0.7x Go's time; parked <= 1.0x Go's time; Python"
    say "   skynet peak RSS <= asyncio's)"
    quick=""
    [ "${PXB_QUICK:-0}" = 1 ] && quick=--quick
    step python3 "$here/skynet.py" --build "$build" $quick
else
    say "(no python3: no skynet figures)"
fi

# The I/O benchmarks (issue 20): TCP echo, wake latency, timer lateness and
# bytes per parked connection, beside libuv, Go and a hand epoll loop
# (io_bench.py builds its Go program, tests/bench/go_io, into $build/go).
if command -v python3 >/dev/null 2>&1; then
    say "== I/O: echo server CPU per request, wake latency, lateness with idle fds, RSS per"
    say "   parked connection (targets: CPU/request <= 1.0x libuv and <= 0.8x Go; latency"
    say "   <= both; lateness p50 with 1,000 fds <= 1.2x without; shared stacks <= 0.5x Go)"
    if [ "${PXB_QUICK:-0}" = 1 ]; then
        step python3 "$here/io_bench.py" --build "$build" --quick
    else
        step python3 "$here/io_bench.py" --build "$build"
    fi
else
    say "(no python3: no I/O figures)"
fi

# The Python benchmarks measure the installed package (pip install . first).
py=${PYTHON:-python3}
if "$py" -c "import parataxis" 2>/dev/null; then
    say "== Python timers beside asyncio call_later and threading.Timer"
    step "$py" "$here/bench_python.py"
    say "== Python fibers beside greenlet, gevent, asyncio and trio (targets: yield <= 1.5x a"
    say "   greenlet round trip; spawn + join, hand-off, channel faster than gevent; >= 4x asyncio)"
    if [ "${PXB_QUICK:-0}" = 1 ]; then
        step "$py" "$here/bench_python_fibers.py" --rounds 5 --n 5000 --mem-rounds 1
    else
        step "$py" "$here/bench_python_fibers.py"
    fi
    say "== Python task groups beside asyncio.TaskGroup, uvloop, trio and gevent (target:"
    say "   a group member <= 0.5x trio's)"
    if [ "${PXB_QUICK:-0}" = 1 ]; then
        step "$py" "$here/bench_python_structure.py" --rounds 3 --groups 5
    else
        step "$py" "$here/bench_python_structure.py"
    fi
    say "== Python sleeps on a virtual clock beside trio's MockClock (issue 24)"
    step "$py" "$here/bench_python_clock.py"
    # Fiber I/O (issue 21): its servers and pool cases run in $py, beside
    # gevent, asyncio, uvloop and trio where $py has them; io_echo_load is the
    # load generator built above.
    say "== Python I/O: echo server CPU per request and requests/s, bytes per idle connection,"
    say "   a blocking-pool round trip (targets: CPU/request <= 0.5x gevent and <= 1.0x uvloop"
    say "   streams, requests/s >= gevent; pool round trip <= 0.5x trio)"
    quick=""
    [ "${PXB_QUICK:-0}" = 1 ] && quick=--quick
    step "$py" "$here/io_python.py" --build "$build" --python "$py" $quick
else
    say "(parataxis is not importable by $py: no Python figures)"
fi

# The Lua benchmark measures the build tree's module.
if [ -f "$build/bindings/parataxis_core.so" ] && command -v lua5.4 >/dev/null 2>&1; then
    say "== Lua fibers beside raw coroutines and copas (targets: yield <= 2x a raw"
    say "   resume/yield round trip; spawn+join <= 3x coroutine.create + resume)"
    lua_rounds=9
    [ "${PXB_QUICK:-0}" = 1 ] && lua_rounds=3
    step env LUA_CPATH="$build/bindings/?.so;;" LUA_PATH="$root/bindings/lua/?.lua;;" \
        lua5.4 "$here/bench_lua_fibers.lua" "$lua_rounds"
    # Fiber I/O (issue 22): the build tree's module beside copas and a plain
    # socket.select loop (Debian lua-copas and lua-socket); io_echo_load is
    # the load generator built above.
    if command -v python3 >/dev/null 2>&1; then
        say "== Lua I/O: echo server CPU per request and requests/s beside copas and a"
        say "   socket.select loop (target: CPU/request <= 0.5x copas)"
        quick=""
        [ "${PXB_QUICK:-0}" = 1 ] && quick=--quick
        step python3 "$here/io_lua.py" --build "$build" $quick
    else
        say "(no python3: no Lua I/O figures)"
    fi
else
    say "(no Lua module in $build, or no lua5.4: no Lua figures)"
fi

say "== summary (targets at 1e6: add <= 85 ns, cancel <= 100 ns, expiry >= 10 M/s, <= 64 B/timer;"
say "   lateness p99 below Asio's, no early fire; worker wakes ~1)"
grep -E '^(add|cancel|expiry|bytes).*@1e6|^cold first adds.*@1e6|^lateness |^wakes |^tset .*@1000000|^tset burst' "$out" || true
grep -E '^(yield|spawn|RSS|[0-9]+ parked|ratio parataxis / )|^(uncontended|mutex hand-off|channel) ' "$out" || true
grep -E '^skynet target' "$out" || true
grep -E '^io target' "$out" || true
grep -E '^py target' "$out" || true
grep -E '^pyio target' "$out" || true
grep -E '^lua target' "$out" || true
grep -E '^luaio target' "$out" || true
grep 'FAILED' "$out" || true
echo "(full output: $out)"
exit $status
