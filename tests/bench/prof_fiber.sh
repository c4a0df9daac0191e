#!/bin/sh
# Instructions per op of each fiber hot path, by callgrind: the difference
# between N and 2N ops, divided by N, so setup and teardown cancel out.
#   sh tests/bench/prof_fiber.sh build-bench/tests/bench/prof_fiber [N] [shared-stacks]
# (cmake --build build-bench --target prof_fiber first)
set -e
bin=$1
n=${2:-20000}
shared=$3
out=${TMPDIR:-/tmp}/px_fiber_cg.$$
for what in yield spawn mutex chan; do
  a=$(valgrind --tool=callgrind --callgrind-out-file=$out "$bin" $what $n $shared 2>&1 |
      sed -n 's/.*Collected : //p')
  b=$(valgrind --tool=callgrind --callgrind-out-file=$out "$bin" $what $((2 * n)) $shared 2>&1 |
      sed -n 's/.*Collected : //p')
  echo "$what: $(( (b - a) / n )) instructions per op"
done
rm -f $out
