#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs StableHLO's interpreter tests (../shared/reference/stablehlo/interpret,
# `// RUN: stablehlo-translate --interpret -split-input-file %s`) through
# `shardplan interpret`, file by file. The files claimed in
# tests/interp/claimed.txt must pass (a claimed failure fails the run); the
# others are run and counted too, shown as "(unclaimed)", so the list can
# grow as the interpreter does.
# Environment: SHARDPLAN (binary, required), STABLEHLO_TESTS (the folder;
# default ../shared/reference/stablehlo/interpret), INTERP_TIMEOUT (seconds
# per file, default 20).
# Usage: run.sh [FILE...]   (default: every .mlir file of the folder)
# Output: one line per file (PASS/FAIL), a failure's first lines, then
# `N passed, M failed` over all files and the claimed ones' figure. Exit 1
# when a claimed file failed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${SHARDPLAN:?SHARDPLAN must name the shardplan binary}"
STABLEHLO_TESTS=${STABLEHLO_TESTS:-$here/../../../shared/reference/stablehlo/interpret}
INTERP_TIMEOUT=${INTERP_TIMEOUT:-20}
if [[ ! -d $STABLEHLO_TESTS ]]; then
    echo "tests/interp/run.sh: STABLEHLO_TESTS=$STABLEHLO_TESTS is not a folder; skipped"
    exit 0
fi
declare -A claimed=()
while IFS= read -r line; do
    line=${line%%#*}
    line=${line//[[:space:]]/}
    [[ -n $line ]] && claimed[$line]=1
done <"$here/claimed.txt"

files=("$@")
if ((${#files[@]} == 0)); then
    files=("$STABLEHLO_TESTS"/*.mlir)
fi
log=$(mktemp "${TMPDIR:-/tmp}/shardplan-interp.XXXXXX")
trap 'rm -f "$log"' EXIT
n_pass=0 n_fail=0 c_pass=0 c_fail=0
for f in "${files[@]}"; do
    name=$(basename "$f")
    tag=""
    [[ -n ${claimed[$name]:-} ]] || tag=" (unclaimed)"
    flags=()
    if grep -q -- '-split-input-file' "$f"; then
        flags+=(--split-input-file)
    fi
    if timeout "$INTERP_TIMEOUT" "$SHARDPLAN" interpret "${flags[@]}" "$f" >"$log" 2>&1 </dev/null; then
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
