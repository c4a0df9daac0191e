#!/bin/sh
# Instructions per op of each binding's hot paths, by callgrind: the difference
# between 1 and N + 1 ops, divided by N, so startup and teardown cancel out.
#   sh tests/bench/prof_binding.sh py PYTHON [N]         (the package installed)
#   sh tests/bench/prof_binding.sh lua BUILD_DIR [N]     (BUILD_DIR/bindings has the module)
# Python's counts move by up to 3 % with the hash seed: PYTHONHASHSEED=0 fixes it.
set -e
lang=$1
runner=$2
n=${3:-20000}
here=$(cd "$(dirname "$0")" && pwd)
out=${TMPDIR:-/tmp}/px_binding_cg.$$
count() {   # case ops
  if [ "$lang" = py ]; then
    valgrind --tool=callgrind --callgrind-out-file=$out "$runner" "$here/prof_python.py" $1 $2 \
      >/dev/null 2>&1
  else
    LUA_CPATH="$runner/bindings/?.so;;" LUA_PATH="$here/../../bindings/lua/?.lua;;" \
      valgrind --tool=callgrind --callgrind-out-file=$out lua5.4 "$here/prof_lua.lua" $1 $2 \
      >/dev/null 2>&1
  fi
  sed -n 's/^summary: //p' $out
}
if [ "$lang" = py ]; then
  cases="spawn yield timeout mutex chan sched_post addcancel handlerqueue"
else
  cases="spawn yield mutex chan timeout"
fi
for what in $cases; do
  a=$(count $what 1)
  b=$(count $what $((n + 1)))
  echo "$what: $(( (b - a) / n )) instructions per op"
done
rm -f $out
