#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make header-check: the layering rules of docs/architecture.md.
#  1. every quoted include of a source file resolves in its own folder or in
#     the -I paths of its room (INC_<room>, from the Makefile), so nothing
#     reaches up or across even where a broader -I would let it compile;
#  2. a folder's *_int.h is included from that folder only;
#  3. every public header (not *_int.h) compiles alone with its room's paths.
# Environment: CC, WARN and INC_<room> for each room named in ROOMS.
set -uo pipefail
cd "$(dirname "$0")/.."

room_of() {
    case $1 in
    planner/*) local d=${1#planner/}; echo "planner_${d%%/*}" ;;
    *) echo "${1%%/*}" ;;
    esac
}
inc_dirs() {
    local v="INC_$1" w
    [ -n "${!v+x}" ] || { echo "header-check: no INC_$1 for room $1" >&2; return 1; }
    for w in ${!v}; do
        case $w in -I*) echo "${w#-I}" ;; esac
    done
}

fail=0
n_files=0
n_headers=0
files=$(git ls-files -co --exclude-standard common planner store executor server cmd | grep '\.[ch]$')
for f in $files; do
    [ -e "$f" ] || continue
    room=$(room_of "$f")
    dirs=$(inc_dirs "$room") || { fail=1; continue; }
    own=$(dirname "$f")
    n_files=$((n_files + 1))
    while read -r h; do
        [ -n "$h" ] || continue
        if [ -e "$own/$h" ]; then
            continue
        fi
        found=""
        for d in $dirs; do
            if [ -e "$d/$h" ]; then found=$d; break; fi
        done
        if [ -z "$found" ]; then
            where=$(git ls-files -co --exclude-standard | grep "/$h\$" | head -1)
            echo "header-check: $f includes \"$h\" (${where:-not found}), outside room $room and the rooms below it" >&2
            fail=1
        elif [[ $h == *_int.h ]]; then
            echo "header-check: $f includes $found/$h, another folder's internal header" >&2
            fail=1
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done

for h in $files; do
    case $h in *_int.h | *.c) continue ;; esac
    room=$(room_of "$h")
    v="INC_$room"
    n_headers=$((n_headers + 1))
    # shellcheck disable=SC2086
    if ! echo "#include \"$(basename "$h")\"" |
        $CC $WARN -I"$(dirname "$h")" ${!v} -x c -fsyntax-only - ; then
        echo "header-check: $h does not compile alone with room $room's paths" >&2
        fail=1
    fi
done

if [ $fail != 0 ]; then
    echo "header-check: FAILED" >&2
    exit 1
fi
echo "header-check: $n_files files include only their room and the rooms below; $n_headers public headers compile alone"
