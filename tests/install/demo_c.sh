#!/bin/sh
# The C demos of `make demo` (build tree $1), their stdout and stderr piped
# together as `make demo | cat` shows them: each exits 0, stamps every line
# after its first with the time, prints the lines the Python and Lua demos
# print too, and the deadlock report (stderr) comes after the lines printed
# before it (stdout, buffered in a pipe) -- tests/python/test_demos.py and
# tests/lua/demo_spec.lua check the same of the other two languages.
set -eu
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "$1"; cat "$work/out"; exit 1; }
has() { grep -qF -- "$1" "$work/out" || fail "no line with '$1'"; }
line_of() { grep -nF -- "$1" "$work/out" | head -n 1 | cut -d: -f1; }
stamped() {   # every line after the first starts with "   12.3 ms  "
    tail -n +2 "$work/out" | grep -vqE '^ *[0-9]+\.[0-9] ms  ' && fail "a line with no time stamp"
    return 0
}

"$build/timer_demo" 2>&1 | cat >"$work/out" || fail "timer_demo failed"
head -n 1 "$work/out" | grep -q '^parataxis .* from C$' || fail "no first line"
stamped
for l in "cancel the 20 ms timer: 1" "one-shot, 20 ms, cancelled   aborted" \
         "one-shot, 10 ms              expired" "one-shot, 30 ms              expired" \
         "periodic, tick 1" "periodic, tick 2" "periodic, tick 3" \
         "periodic, final call         aborted" "every handler ran exactly once; 0 pending"; do
    has "$l"
done
[ "$(line_of 'periodic, tick 3')" -lt "$(line_of 'periodic, final call')" ] ||
    fail "the periodic timer's final call came before its third tick"
[ "$(line_of 'cancel the 20 ms timer')" -lt "$(line_of 'one-shot, 20 ms, cancelled')" ] ||
    fail "the cancelled timer's call came before the line of its cancel"

# `cmd | cat` keeps the exit status of cat: keep the demo's in a file.
{ "$build/fiber_demo"; echo "status=$?"; } 2>&1 | cat >"$work/out"
has "status=0"
for l in "left got 0" "right got 1" "pipeline total = 10" \
         "the mutex went to the fibers in the order they asked: 1, 2, 3, 4" \
         "fired at the interrupted wait" "timer handler fired in a fiber" \
         "the engine's report" "wait-for cycle" "px_dump while they wait:" \
         '  fiber 2 "transfer a->b": parked for ' \
         'waits on mutex "account b"@' 'held by fiber 3 "transfer b->a"' \
         '  fiber 1 "main": running'; do
    has "$l"
done
[ "$(grep -cF 'timer handler fired in a fiber' "$work/out")" = 2 ] || fail "not two handler calls"
a=$(line_of "timer handler fired in a fiber")
b=$(line_of "the engine's report")
c=$(line_of "parataxis: deadlock detected")
d=$(line_of "wait-for cycle")
e=$(line_of "px_run returned")
[ "$a" -lt "$b" ] && [ "$b" -lt "$c" ] && [ "$c" -lt "$d" ] && [ "$d" -lt "$e" ] ||
    fail "out of order: the stdout lines and the deadlock report (stderr)"

# The I/O demo (docs/examples/io_echo.c): every client's line came back.
{ "$build/io_echo_demo"; echo "status=$?"; } 2>&1 | cat >"$work/out"
has "status=0"
for l in 'client 0 got back "hello from client 0"' 'client 1 got back "hello from client 1"' \
         'client 2 got back "hello from client 2"' \
         "px_recv on a quiet socket for 20 ms: -1, errno ETIMEDOUT"; do
    has "$l"
done
echo "C demos: ok"
