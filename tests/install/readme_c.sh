#!/bin/sh
# The C programs of README.md, as a user copies them: each ```c block is
# compiled alone with strict warnings against the build tree $1 installed into
# a scratch prefix, then built and run with the README's own ```sh block (the
# one that links with an rpath), run as it stands with HOME in scratch; each
# must print the line below.  Usage: readme_c.sh BUILD_DIR [README]
set -eu
build=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
readme=${2:-$src/README.md}
case $build in /*) ;; *) build=$PWD/$build ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# What each C block prints, in README order.
expected_1="ten milliseconds: cancelled"
expected_2="px_run: 0, result: done"

# Block N of kind $1 into $work/$1_N.
awk -v dir="$work" '
    /^ *```/ && open { open = 0; close(out); next }
    /^ *```[a-z]+$/  { kind = $0; sub(/^ *```/, "", kind); n[kind]++;
                       out = dir "/" kind "_" n[kind]; open = 1; printf "" > out; next }
    open { line = $0; sub(/^  /, "", line); print line > out }' "$readme"

nc=$(ls "$work" | grep -c '^c_' || true)
[ "$nc" = 2 ] || { echo "README.md has $nc C blocks, this test knows 2"; exit 1; }
runner=$(grep -l -e '-Wl,-rpath' "$work"/sh_* | head -n 1)
[ -n "$runner" ] || { echo "README.md has no sh block linking with an rpath"; exit 1; }

mkdir "$work/home"
ln -s "$build" "$work/home/build"
i=1
while [ -f "$work/c_$i" ]; do
    mkdir "$work/home/$i"
    cp "$work/c_$i" "$work/home/$i/prog.c"
    # The README's commands, literally: install, link with an rpath, run.
    (
        cd "$work/home/$i"
        ln -s ../build build
        unset PKG_CONFIG_PATH LD_LIBRARY_PATH
        HOME=$work/home sh -eu "$runner" >"$work/out_$i" 2>"$work/err_$i"
    ) || { echo "README C block $i:"; cat "$work/home/$i/prog.c" "$work/err_$i"; exit 1; }
    lib=$(dirname "$(ls "$work"/home/.local/lib*/libparataxis.so)")
    # Strict warnings too, beyond the README's -Wall -Werror.
    cc -std=c11 -Wall -Wextra -Wpedantic -Werror -I"$work/home/.local/include" \
       -c "$work/home/$i/prog.c" -o "$work/home/$i/prog.o" ||
        { echo "README C block $i does not compile cleanly"; exit 1; }
    got=$(tail -n 1 "$work/out_$i")
    eval "want=\$expected_$i"
    [ "$got" = "$want" ] ||
        { echo "README C block $i printed '$got', not '$want'"; cat "$work/out_$i"; exit 1; }
    # It runs on its own, with no LD_LIBRARY_PATH: the rpath finds the library.
    [ "$("$work/home/$i/prog")" = "$want" ]
    test -f "$lib/libparataxis.so.0"
    i=$((i + 1))
done
echo "README C programs: ok ($nc)"
