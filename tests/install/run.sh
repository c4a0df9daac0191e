#!/bin/sh
# Installs the build tree $1 into a scratch prefix, then builds and runs a small
# consumer three ways: find_package (shared and static) and pkg-config.
set -eu
build=$1
src=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
lib=$(ls -d "$prefix"/lib*/ | head -n 1)
test -L "$lib/libparataxis.so" && test -f "$lib/libparataxis.a"
soname=$(readelf -d "$lib/libparataxis.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
test "$soname" = libparataxis.so.0 || { echo "bad SONAME: $soname"; exit 1; }
# Only px_ symbols are exported.
if nm -D --defined-only "$lib/libparataxis.so" | awk '$2 ~ /[TDB]/ {print $3}' | grep -v '^px_'; then
    echo "symbols leak out of libparataxis.so"; exit 1
fi

cmake -S "$src/consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake" >/dev/null
LD_LIBRARY_PATH=$lib "$work/cmake/consumer_shared"
"$work/cmake/consumer_static"

export PKG_CONFIG_PATH=$lib/pkgconfig
cc -std=c11 "$src/consumer/consumer.c" $(pkg-config --cflags --libs parataxis) \
   -Wl,-rpath,"$lib" -o "$work/consumer_pc"
"$work/consumer_pc"
echo "install test: ok"
