#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make mpi-test: the executor across MPI processes (executor/ex_mpi.h) on
# "hosts" made of network namespaces (tests/mpi/netns.sh: veth pairs on a
# bridge, Open MPI's TCP transport pinned to them, so every byte between two
# ranks crosses a network stack). Checks, against the one-device reference:
# the Flax MLP and the transformer training step on 8 devices as 2 hosts x 4
# and 4 hosts x 2; every collective over groups inside a host, across hosts
# and mixed (tests/mpi/colls.py); that calibrate --mpi calibrates every host
# and writes the network as an axis's link; and that a rank killed mid-run fails the
# run with a clear message. Without root or iproute2 it says so and runs the
# same ranks on loopback. Uses the release binary: Open MPI's own
# allocations at MPI_Init are reported as leaks by ASan (docs/executor.md).
# Usage: run.sh SHARDPLAN
set -uo pipefail
SP=$(realpath "$1")
cd "$(dirname "$0")/../.."
ROOT=$PWD
command -v mpirun >/dev/null || { echo "mpi-test: no mpirun (make deps installs openmpi-bin)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export OPENBLAS_NUM_THREADS=1
# ranks share this machine's cores: MPI waits yield them instead of spinning
export OMPI_MCA_mpi_yield_when_idle=1
TMP=$(mktemp -d /tmp/sp-mpi.XXXXXX)
PRE=spm$$
NETNS=0
cleanup() {
    [ "$NETNS" = 1 ] && bash "$ROOT/tests/mpi/netns.sh" down "$PRE"
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# MPI_TEST_LOOPBACK=1 takes the no-root path on purpose
if [ -z "${MPI_TEST_LOOPBACK:-}" ] && bash "$ROOT/tests/mpi/netns.sh" up 4 "$PRE" 2>"$TMP/netns.err"; then
    NETNS=1
    echo "mpi-test: 4 hosts as network namespaces ${PRE}0..3 (10.77.0.1-4 on veth spmpi0)"
    # plm_rsh_agent: "agent [options] HOST COMMAND": the daemon of HOST runs
    # in its namespace under its own host name.
    cat >"$TMP/agent.sh" <<'AGENT'
#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1; shift
exec ip netns exec "$host" unshare --uts sh -c "hostname $host; exec $*"
AGENT
    chmod +x "$TMP/agent.sh"
else
    [ -n "${MPI_TEST_LOOPBACK:-}" ] && echo "MPI_TEST_LOOPBACK is set" >"$TMP/netns.err"
    echo "mpi-test: cannot make network namespaces ($(head -1 "$TMP/netns.err")); running the ranks on loopback instead"
fi

# mpirun for H hosts, one rank each: prints the command to run ARGS
launch() {
    local h=$1
    shift
    if [ "$NETNS" = 1 ]; then
        : >"$TMP/hosts$h"
        for ((i = 0; i < h; i++)); do echo "${PRE}$i slots=1" >>"$TMP/hosts$h"; done
        timeout 90 ip netns exec "${PRE}0" mpirun --hostfile "$TMP/hosts$h" -np "$h" \
            --mca plm_rsh_agent "$TMP/agent.sh" --mca pml ob1 --mca btl tcp,self \
            --mca btl_tcp_if_include spmpi0 --mca oob_tcp_if_include spmpi0 "$@"
    else
        timeout 90 mpirun -np "$h" --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo "$@"
    fi
}

fail=0
pass=0
check() { # NAME OUTFILE: the run matched the reference
    if grep -q "^numerics: match" "$2"; then
        pass=$((pass + 1))
        echo "ok   $1 ($(grep -m1 '^median' "$2" | cut -d, -f1))"
    else
        fail=1
        echo "FAIL $1"
        sed 's/^/    /' "$2" | tail -20
    fi
}

"$SP" example transformer --train --mesh data=2,model=4 --strategy dp+tp --layers 2 --d-model 64 \
    --heads 4 --seq 16 --batch 8 >"$TMP/transformer.json" || exit 1
python3 "$ROOT/tests/mpi/colls.py" >"$TMP/colls.mlir" || exit 1
python3 "$ROOT/tests/mpi/colls.py" --one >"$TMP/colls1.mlir" || exit 1

for layout in "2 4" "4 2"; do
    set -- $layout
    h=$1 per=$2
    for model in examples/flax_mlp.mlir "$TMP/transformer.json"; do
        name="$(basename "$model") on $h hosts x $per devices"
        launch "$h" "$SP" run "$model" --mpi --iters 2 >"$TMP/out" 2>&1
        check "$name" "$TMP/out"
    done
    name="every collective (colls.py) on $h hosts x $per devices"
    launch "$h" "$SP" run "$TMP/colls.mlir" --mpi --iters 2 --ops 1 >"$TMP/out" 2>&1
    check "$name" "$TMP/out"
    # groups inside a host (shared memory), across hosts and mixed all ran
    for path in "shared memory" MPI_Allreduce MPI_Allgather MPI_Reduce_scatter "MPI_Isend/Irecv all-to-all" "MPI_Isend/Irecv"; do
        if ! grep -q "  $path\$" "$TMP/out"; then
            echo "FAIL $name: no collective took the path '$path'"
            fail=1
        fi
    done
    if [ "$NETNS" = 1 ] && ! grep -q "1 on ${PRE}1 " "$TMP/out"; then
        echo "FAIL $name: rank 1 did not run in namespace ${PRE}1"
        grep '^MPI:' "$TMP/out"
        fail=1
    fi
    # the same with every all-reduce and reduce-scatter round ex_mpi.c's
    # ring (which only tensors from 1 MiB take by default), in 64-byte
    # messages so each block crosses in several
    launch "$h" -x SHARDPLAN_MPI_RING=0,64 "$SP" run "$TMP/colls.mlir" --mpi --iters 2 >"$TMP/out" 2>&1
    check "every collective round the ring on $h hosts x $per devices" "$TMP/out"
done

# one device per host: every group has one member on each (direct MPI calls)
launch 2 "$SP" run "$TMP/colls1.mlir" --mpi --iters 2 --ops 1 >"$TMP/out" 2>&1
check "every collective on 2 hosts x 1 device" "$TMP/out"
launch 2 -x SHARDPLAN_MPI_RING=0,64 "$SP" run "$TMP/colls1.mlir" --mpi --iters 2 >"$TMP/out" 2>&1
check "every collective round the ring on 2 hosts x 1 device" "$TMP/out"

# a per-process program (JAX pmap: 2 replicas) is refused under --mpi with
# the reason, on every rank, before any worker starts
cat >"$TMP/pmap.mlir" <<'PMAP'
module @pmap attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %r = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}
PMAP
name="a per-process program refused under --mpi on 2 hosts"
if ! launch 2 "$SP" run "$TMP/pmap.mlir" --mpi --iters 1 >"$TMP/out" 2>&1 &&
    grep -q "a per-process program (2 replicas x 1 partitions.*cannot run under --mpi yet" "$TMP/out"; then
    pass=$((pass + 1))
    echo "ok   $name"
else
    fail=1
    echo "FAIL $name"
    sed 's/^/    /' "$TMP/out" | tail -20
fi

# calibrate --mpi: every host calibrated at once (one line each, from its
# own host), the network written as the data axis's link, a profile the
# cost model reads
name="calibrate --mpi --axes data on 2 hosts x 2 devices"
launch 2 "$SP" calibrate --mpi --axes data --devices 2 --out "$TMP/prof.json" >"$TMP/out" 2>&1
host1=$([ "$NETNS" = 1 ] && echo "${PRE}1" || echo "")
if grep -q "^  process 0 on .* (all hosts at once): f32 " "$TMP/out" &&
    grep -q "^  process 1 on ${host1}.* (all hosts at once): f32 " "$TMP/out" &&
    python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["links"]["data"]; sys.exit(not (l["bandwidth"] > 0 and l["latency"] > 0))' "$TMP/prof.json" &&
    "$SP" cost examples/flax_mlp.mlir --profile "$TMP/prof.json" >/dev/null 2>&1; then
    pass=$((pass + 1))
    echo "ok   $name ($(grep -m1 'across hosts' "$TMP/out" | sed 's/^ *//'))"
else
    fail=1
    echo "FAIL $name"
    sed 's/^/    /' "$TMP/out" | tail -20
fi

# A rank killed mid-run fails the run with a clear message.
SP_MPI_TEST=$$ launch 2 "$SP" run "$TMP/transformer.json" --mpi --iters 100000 >"$TMP/kill.out" 2>&1 &
job=$!
victim=""
for _ in $(seq 1 200); do
    if [ "$NETNS" = 1 ]; then
        cands=$(ip netns pids "${PRE}1" 2>/dev/null)
    else
        cands=$(pgrep -x shardplan 2>/dev/null)
    fi
    for p in $cands; do
        # this test's rank 1 (SP_MPI_TEST marks the processes this run started)
        if [ "$(cat /proc/$p/comm 2>/dev/null)" = shardplan ] &&
            { [ "$NETNS" = 1 ] || { tr '\0' '\n' </proc/$p/environ 2>/dev/null |
                grep -xE "OMPI_COMM_WORLD_RANK=1|SP_MPI_TEST=$$" | wc -l | grep -qx 2; }; }; then
            victim=$p
        fi
    done
    [ -n "$victim" ] && break
    sleep 0.05
done
if [ -z "$victim" ]; then
    echo "FAIL rank killed mid-run: rank 1 never started"
    fail=1
    kill "$job" 2>/dev/null
    wait "$job"
else
    sleep 1 # in the middle of its runs
    kill -KILL "$victim"
    wait "$job"
    rc=$?
    if [ "$rc" != 0 ] && grep -qiE "exited on signal 9|killed" "$TMP/kill.out"; then
        pass=$((pass + 1))
        echo "ok   rank killed mid-run: run failed (exit $rc): $(grep -m1 -iE 'exited on signal|killed' "$TMP/kill.out" | sed 's/^ *//')"
    else
        echo "FAIL rank killed mid-run (exit $rc)"
        sed 's/^/    /' "$TMP/kill.out" | tail -20
        fail=1
    fi
fi

# The benchmark service sends runs to an MPI job (serve --bench-mpi): one
# run succeeds with the "mpi" member; a rank killed mid-run fails that run
# with a clear error and the service stays up.
if [ "$NETNS" = 1 ]; then
    LAUNCHER="ip netns exec ${PRE}0 mpirun --hostfile $TMP/hosts2 -np 2 --mca plm_rsh_agent $TMP/agent.sh --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include spmpi0 --mca oob_tcp_if_include spmpi0"
else
    LAUNCHER="mpirun -np 2 --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo"
fi
PORT=$((20000 + RANDOM % 20000))
B=http://127.0.0.1:$PORT
SP_MPI_TEST=$$ "$SP" serve --listen 127.0.0.1:$PORT --db "$TMP/serve.db" --log "$TMP/serve.log" \
    --bench-mpi "$LAUNCHER" 2>"$TMP/serve.err" &
server=$!
for _ in $(seq 1 100); do curl -sf $B/healthz >/dev/null && break; sleep 0.1; done
run_bench() { # ITERS: queues a run of the MLP plan, prints its id
    local plan
    plan=$(curl -sf -H 'Content-Type: application/json' --data-binary @examples/flax_mlp.json \
        $B/v1/plans | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
    curl -sf -H 'Content-Type: application/json' -d "{\"plan_id\":$plan,\"iters\":$1}" \
        $B/v1/benchmarks | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}
wait_bench() { # ID: waits until the run ends (60 s), prints its JSON
    for _ in $(seq 1 600); do
        curl -sf $B/v1/benchmarks/$1 >"$TMP/bench.json"
        grep -qE '"status":"(succeeded|failed|canceled)"' "$TMP/bench.json" && break
        sleep 0.1
    done
    cat "$TMP/bench.json"
}
id=$(run_bench 2)
if [ -n "$id" ] && wait_bench "$id" | grep -q '"status":"succeeded"' && grep -q '"mpi":{"processes":2' "$TMP/bench.json"; then
    pass=$((pass + 1))
    echo "ok   serve --bench-mpi: a benchmark run on 2 MPI processes succeeded"
else
    fail=1
    echo "FAIL serve --bench-mpi: run $id"
    head -c 600 "$TMP/bench.json"; echo; tail -5 "$TMP/serve.err"
fi
id=$(run_bench 100000)
victim=""
for _ in $(seq 1 300); do
    if [ "$NETNS" = 1 ]; then
        cands=$(ip netns pids "${PRE}1" 2>/dev/null)
    else
        cands=$(pgrep -x shardplan 2>/dev/null)
    fi
    for p in $cands; do
        if [ "$(cat /proc/$p/comm 2>/dev/null)" = shardplan ] && [ "$p" != "$server" ] &&
            { [ "$NETNS" = 1 ] || { tr '\0' '\n' </proc/$p/environ 2>/dev/null |
                grep -xE "OMPI_COMM_WORLD_RANK=1|SP_MPI_TEST=$$" | wc -l | grep -qx 2; }; }; then
            victim=$p
        fi
    done
    [ -n "$victim" ] && break
    sleep 0.05
done
if [ -n "$victim" ]; then
    sleep 1
    kill -KILL "$victim"
fi
wait_bench "$id" >/dev/null
if [ -n "$victim" ] && grep -q '"status":"failed"' "$TMP/bench.json" && grep -q 'MPI job' "$TMP/bench.json" &&
    curl -sf $B/healthz | grep -q ok; then
    pass=$((pass + 1))
    echo "ok   serve --bench-mpi: a rank killed mid-run failed the run, the service is up: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["error"][:90])' "$TMP/bench.json")"
else
    fail=1
    echo "FAIL serve --bench-mpi: killed rank (victim '${victim}')"
    head -c 600 "$TMP/bench.json"; echo
fi
kill -TERM "$server" 2>/dev/null
wait "$server" 2>/dev/null

echo "mpi-test: $pass passed, $([ $fail = 0 ] && echo none failed || echo SOME FAILED) ($([ $NETNS = 1 ] && echo network namespaces || echo loopback))"
exit $fail
