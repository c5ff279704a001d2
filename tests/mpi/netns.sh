#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Hosts for the MPI tests on one machine (tests/mpi/run.sh, bench/bench_mpi.sh):
#   netns.sh up N PREFIX    N (2..4) network namespaces PREFIX0.. each with a
#                           veth "spmpi0" (10.77.0.(i+1)/24) whose peer sits on
#                           a bridge in the namespace PREFIXsw, so every byte
#                           between two hosts crosses a real network stack
#   netns.sh down PREFIX    deletes them (safe to call when they do not exist)
# Needs root and iproute2; "up" fails (and leaves nothing behind) otherwise.
set -u
cmd=${1:-}; shift || true
down() {
    local pre=$1
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${pre}([0-9]+|sw)\$"); do
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf /etc/netns/"${pre}"[0-9]* 2>/dev/null
    return 0
}
up() {
    local n=$1 pre=$2
    [ "$(id -u)" = 0 ] || { echo "netns: not root" >&2; return 1; }
    command -v ip >/dev/null || { echo "netns: no ip (iproute2)" >&2; return 1; }
    down "$pre"
    ip netns add "${pre}sw" || return 1
    ip -n "${pre}sw" link add spbr type bridge &&
        ip -n "${pre}sw" link set spbr up &&
        ip -n "${pre}sw" link set lo up || { down "$pre"; return 1; }
    for ((i = 0; i < n; i++)); do
        local ns=${pre}$i
        ip netns add "$ns" &&
            ip -n "$ns" link set lo up &&
            ip link add "${pre}h$i" netns "$ns" type veth peer name "${pre}s$i" netns "${pre}sw" &&
            ip -n "$ns" link set "${pre}h$i" name spmpi0 &&
            ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev spmpi0 &&
            ip -n "$ns" link set spmpi0 up &&
            ip -n "${pre}sw" link set "${pre}s$i" master spbr &&
            ip -n "${pre}sw" link set "${pre}s$i" up || { down "$pre"; return 1; }
    done
    return 0
}
case "$cmd" in
up) up "$1" "$2" ;;
down) down "$1" ;;
*) echo "usage: netns.sh up N PREFIX | down PREFIX" >&2; exit 2 ;;
esac
