#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Lit-style runner for Shardplan's own MLIR tests (tests/lit/*.mlir), for
# the Shardy lit files we claim to pass (tests/lit/shardy-conformance.txt)
# and for XLA's Shardy import/export lit files we claim
# (tests/lit/xla-conformance.txt).
#
# Each test file's `// RUN:` lines (a line ending in `\` continues on the next
# RUN line) are rewritten and run with `bash -o pipefail -c`:
#   sdy_opt            -> "$SHARDPLAN" opt
#   shardplan          -> "$SHARDPLAN"      (in command position, also after `not`)
#   FileCheck          -> "$FILECHECK"
#   stablehlo-translate -> "$SHARDPLAN" interpret   (its --interpret mode)
#   split-file         -> "$SPLIT_FILE" (split-file, else LLVM 14's)
#   %S/run_sdy_interpreter_test.sh -> tests/lit/run_sdy_interpreter_test.sh
#   not                -> a shell function inverting the exit status (as lit's)
#   %s, %S, %t         -> the file, its folder, a scratch path
# A file passes when all of its RUN pipelines exit 0. A file with an
# `// XFAIL:` line is expected to fail (a known gap, named in the file): its
# failure counts as passed (shown as XFAIL), and its passing as a failure
# (XPASS), so the XFAIL line gets removed once the gap is closed.
#
# Environment: SHARDPLAN (binary, required), FILECHECK (default FileCheck-14),
# SHARDY_TESTS (folder of Shardy's lit files; optional), XLA_TESTS (folder of
# XLA's lit files, ../shared/reference/xla/tests; optional), LIT_TIMEOUT (seconds
# per RUN pipeline, default 300), FILECHECK_OPTS (default -dump-input=never so
# a failure shows FileCheck's message; -dump-input=fail adds the input dump).
# Usage: run.sh [FILE...]   with no FILE, every test; otherwise only those.
# Output: one line per file (PASS/FAIL/SKIP), the last lines of a failure's
# output, and a final `N passed, N failed, N skipped`. Exit status 1 when any
# file failed.

set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
conformance_list="$here/shardy-conformance.txt"
xla_list="$here/xla-conformance.txt"

: "${SHARDPLAN:?SHARDPLAN must name the shardplan binary}"
FILECHECK=${FILECHECK:-FileCheck-14}
SHARDY_TESTS=${SHARDY_TESTS:-}
XLA_TESTS=${XLA_TESTS:-}
LIT_TIMEOUT=${LIT_TIMEOUT:-300}
if [[ -z ${SPLIT_FILE:-} ]]; then
    SPLIT_FILE=$(command -v split-file || echo /usr/lib/llvm-14/bin/split-file)
fi
export SPLIT_FILE
export FILECHECK_OPTS=${FILECHECK_OPTS:--dump-input=never}

if [[ ! -x $SHARDPLAN ]]; then
    echo "run.sh: SHARDPLAN=$SHARDPLAN is not an executable file" >&2
    exit 2
fi
if ! command -v "$FILECHECK" >/dev/null 2>&1; then
    echo "run.sh: FILECHECK=$FILECHECK not found (Debian package llvm-14-tools)" >&2
    exit 2
fi
SHARDPLAN=$(cd "$(dirname "$SHARDPLAN")" && pwd)/$(basename "$SHARDPLAN")

