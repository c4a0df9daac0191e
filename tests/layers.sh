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
exit $status
