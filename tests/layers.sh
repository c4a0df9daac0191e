#!/bin/sh
# layers.sh -- checks the include rules of core/src (written down in
# core/src/README.md): each file includes only its own layer and the layers
# under it.
#
#   base/        nothing but base/
#   timerset.*   base/
#   timerq/      base/, timerset, timerq/
#   fiber/       base/, timerset, fiber/ (ctx/ included)
#   sync/        base/, fiber/waitq.h (nothing else of fiber/), sync/
#
# The public header <parataxis.h> and system headers may be included anywhere.
# bindings/host/, the C both bindings share, includes its own files, the public
# header and system headers: never a language's (Python.h, lua.h, lauxlib.h...)
# nor the library's internals.
# Prints each breach and exits 1 if there is one.
set -eu
src=$(cd "$(dirname "$0")/../core/src" && pwd)
status=0

allowed() {   # allowed FILE INCLUDE -> 0 when FILE may include INCLUDE
    file=$1 inc=$2
    case $file in
        base/*)      case $inc in base/*) return 0 ;; esac ;;
        timerset.*)  case $inc in base/*|timerset.h) return 0 ;; esac ;;
        timerq/*)    case $inc in base/*|timerset.h|timerq/*) return 0 ;; esac ;;
        fiber/*)     case $inc in base/*|timerset.h|fiber/*) return 0 ;; esac ;;
        sync/*)      case $inc in base/*|fiber/waitq.h|sync/*) return 0 ;; esac ;;
    esac
    return 1
}

cd "$src"
for f in $(find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.S' \) | sed 's|^\./||' | sort); do
    case $f in
        base/*|timerset.*|timerq/*|fiber/*|sync/*) ;;
        *) echo "layers: $f is in no layer (core/src/README.md lists them)"; status=1; continue ;;
    esac
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        [ "$inc" = parataxis.h ] && continue
        if ! allowed "$f" "$inc"; then
            echo "layers: $f includes \"$inc\", which its layer may not use"
            status=1
        fi
    done
done
[ $status = 0 ] && echo "layers: every include of core/src keeps to its layer"

host=$(cd "$src/../../bindings/host" && pwd)
hstatus=0
cd "$host"
for f in $(find . -type f \( -name '*.c' -o -name '*.h' \) | sed 's|^\./||' | sort); do
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*\([<"][^>"]*[>"]\).*/\1/p' "$f"); do
        name=${inc#?}; name=${name%?}
        case $name in
            Python.h|py*.h|lua*.h|lauxlib.h|greenlet.h)
                echo "layers: bindings/host/$f includes $inc: host/ is binding-neutral"
                hstatus=1 ;;
            *) case $inc in
                   \"parataxis.h\") ;;
                   \"*) [ -f "$name" ] || { hstatus=1;
                         echo "layers: bindings/host/$f includes $inc, not a file of host/"; } ;;
               esac ;;
        esac
    done
done
[ $hstatus = 0 ] && echo "layers: bindings/host includes neither Python nor Lua"
[ $hstatus = 0 ] || status=1
exit $status