n_pass=0
n_fail=0
n_skip=0
failed=()
scratch=$(mktemp -d "${TMPDIR:-/tmp}/shardplan-lit.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# Prints the RUN pipelines of file $1, one per line, continuations joined.
run_lines() {
    local line cmd="" body
    while IFS= read -r line || [[ -n $line ]]; do
        [[ $line =~ ^[[:space:]]*//[[:space:]]*RUN:(.*)$ ]] || continue
        body=${BASH_REMATCH[1]}
        body=${body%$'\r'}
        if [[ $body =~ ^(.*)\\[[:space:]]*$ ]]; then
            cmd+="${BASH_REMATCH[1]} "
            continue
        fi
        cmd+=$body
        printf '%s\n' "$cmd"
        cmd=""
    done <"$1"
    if [[ -n $cmd ]]; then
        printf '%s\n' "$cmd"
    fi
}

# Rewrites one RUN pipeline into a bash command. The substituted names are
# left as variable references so paths never need quoting here.
# shellcheck disable=SC2016 # the $VAR texts are meant literally
rewrite() {
    local w='[^[:alnum:]_.-]'
    printf '%s\n' "$1" | sed -E \
        -e "s/(^|$w)sdy_opt(\$|$w)/\\1\"\$SHARDPLAN\" opt\\2/g" \
        -e "s/(^|[|;&(][[:space:]]*|^[[:space:]]*)shardplan(\$|[[:space:]])/\\1\"\$SHARDPLAN\"\\2/g" \
        -e "s/(^|[|;&(][[:space:]]*|^[[:space:]]*)not[[:space:]]+shardplan(\$|[[:space:]])/\\1not \"\$SHARDPLAN\"\\2/g" \
        -e "s/(^|$w)FileCheck(\$|$w)/\\1\"\$FILECHECK\"\\2/g" \
        -e "s/(^|$w)stablehlo-translate(\$|$w)/\\1\"\$SHARDPLAN\" interpret\\2/g" \
        -e "s/(^|$w)split-file(\$|$w)/\\1\"\$SPLIT_FILE\"\\2/g" \
        -e 's#%S/run_sdy_interpreter_test\.sh#"$LIT_HERE"/run_sdy_interpreter_test.sh#g' \
        -e 's/%s/"$LIT_FILE"/g' \
        -e 's/%S/"$LIT_DIR"/g' \
        -e 's/%t/"$LIT_TMP"/g'
}

# Runs every RUN pipeline of $1 (shown as $2); prints PASS, FAIL or XFAIL.
run_file() {
    local file=$1 label=$2 n=0 cmd shell_cmd rc log xfail=0
    local -a cmds=()
    mapfile -t cmds < <(run_lines "$file")
    if grep -Eq '^[[:space:]]*//[[:space:]]*XFAIL:' "$file"; then
        xfail=1
    fi
    if ((${#cmds[@]} == 0)); then
        echo "FAIL  $label (no RUN lines)"
        n_fail=$((n_fail + 1))
        failed+=("$label")
        return
    fi
    log="$scratch/log"
    : >"$log"
    # one %t per file, as lit has: a RUN line reads what an earlier one wrote there
    rm -rf "$scratch/t"
    for cmd in "${cmds[@]}"; do
        n=$((n + 1))
        shell_cmd=$(rewrite "$cmd")
        printf 'RUN %d: %s\n' "$n" "$cmd" >>"$log"
        (
            cd "$scratch" || exit 1
            # shellcheck disable=SC2317 # called from the RUN line's shell
            not() { if "$@"; then return 1; else return 0; fi; }
            export -f not
            SHARDPLAN=$SHARDPLAN FILECHECK=$FILECHECK LIT_FILE=$file LIT_HERE=$here \
                SPLIT_FILE=$SPLIT_FILE \
                LIT_DIR=$(dirname "$file") LIT_TMP="$scratch/t" \
                timeout "$LIT_TIMEOUT" bash -o pipefail -c "$shell_cmd"
        ) >>"$log" 2>&1 </dev/null
        rc=$?
        if ((rc != 0 && xfail)); then
            echo "XFAIL $label (expected failure, RUN line $n exited with status $rc)"
            n_pass=$((n_pass + 1))
            return
        fi
        if ((rc != 0)); then
            if ((rc == 124)); then
                echo "(timed out after ${LIT_TIMEOUT}s)" >>"$log"
            fi
            echo "FAIL  $label (RUN line $n exited with status $rc)"
            tail -n 30 "$log" | sed 's/^/    | /'
            n_fail=$((n_fail + 1))
            failed+=("$label")
            return
        fi
    done
    if ((xfail)); then
        echo "FAIL  $label (XPASS: marked XFAIL but passes; remove its XFAIL line)"
        n_fail=$((n_fail + 1))
        failed+=("$label")
        return
    fi
    echo "PASS  $label"
    n_pass=$((n_pass + 1))
}

# Claimed files: names from a conformance list ($1), comments stripped,
# into the array `claimed`.
read_claims() {
    claimed=()
    local line
    if [[ -f $1 ]]; then
        while IFS= read -r line || [[ -n $line ]]; do
            line=${line%%#*}
            line=$(printf '%s' "$line" | tr -d '[:space:]')
            [[ -n $line ]] && claimed+=("$line")
        done <"$1"
    fi
}
is_claimed() {
    local c
    for c in "${claimed[@]}"; do
        [[ $c == "$1" ]] && return 0
    done
    return 1
}

# Selection from the command line: basenames or paths.
selected() {
    (($# == 1)) && return 0
    local want=$1 a
    shift
    for a in "$@"; do
        [[ $(basename "$a") == "$(basename "$want")" ]] && return 0
    done
    return 1
}

args=("$@")

echo "== own tests (tests/lit)"
shopt -s nullglob
for f in "$here"/*.mlir; do
    selected "$f" "${args[@]+"${args[@]}"}" || continue
    run_file "$f" "tests/lit/$(basename "$f")"
done

# Runs the files a conformance list claims from a reference folder:
# $1 list file, $2 folder (may be empty), $3 label prefix, $4 variable name.
run_conformance() {
    local list=$1 dir=$2 tag=$3 var=$4 name f
    read_claims "$list"
    echo "== $tag conformance (tests/lit/$(basename "$list"))"
    if [[ -z $dir || ! -d $dir ]]; then
        echo "$tag's lit files are absent ($var='$dir' is not a folder):"
        echo "skipping the ${#claimed[@]} claimed conformance file(s); own tests still ran."
        n_skip=$((n_skip + ${#claimed[@]}))
        return
    fi
    dir=$(cd "$dir" && pwd)
    for name in "${claimed[@]}"; do
        selected "$name" "${args[@]+"${args[@]}"}" || continue
        if [[ ! -f $dir/$name ]]; then
            echo "FAIL  ${tag,,}/$name (claimed in $(basename "$list") but not in $dir)"
            n_fail=$((n_fail + 1))
            failed+=("${tag,,}/$name")
            continue
        fi
        run_file "$dir/$name" "${tag,,}/$name"
    done
    for f in "$dir"/*.mlir; do
        name=$(basename "$f")
        is_claimed "$name" && continue
        selected "$f" "${args[@]+"${args[@]}"}" || continue
        echo "SKIP  ${tag,,}/$name (not yet claimed)"
        n_skip=$((n_skip + 1))
    done
}

run_conformance "$conformance_list" "$SHARDY_TESTS" Shardy SHARDY_TESTS
run_conformance "$xla_list" "$XLA_TESTS" XLA XLA_TESTS

if ((n_fail > 0)); then
    echo "failed: ${failed[*]}"
fi
echo "$n_pass passed, $n_fail failed, $n_skip skipped"
((n_fail == 0))
