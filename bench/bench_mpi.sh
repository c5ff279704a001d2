#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make bench-mpi: the executor's collectives across two hosts made of
# network namespaces (tests/mpi/netns.sh; loopback without root), one device
# per host, against the raw link measured in the same run. The machine is
# shared and its figures move by 2x from minute to minute, so every figure
# is taken REPS times (BENCH_MPI_REPS, default 3), the kinds interleaved,
# and the median printed beside the spread:
#   1. the link: a plain TCP stream from host 0 to host 1 (bench_mpi_link),
#      and two streams at once, one each way (the capacity each way when
#      both directions share the machine's cores, as every collective's
#      sends do: a ring step sends right while it receives from the left);
#      link% is against the one-stream median (nccl-tests hold busbw
#      against the one-way rate of a full-duplex link), dup% against the
#      both-ways median (what a collective can get on this machine);
#   2. all-reduce, all-gather, reduce-scatter and all-to-all of 64 MiB (the
#      size nccl-tests gives: the buffer of an all-reduce, the gathered
#      output, the scattered input, each process's all-to-all buffer):
#      time per run (the collective's op timer, the first run left out),
#      its MPI part, algbw = S / t and busbw = algbw * 2(n-1)/n (all-reduce)
#      or (n-1)/n (the others), against the link; target busbw >= 70%.
#      Each beside Open MPI's own collective on the same communicator
#      (SHARDPLAN_MPI_RING above 64 MiB: MPI_Allreduce,
#      MPI_Reduce_scatter_block; the all-gather is MPI_Allgather and the
#      all-to-all packed Isend/Irecv in both rows, so their two rows show
#      the run's noise on one code path);
#   3. the MLP training step on 2 hosts x 4 devices (exec-worker --mpi) and
#      on one host with 8 devices, interleaved, beside the step the cost
#      model predicts with a profile `shardplan calibrate --mpi --axes data`
#      measured on the same two hosts (the data axis crosses them); target:
#      the median measured/predicted within 25%.
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
    awk '{s += $4; n++} END {printf "%.3f\n", n ? s / n : 0}' "$TMP/dup1" "$TMP/dup2"
}

REPS=${BENCH_MPI_REPS:-3}
case "$REPS" in [1-9] | 1[0-9] | 20) ;; *) echo "bench-mpi: BENCH_MPI_REPS=$REPS is not 1..20"; exit 2 ;; esac
med() { # the median of the numbers on stdin
    sort -g | awk '{v[NR] = $1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2];
        else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
: >"$TMP/l1s"
: >"$TMP/d1s"
for ((r = 0; r < REPS; r++)); do
    link >>"$TMP/l1s"
    duplex >>"$TMP/d1s"
done
l1=$(med <"$TMP/l1s")
d1=$(med <"$TMP/d1s")
echo "load average $(cut -d' ' -f1-3 /proc/loadavg); $REPS runs of each figure, medians (the runs in brackets)"
echo "raw link (one TCP stream, 1 GiB): ${l1} GB/s [$(tr '\n' ' ' <"$TMP/l1s" | sed 's/ $//')]"
echo "raw link both ways at once (two streams, GB/s each way): ${d1} GB/s [$(tr '\n' ' ' <"$TMP/d1s" | sed 's/ $//')]"
echo "  both ways / one way: $(awk -v a="$d1" -v b="$l1" 'BEGIN {printf "%.0f%%", (b > 0 ? 100 * a / b : 0)}') (the most a collective sending both ways can reach here)"

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

# one run of a collective: "ms mpi_ms" of the collective's op timer
one() { # NAME [ENV=VALUE]
    launch ${2:+-x "$2"} "$SP" run "$TMP/$1.mlir" --mpi --iters 6 --ops 1 --json >"$TMP/$1.json" \
        2>"$TMP/$1.err" || { echo "bench-mpi: $1 failed" >&2; tail -5 "$TMP/$1.err" >&2; return 1; }
    python3 - "$TMP/$1.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = [x for x in d["mpi"]["collectives"] if x["path"] != "shared memory"][0]
print("%.3f %.3f %s %s" % (c["mean_s"] * 1e3, c["network_s"] * 1e3,
      "ok" if d["numerics"]["match"] else "MISMATCH", c["path"].replace(" ", "_")))
PY
}
NAMES="all_reduce all_gather reduce_scatter all_to_all"
for ((r = 0; r < REPS; r++)); do
    for c in $NAMES; do
        one "$c" >>"$TMP/$c.ours"
        export SHARDPLAN_MPI_RING=$((1 << 40))
        one "$c" SHARDPLAN_MPI_RING >>"$TMP/$c.ompi"
        unset SHARDPLAN_MPI_RING
    done
done
printf '%-15s %-5s %9s %9s %9s %9s %6s %6s  %s\n' collective by "ms" "mpi ms" "algbw" "busbw" "link%" "dup%" "runs (ms)"
for c in $NAMES; do
    case $c in all_reduce) bus=1.0 ;; *) bus=0.5 ;; esac
    for who in ours ompi; do
        [ -s "$TMP/$c.$who" ] || { printf '%-15s %-5s failed\n' "$c" "$who"; continue; }
        t=$(awk '{print $1}' "$TMP/$c.$who" | med)
        m=$(awk '{print $2}' "$TMP/$c.$who" | med)
        bad=$(grep -c MISMATCH "$TMP/$c.$who")
        runs=$(awk '{printf "%s%.0f", (NR > 1 ? " " : ""), $1}' "$TMP/$c.$who")
        awk -v c="$c" -v w="$who" -v t="$t" -v m="$m" -v bus="$bus" -v l="$l1" -v d="$d1" -v runs="$runs" \
            -v bad="$bad" 'BEGIN {alg = 64 * 1048576 / (t / 1e3) / 1e9; b = alg * bus;
            printf "%-15s %-5s %9.2f %9.2f %9.3f %9.3f %5.0f%% %5.0f%%  [%s]%s\n", c, w, t, m, alg, b,
                (l > 0 ? 100 * b / l : 0), (d > 0 ? 100 * b / d : 0), runs, (bad > 0 ? "  (NUMERICS MISMATCH)" : "")}'
    done
