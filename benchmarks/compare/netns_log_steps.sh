#!/usr/bin/env bash
# Small collectives across namespaced hosts: the log-step algorithms against
# the linear ones they replace under auto, interleaved round by round so a
# noisy machine treats both alike.
#   benchmarks/compare/netns_log_steps.sh BUILD [HOSTS] [ROUNDS]
# HOSTS namespaced hosts (default 8) x 1 rank, joined by veths and a bridge
# (tests/fault/netns_hosts.sh), so every pair talks TCP across a veth. Each
# round runs, at 8 B, 1 KiB and 32 KiB (AllGather: in all, over the ranks):
#   AllReduce  ring | rd (recursive doubling) | rabenseifner
#   Broadcast  chain | tree (binomial)
#   AllGather  ring | bruck
#   AllReduce  Open MPI (its tuned collectives; where mpirun and
#              mpi_allreduce_perf were built), one rank per namespace too
# and prints the out-of-place time in microseconds; at the end the medians.
# With more ranks than cores every wait must yield: TIDAL_BUSY_POLL=0 (a rank
# alone in its namespace would otherwise busy-poll) and Open MPI's
# mpi_yield_when_idle=1. Needs root (ip netns). Run it on a quiet machine.
set -euo pipefail
build=$(cd "$1" && pwd)
hosts=${2:-8}
rounds=${3:-5}
netns=$(cd "$(dirname "$0")/../../tests/fault" && pwd)/netns_hosts.sh
run() {  # VAR=value binary -> "size:time size:time ..."
  env "$1" NETNS_TIMEOUT=120 "$netns" -H "$hosts" -L 1 -- "$build/benchmarks/$2" \
    -b 8 -e 32768 -f 64 -n 200 -w 20 2>&1 |
    awk '$1 ~ /^[0-9]+$/ && NF > 8 {printf "%s:%s ", $1, $6}'
}
export TIDAL_BUSY_POLL=0
# Open MPI starts one orted per "host" through an rsh agent that enters the
# host's namespace; they reach mpirun on the bridge's address.
mpi_netns() {
  [ -x "$build/benchmarks/mpi_allreduce_perf" ] && command -v mpirun >/dev/null || return 0
  local tag="tmpi$$" dir
  dir=$(mktemp -d)
  ip link add "${tag}br" type bridge && ip link set "${tag}br" up &&
    ip addr add 10.233.0.254/24 dev "${tag}br" || return 0
  for ((h = 0; h < hosts; h++)); do
    ip netns add "${tag}h$h"
    ip link add "${tag}v$h" type veth peer name "${tag}p$h"
    ip link set "${tag}v$h" master "${tag}br" up
    ip link set "${tag}p$h" netns "${tag}h$h"
    ip -n "${tag}h$h" addr add "10.233.0.$((h + 1))/24" dev "${tag}p$h"
    ip -n "${tag}h$h" link set "${tag}p$h" up
    ip -n "${tag}h$h" link set lo up
    echo "10.233.0.$((h + 1)) slots=1" >>"$dir/hosts"
  done
  cat >"$dir/agent" <<AGENT
#!/bin/sh
# mpirun calls: agent [ssh options] HOST COMMAND...
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
exec ip netns exec ${tag}h\$((\${host##*.} - 1)) sh -c "\$*"
AGENT
  chmod +x "$dir/agent"
  timeout 120 mpirun --allow-run-as-root -np "$hosts" --hostfile "$dir/hosts" \
    --mca plm_rsh_agent "$dir/agent" --mca pml ob1 --mca btl tcp,self \
    --mca btl_tcp_if_include 10.233.0.0/24 --mca oob_tcp_if_include 10.233.0.0/24 \
    --mca mpi_yield_when_idle 1 "$build/benchmarks/mpi_allreduce_perf" -b 8 -e 32768 -f 64 \
    -n 200 -w 20 2>&1 | awk '$1 ~ /^[0-9]+$/ && NF > 8 {printf "%s:%s ", $1, $6}'
  for ((h = 0; h < hosts; h++)); do ip netns del "${tag}h$h"; done
  ip link del "${tag}br"
  rm -rf "$dir"
}
log=$(mktemp)
for i in $(seq 1 "$rounds"); do
  for cfg in "TIDAL_ALLREDUCE_ALGO=ring all_reduce_perf" "TIDAL_ALLREDUCE_ALGO=rd all_reduce_perf" \
             "TIDAL_ALLREDUCE_ALGO=rabenseifner all_reduce_perf" \
             "TIDAL_BROADCAST_ALGO=chain broadcast_perf" "TIDAL_BROADCAST_ALGO=tree broadcast_perf" \
             "TIDAL_ALLGATHER_ALGO=ring all_gather_perf" "TIDAL_ALLGATHER_ALGO=bruck all_gather_perf"; do
    # shellcheck disable=SC2086  # cfg is "VAR=value binary"
    echo "round $i ${cfg// /,} $(run $cfg)" | tee -a "$log"
  done
  mpi=$(mpi_netns)
  [ -z "$mpi" ] || echo "round $i OpenMPI,all_reduce_perf $mpi" | tee -a "$log"
done
python3 - "$log" <<'PY'
import statistics, sys
times = {}
for line in open(sys.argv[1]):
    words = line.split()
    for pair in words[3:]:
        size, t = pair.split(":")
        times.setdefault((words[2], int(size)), []).append(float(t))
print(f"{'algorithm':52} {'bytes':>7} {'median us':>10} {'min us':>8}")
for (cfg, size), ts in sorted(times.items(), key=lambda kv: (kv[0][0].split(",")[1], kv[0][1], kv[0][0])):
    print(f"{cfg:52} {size:7d} {statistics.median(ts):10.1f} {min(ts):8.1f}")
PY
