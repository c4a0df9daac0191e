#!/bin/sh
# Instructions per round trip, by callgrind: the difference between N and 2N
# round trips, divided by N, so setup and teardown cancel out.
#   sh tests/bench/switch/callgrind.sh path/to/bench_switch [N]
set -e
bin=$1
n=${2:-100000}
out=${TMPDIR:-/tmp}/px_switch_cg.$$
for impl in parataxis boost-fiber; do
  a=$(valgrind --tool=callgrind --callgrind-out-file=$out "$bin" --only $impl $n 2>&1 |
      sed -n 's/.*Collected : //p')
  b=$(valgrind --tool=callgrind --callgrind-out-file=$out "$bin" --only $impl $((2 * n)) 2>&1 |
      sed -n 's/.*Collected : //p')
  echo "$impl: $(( (b - a) / n )) instructions per round trip"
done
rm -f $out
