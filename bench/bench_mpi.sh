#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make bench-mpi: the executor's collectives across two hosts made of
# network namespaces (tests/mpi/netns.sh; loopback without root), one device
# per host, against the raw link measured in the same run:
#   1. a plain TCP stream from host 0 to host 1 (bench_mpi_link), before and
#      after the collectives (link% is against the first), and two streams
#      at once, one each way (the capacity each way when both directions
#      share the machine's cores, as every ring step's sends do);
#   2. all-reduce, all-gather, reduce-scatter and all-to-all of 64 MiB (the
#      size nccl-tests gives: the buffer of an all-reduce, the gathered
#      output, the scattered input, each process's all-to-all buffer):
#      time per run (the collective's op timer, the first run left out),
#      its MPI part, algbw = S / t and busbw = algbw * 2(n-1)/n (all-reduce)
#      or (n-1)/n (the others), against the link; target busbw >= 70%;
#   3. the MLP training step on 2 hosts x 4 devices (exec-worker --mpi) and
#      on one host with 8 devices, beside the step the cost model predicts
#      with a profile `shardplan calibrate --mpi --axes data` measured on the
#      same two hosts (the data axis crosses them); target: within 25%.
# Usage: bench_mpi.sh SHARDPLAN BENCH_MPI_LINK
set -uo pipefail
SP=$(realpath "$1")
LINK=$(realpath "$2")
cd "$(dirname "$0")/.."
ROOT=$PWD
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_mpi_yield_when_idle=1
TMP=$(mktemp -d /tmp/sp-bench-mpi.XXXXXX)
PRE=spb$$
NETNS=0
cleanup() {
    [ "$NETNS" = 1 ] && bash "$ROOT/tests/mpi/netns.sh" down "$PRE"
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if bash "$ROOT/tests/mpi/netns.sh" up 2 "$PRE" 2>"$TMP/netns.err"; then
    NETNS=1
    cat >"$TMP/agent.sh" <<'AGENT'
#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1; shift
exec ip netns exec "$host" unshare --uts sh -c "hostname $host; exec $*"
AGENT
    chmod +x "$TMP/agent.sh"
    printf '%s0 slots=1\n%s1 slots=1\n' "$PRE" "$PRE" >"$TMP/hosts"
    echo "bench-mpi: 2 hosts as network namespaces ${PRE}0, ${PRE}1 (veth pairs on a bridge)"
else
    echo "bench-mpi: cannot make network namespaces ($(head -1 "$TMP/netns.err")); loopback instead"
fi

launch() {
    if [ "$NETNS" = 1 ]; then
        timeout 300 ip netns exec "${PRE}0" mpirun --hostfile "$TMP/hosts" -np 2 \
            --mca plm_rsh_agent "$TMP/agent.sh" --mca pml ob1 --mca btl tcp,self \
            --mca btl_tcp_if_include spmpi0 --mca oob_tcp_if_include spmpi0 "$@"
    else
        timeout 300 mpirun -np 2 --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo "$@"
    fi
}

link() { # prints GB/s of one 1 GiB TCP stream from host 0 to host 1
    local port=$((20000 + RANDOM % 20000)) dst=127.0.0.1
    if [ "$NETNS" = 1 ]; then
        ip netns exec "${PRE}1" "$LINK" recv $port >"$TMP/link" &
        dst=10.77.0.2
        ip netns exec "${PRE}0" "$LINK" send $dst $port 1024
    else
        "$LINK" recv $port >"$TMP/link" &
        "$LINK" send $dst $port 1024
    fi
    wait $!
    awk '{print $4}' "$TMP/link"
}

duplex() { # prints GB/s each way of two 1 GiB TCP streams at once, one each way
    local p1=$((20000 + RANDOM % 20000)) p2
    p2=$((p1 + 1))
    if [ "$NETNS" = 1 ]; then
        ip netns exec "${PRE}1" "$LINK" recv $p1 >"$TMP/dup1" &
        ip netns exec "${PRE}0" "$LINK" recv $p2 >"$TMP/dup2" &
        ip netns exec "${PRE}0" "$LINK" send 10.77.0.2 $p1 1024 &
        ip netns exec "${PRE}1" "$LINK" send 10.77.0.1 $p2 1024
    else
        "$LINK" recv $p1 >"$TMP/dup1" &
        "$LINK" recv $p2 >"$TMP/dup2" &
        "$LINK" send 127.0.0.1 $p1 1024 &
        "$LINK" send 127.0.0.1 $p2 1024
    fi
    wait
    awk '{s += $4; n++} END {printf "%.3f", n ? s / n : 0}' "$TMP/dup1" "$TMP/dup2"
}

l1=$(link)
echo "raw link (TCP stream, 1 GiB): ${l1} GB/s"
d1=$(duplex)
echo "raw link both ways at once (two streams, GB/s each way): ${d1} GB/s"

# the collectives' modules: 64 MiB of f32 = 4096 x 4096
python3 - "$TMP" <<'PY'
import sys
d = sys.argv[1]
M = 'sdy.mesh @mesh = <["x"=2]>\n'
def partial(op):
    # each device's 1x4096x4096 block summed over dim 0: a 64 MiB partial sum
    return (M + 'func.func @main(%arg0: tensor<2x4096x4096xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}]>}) -> tensor<4096x4096xf32> {\n'
            '  %z = stablehlo.constant dense<0.0> : tensor<f32>\n'
            '  %0 = stablehlo.reduce(%arg0 init: %z) applies stablehlo.add across dimensions = [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<2x4096x4096xf32>, tensor<f32>) -> tensor<4096x4096xf32>\n'
            '  %1 = ' + op + ' : tensor<4096x4096xf32>\n'
            '  return %1 : tensor<4096x4096xf32>\n}\n')
open(d + '/all_reduce.mlir', 'w').write(partial('sdy.all_reduce {"x"} %0 out_sharding=<@mesh, [{}, {}]>'))
open(d + '/reduce_scatter.mlir', 'w').write(partial('sdy.reduce_scatter [{"x"}, {}] %0 out_sharding=<@mesh, [{"x"}, {}]>'))
def move(rows, ins, op, outs):
    t = 'tensor<%dx4096xf32>' % rows
    return (M + 'func.func @main(%%arg0: %s {sdy.sharding = #sdy.sharding<@mesh, %s>}) -> %s {\n'
            '  %%0 = %s %%arg0 out_sharding=<@mesh, %s> : %s\n  return %%0 : %s\n}\n' % (t, ins, t, op, outs, t, t))
open(d + '/all_gather.mlir', 'w').write(move(4096, '[{"x"}, {}]', 'sdy.all_gather [{"x"}, {}]', '[{}, {}]'))
open(d + '/all_to_all.mlir', 'w').write(move(8192, '[{"x"}, {}]', 'sdy.all_to_all [{"x"}: 0->1]', '[{}, {"x"}]'))
PY

printf '%-15s %9s %9s %9s %9s %9s %7s  %s\n' collective "MiB" "ms" "mpi ms" "algbw" "busbw" "link%" path
fig() { # NAME BUSFACTOR
    launch "$SP" run "$TMP/$1.mlir" --mpi --iters 6 --ops 1 --json >"$TMP/$1.json" 2>"$TMP/$1.err" || {
        echo "bench-mpi: $1 failed"; tail -5 "$TMP/$1.err"; tail -c 400 "$TMP/$1.json"; return; }
    python3 - "$TMP/$1.json" "$1" "$2" "$l1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
name, bus, link = sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
c = [x for x in d["mpi"]["collectives"] if x["path"] != "shared memory"][0]
S = 64 * 2**20
t = c["mean_s"]
alg = S / t / 1e9
busbw = alg * bus
print("%-15s %9d %9.2f %9.2f %9.3f %9.3f %6.0f%%  %s%s" % (name, 64, t * 1e3, c["network_s"] * 1e3,
      alg, busbw, 100 * busbw / link if link > 0 else 0, c["path"],
      "" if d["numerics"]["match"] else "  (NUMERICS MISMATCH)"))
PY
}
fig all_reduce 1.0
fig all_gather 0.5
fig reduce_scatter 0.5
fig all_to_all 0.5
l2=$(link)
echo "raw link again: ${l2} GB/s (algbw/busbw in GB/s; link% against the first: ${l1} GB/s)"
echo "  (on this machine both namespaces' network stacks share its cores: a collective that sends"
echo "   both ways at once has the both-ways figure, ${d1} GB/s each way, to work with)"

# the MLP training step: 2 hosts x 4 devices against one host with 8
"$SP" example mlp --train --mesh data=2,model=4 >"$TMP/mlp.json" || exit 1
launch "$SP" calibrate --mpi --axes data --devices 4 --out "$TMP/profile.json" >"$TMP/calib.out" 2>&1 ||
    { echo "bench-mpi: calibrate --mpi failed"; tail -5 "$TMP/calib.out"; }
grep -E "per worker|across hosts" "$TMP/calib.out" | sed 's/^ */calibrate --mpi: /'
"$SP" cost "$TMP/mlp.json" --partition --profile "$TMP/profile.json" --json >"$TMP/cost.json" 2>/dev/null
launch "$SP" exec-worker --mpi --warmup 1 --iters 5 <"$TMP/mlp.json" >"$TMP/mlp2.out" 2>"$TMP/mlp2.err"
"$SP" exec-worker --warmup 1 --iters 5 <"$TMP/mlp.json" >"$TMP/mlp1.out" 2>"$TMP/mlp1.err"
python3 - "$TMP/mlp1.out" "$TMP/mlp2.out" "$TMP/cost.json" <<'PY'
import json, sys
def res(f):
    for l in open(f):
        if l.startswith("result "):
            return json.loads(l[7:])
    return None
one, two = res(sys.argv[1]), res(sys.argv[2])
if one is None or two is None:
    print("MLP training step: a run failed")
    sys.exit(0)
try:
    pred = json.load(open(sys.argv[3]))["time"]["step_s"]
except Exception:
    pred = 0
print("MLP training step (8 devices, data=2 x model=4): 1 host %.2f ms, 2 hosts x 4 %.2f ms (%.2fx)"
      % (one["step_s"] * 1e3, two["step_s"] * 1e3, two["step_s"] / one["step_s"]))
if pred > 0:
    print("  predicted with the calibrated profile (data across hosts): %.2f ms, measured/predicted %.2f "
          "(target within 25%%: %s)" % (pred * 1e3, two["step_s"] / pred,
                                        "met" if abs(two["step_s"] / pred - 1) <= 0.25 else "not met"))
PY
