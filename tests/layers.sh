#!/bin/sh
# layers.sh -- checks the rules of core/ that core/src/README.md writes down.
#
# Includes: each file of core/src includes only its own layer and the layers
# under it (the public header <parataxis.h> and system headers anywhere):
#
#   base/        nothing but base/
#   timerset.*   base/
#   timerq/      base/, timerset, timerq/
#   fiber/       base/, timerset, fiber/ (ctx/ included)
#   sync/        base/, fiber/waitq.h (nothing else of fiber/), sync/
#   io/          base/, fiber/fiber.h and fiber/waitq.h (nothing else of fiber/), io/
#
# The public header <parataxis.h> and system headers may be included anywhere.
# bindings/host/, the C both bindings share, includes its own files, the public
# header and system headers: never a language's (Python.h, lua.h, lauxlib.h...)
# nor the library's internals.
#
# Names: a name of core/src that starts with PX_ (not PX__) is one parataxis.h
# defines -- an internal macro, enumerator or guard is PX__ -- and each header's
# guard is PX__ and its path (fiber/waitq.h: PX__FIBER_WAITQ_H).
#
# Width: no line of core/ (C, headers, assembly) or of the bindings' C is wider
# than 100 columns, the ColumnLimit of .clang-format, comments included.
#
# Prints each breach and exits 1 if there is one.
set -eu
src=$(cd "$(dirname "$0")/../core/src" && pwd)
status=0
limit=100

allowed() {   # allowed FILE INCLUDE -> 0 when FILE may include INCLUDE
    file=$1 inc=$2
    case $file in
        base/*)      case $inc in base/*) return 0 ;; esac ;;
        timerset.*)  case $inc in base/*|timerset.h) return 0 ;; esac ;;
        timerq/*)    case $inc in base/*|timerset.h|timerq/*) return 0 ;; esac ;;
        fiber/*)     case $inc in base/*|timerset.h|fiber/*) return 0 ;; esac ;;
        sync/*)      case $inc in base/*|fiber/waitq.h|sync/*) return 0 ;; esac ;;
        io/*)        case $inc in base/*|fiber/fiber.h|fiber/waitq.h|io/*) return 0 ;; esac ;;
    esac
    return 1
}

cd "$src"
for f in $(find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.S' \) | sed 's|^\./||' | sort); do
    case $f in
        base/*|timerset.*|timerq/*|fiber/*|sync/*|io/*) ;;
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

# Names.  A PX_ name that the public header does not mention is an internal one
# written with the public prefix (a use of it is as wrong as its definition).
names_status=0
cd "$src"
public=$(grep -oE '\bPX_[A-Za-z0-9][A-Za-z0-9_]*' ../include/parataxis.h | sort -u)
for f in $(find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.S' \) | sed 's|^\./||' | sort); do
    for name in $(grep -oE '\bPX_[A-Za-z0-9][A-Za-z0-9_]*' "$f" | sort -u); do
        if ! printf '%s\n' "$public" | grep -qx "$name"; then
            echo "layers: $f names $name, which parataxis.h does not define (internal: PX__)"
            names_status=1
        fi
    done
    case $f in *.h)
        guard=PX__$(printf '%s' "${f%.h}" | tr 'a-z/.' 'A-Z__')_H
        if ! grep -qx "#ifndef $guard" "$f" || ! grep -qx "#define $guard" "$f"; then
            echo "layers: $f is not guarded by $guard (PX__ and its path)"
            names_status=1
        fi ;;
    esac
done
[ $names_status = 0 ] && echo "layers: every PX_ name of core/src is public, every guard its header's path"

# Width: core/ and the bindings' C.
width_status=0
cd "$src/../.."
for f in $(find core bindings/host bindings/lua/src -type f \( -name '*.c' -o -name '*.h' -o -name '*.S' -o -name '*.i' \) | sort); do
    # expand: a tab counts to its stop, as an editor shows it.
    if expand "$f" | awk -v max=$limit -v f="$f" \
        'length > max { printf "layers: %s:%d is %d columns wide (at most %d)\n", f, NR, length, max; bad = 1 }
         END { exit bad }'; then :; else width_status=1; fi
done
[ $width_status = 0 ] && echo "layers: no line of core/ or the bindings' C is wider than $limit columns"

[ $names_status = 0 ] && [ $width_status = 0 ] || status=1
exit $status
