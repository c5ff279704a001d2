#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs StableHLO's interpreter tests (../shared/reference/stablehlo/interpret)
# through `shardplan interpret`, file by file. A file's `// RUN:` lines are
# run as lit would (stablehlo-translate -> "$SHARDPLAN" interpret, FileCheck,
# `not`, %s, %t); a file whose RUN lines first legalize with stablehlo-opt
# (chlo ops, composites, which the interpreter runs as they are) is
# interpreted directly with -split-input-file instead. The files claimed in
# tests/interp/claimed.txt must pass (a claimed failure fails the run); the
# others are run and counted too, shown as "(unclaimed)", so the list can
# grow as the interpreter does.
# Environment: SHARDPLAN (binary, required), STABLEHLO_TESTS (the folder;
# default ../shared/reference/stablehlo/interpret), FILECHECK (default
# FileCheck-14), INTERP_TIMEOUT (seconds per RUN line, default 20).
# Usage: run.sh [FILE...]   (default: every .mlir file of the folder)
# Output: one line per file (PASS/FAIL), a claimed failure's first lines, then
# the claimed files' figure and `N passed, M failed` over all files. Exit 1
# when a claimed file failed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${SHARDPLAN:?SHARDPLAN must name the shardplan binary}"
STABLEHLO_TESTS=${STABLEHLO_TESTS:-$here/../../../shared/reference/stablehlo/interpret}
FILECHECK=${FILECHECK:-FileCheck-14}
INTERP_TIMEOUT=${INTERP_TIMEOUT:-20}
if [[ ! -d $STABLEHLO_TESTS ]]; then
    echo "tests/interp/run.sh: STABLEHLO_TESTS=$STABLEHLO_TESTS is not a folder; skipped"
    exit 0
fi
SHARDPLAN=$(cd "$(dirname "$SHARDPLAN")" && pwd)/$(basename "$SHARDPLAN")
STABLEHLO_TESTS=$(cd "$STABLEHLO_TESTS" && pwd)
declare -A claimed=()
while IFS= read -r line; do
    line=${line%%#*}
    line=${line//[[:space:]]/}
    [[ -n $line ]] && claimed[$line]=1
done <"$here/claimed.txt"

# The RUN pipelines of $1, one per line, continuations joined.
run_lines() {
    local line cmd="" body
    while IFS= read -r line || [[ -n $line ]]; do
        [[ $line =~ ^[[:space:]]*//[[:space:]]*RUN:(.*)$ ]] || continue
        body=${BASH_REMATCH[1]}
        if [[ $body =~ ^(.*)\\[[:space:]]*$ ]]; then
            cmd+="${BASH_REMATCH[1]} "
            continue
        fi
        printf '%s\n' "$cmd$body"
        cmd=""
    done <"$1"
}

# shellcheck disable=SC2016 # the $VAR texts are meant literally
rewrite() {
    local w='[^[:alnum:]_.-]'
    printf '%s\n' "$1" | sed -E \
        -e "s/(^|$w)stablehlo-translate(\$|$w)/\\1\"\$SHARDPLAN\" interpret\\2/g" \
        -e "s/(^|$w)FileCheck(\$|$w)/\\1\"\$FILECHECK\"\\2/g" \
        -e 's/%s/"$T_FILE"/g' \
        -e 's/%t/"$T_TMP"/g'
}

files=("$@")
if ((${#files[@]} == 0)); then
    files=("$STABLEHLO_TESTS"/*.mlir)
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/shardplan-interp.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
log=$scratch/log
n_pass=0 n_fail=0 c_pass=0 c_fail=0
for f in "${files[@]}"; do
    f=$(cd "$(dirname "$f")" && pwd)/$(basename "$f") # the RUN lines run elsewhere
    name=$(basename "$f")
    tag=""
    [[ -n ${claimed[$name]:-} ]] || tag=" (unclaimed)"
    mapfile -t cmds < <(run_lines "$f")
    : >"$log"
    ok=1
    if ((${#cmds[@]} == 0)) || printf '%s\n' "${cmds[@]}" | grep -q 'stablehlo-opt'; then
        timeout "$INTERP_TIMEOUT" "$SHARDPLAN" interpret --split-input-file "$f" >"$log" 2>&1 \
            </dev/null || ok=0
    else
        rm -rf "$scratch/t"
        for c in "${cmds[@]}"; do
            (
                cd "$scratch" || exit 1
                not() { if "$@"; then return 1; else return 0; fi; }
                export -f not
                SHARDPLAN=$SHARDPLAN FILECHECK=$FILECHECK T_FILE=$f T_TMP=$scratch/t \
                    timeout "$INTERP_TIMEOUT" bash -o pipefail -c "$(rewrite "$c")"
            ) >>"$log" 2>&1 </dev/null || {
                ok=0
                break
            }
        done
    fi
    if ((ok)); then
        echo "PASS  $name$tag"
        n_pass=$((n_pass + 1))
        [[ -z $tag ]] && c_pass=$((c_pass + 1))
    else
        echo "FAIL  $name$tag"
        if [[ -z $tag ]]; then
            head -n 5 "$log" | sed 's/^/    | /'
            c_fail=$((c_fail + 1))
        fi
        n_fail=$((n_fail + 1))
    fi
done
echo "claimed: $c_pass passed, $c_fail failed (of ${#claimed[@]} in tests/interp/claimed.txt)"
echo "$n_pass passed, $n_fail failed"
((c_fail == 0))