done
echo "(ours: the executor's paths; ompi: Open MPI's own collective on the same communicator;"
echo " algbw/busbw in GB/s, link% against one stream (${l1} GB/s), dup% against both ways (${d1} GB/s each way))"
l2=$(link)
echo "raw link again: ${l2} GB/s"

# the MLP training step: 2 hosts x 4 devices against one host with 8,
# interleaved, against the prediction of a profile calibrated once
"$SP" example mlp --train --mesh data=2,model=4 >"$TMP/mlp.json" || exit 1
launch "$SP" calibrate --mpi --axes data --devices 4 --out "$TMP/profile.json" >"$TMP/calib.out" 2>&1 ||
    { echo "bench-mpi: calibrate --mpi failed"; tail -5 "$TMP/calib.out"; }
grep -E "per worker|across hosts" "$TMP/calib.out" | sed 's/^ */calibrate --mpi: /'
"$SP" cost "$TMP/mlp.json" --partition --profile "$TMP/profile.json" --json >"$TMP/cost.json" 2>/dev/null
for ((r = 0; r < REPS; r++)); do
    launch "$SP" exec-worker --mpi --warmup 1 --iters 5 <"$TMP/mlp.json" >"$TMP/mlp2.$r.out" 2>"$TMP/mlp2.$r.err"
    "$SP" exec-worker --warmup 1 --iters 5 <"$TMP/mlp.json" >"$TMP/mlp1.$r.out" 2>"$TMP/mlp1.$r.err"
done
python3 - "$TMP" "$REPS" "$TMP/cost.json" <<'PY'
import json, statistics, sys
def res(f):
    try:
        for l in open(f):
            if l.startswith("result "):
                return json.loads(l[7:])
    except OSError:
        pass
    return None
tmp, reps = sys.argv[1], int(sys.argv[2])
one = [r["step_s"] for r in (res("%s/mlp1.%d.out" % (tmp, k)) for k in range(reps)) if r]
two = [r["step_s"] for r in (res("%s/mlp2.%d.out" % (tmp, k)) for k in range(reps)) if r]
if not one or not two:
    print("MLP training step: a run failed")
    sys.exit(0)
try:
    pred = json.load(open(sys.argv[3]))["time"]["step_s"]
except Exception:
    pred = 0
m1, m2 = statistics.median(one), statistics.median(two)
ms = lambda v: " ".join("%.0f" % (x * 1e3) for x in v)
print("MLP training step (8 devices, data=2 x model=4), medians of %d: 1 host %.2f ms [%s], "
      "2 hosts x 4 %.2f ms [%s] (%.2fx)" % (reps, m1 * 1e3, ms(one), m2 * 1e3, ms(two), m2 / m1))
if pred > 0:
    ratios = [t / pred for t in two]
    r = statistics.median(ratios)
    print("  predicted with the calibrated profile (data across hosts): %.2f ms, measured/predicted "
          "%.2f [%s] (target within 25%%: %s)" % (pred * 1e3, r, " ".join("%.2f" % x for x in ratios),
                                                  "met" if abs(r - 1) <= 0.25 else "not met"))
PY
echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
