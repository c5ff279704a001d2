#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Shardplan's stand-in for the run_sdy_interpreter_test.sh that Shardy's
# executable lit tests call (`%S/run_sdy_interpreter_test.sh %s %t [flags]`;
# tests/lit/run.sh and cases.py point %S/run_sdy_interpreter_test.sh here).
# Written from the tests' description of it:
#   1. split FILE into part1.mlir (sharded programs) and part2.mlir (@main,
#      which runs them through interpreter.run_parallel and checks them);
#   2. run `shardplan opt` on part1 with the passes of the test's folder,
#      which the file's name carries (Shardy keeps one script per folder):
#        executable_convert_global_to_local:
#          -sdy-convert-global-to-local -sdy-drop-sharding-and-mesh
#        executable_partitioner_pipeline: insert-explicit-reshards (full),
#          resolve-permutation-factors, reshard-to-collectives,
#          pad-for-divisibility, resolve-single-device-sharding,
#          convert-global-to-local, drop-sharding-and-mesh
#        executable_explicit_gather_scatter_batching:
#          -sdy-explicit-gather-scatter-batching
#   3. assemble one module: the processed module's body, then (partitioner
#      and global-to-local folders, when part1 has @parallel_ functions and
#      no @sequential_ ones) part1 with its shardings and meshes dropped and
#      @parallel_ renamed @sequential_, the unsharded twins part2 compares
#      against; (gather/scatter batching) part1 as written with transformed_
#      renamed original_; then part2;
#   4. interpret it (`shardplan interpret`, stablehlo-translate --interpret).
# Flags: --enable_halo_exchange=true|false (or a bare true/false),
# --replica_count=N, --partition_count=N.
# Environment: SHARDPLAN (required), SPLIT_FILE (default split-file, else
# LLVM 14's).
set -euo pipefail

if (($# < 2)); then
    echo "usage: run_sdy_interpreter_test.sh FILE TMPDIR [flags]" >&2
    exit 2
fi
: "${SHARDPLAN:?SHARDPLAN must name the shardplan binary}"
file=$1
tmp=$2
shift 2
split_file=${SPLIT_FILE:-}
if [[ -z $split_file ]]; then
    if command -v split-file >/dev/null 2>&1; then
        split_file=split-file
    else
        split_file=/usr/lib/llvm-14/bin/split-file
    fi
fi

halo=true
replicas=""
partitions=""
for a in "$@"; do
    case $a in
    --enable_halo_exchange=*) halo=${a#*=} ;;
    --replica_count=*) replicas=${a#*=} ;;
    --partition_count=*) partitions=${a#*=} ;;
    true | false) halo=$a ;;
    *)
        echo "run_sdy_interpreter_test.sh: unknown flag $a" >&2
        exit 2
        ;;
    esac
done
counts=""
if [[ -n $replicas ]]; then
    counts+=" replica-count=$replicas"
fi
if [[ -n $partitions ]]; then
    counts+=" partition-count=$partitions"
fi
counts=${counts# }

rm -rf "$tmp"
mkdir -p "$tmp"
"$split_file" "$file" "$tmp"

name=$(basename "$file")
twin=none
case $name in
*executable_convert_global_to_local*)
    passes=(--sdy-convert-global-to-local${counts:+="$counts"} --sdy-drop-sharding-and-mesh)
    twin=sequential
    ;;
*executable_partitioner_pipeline*)
    passes=(--sdy-insert-explicit-reshards=enable-full-version=true
        --sdy-resolve-permutation-factors="enable-halo-exchange=$halo${counts:+ $counts}"
        --sdy-reshard-to-collectives
        --sdy-pad-for-divisibility
        --sdy-resolve-single-device-sharding${counts:+="$counts"}
        --sdy-convert-global-to-local${counts:+="$counts"}
        --sdy-drop-sharding-and-mesh)
    twin=sequential
    ;;
*executable_explicit_gather_scatter_batching*)
    passes=(--sdy-explicit-gather-scatter-batching)
    twin=original
    ;;
*)
    echo "run_sdy_interpreter_test.sh: no pass list for $name" >&2
    exit 2
    ;;
esac

"$SHARDPLAN" opt "$tmp/part1.mlir" "${passes[@]}" >"$tmp/processed.mlir"
# the module's body: its first line (`module {`) and closing brace dropped
sed '1d; /^}/,$d' "$tmp/processed.mlir" >"$tmp/combined.mlir"
if [[ $twin == sequential ]] && grep -q '@parallel_' "$tmp/part1.mlir" &&
    ! grep -q '@sequential_' "$tmp/part1.mlir"; then
    "$SHARDPLAN" opt "$tmp/part1.mlir" --sdy-drop-sharding-and-mesh |
        sed 's/@parallel_/@sequential_/g' | sed '1d; /^}/,$d' >>"$tmp/combined.mlir"
elif [[ $twin == original ]]; then
    sed 's/transformed_/original_/g' "$tmp/part1.mlir" >>"$tmp/combined.mlir"
fi
cat "$tmp/part2.mlir" >>"$tmp/combined.mlir"
"$SHARDPLAN" interpret "$tmp/combined.mlir"
