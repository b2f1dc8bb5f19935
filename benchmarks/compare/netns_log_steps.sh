#!/usr/bin/env bash
# Small collectives across namespaced hosts: the log-step algorithms against
# the linear ones they replace under auto, interleaved round by round so a
# noisy machine treats both alike.
#   benchmarks/compare/netns_log_steps.sh BUILD [HOSTS] [ROUNDS] [DELAY]
# HOSTS namespaced hosts (default 8) x 1 rank (tests/fault/netns_hosts.sh),
# so every pair talks TCP between namespaces. DELAY (netem's units, e.g.
# 200us) holds every packet that long on its way between hosts: through tc
# netem where the kernel has it, else through netns_delay_switch (built in
# BUILD/tests/fault). Without DELAY the hosts are joined by veths and a
# bridge. Each round runs, at 8 B, 512 B and 32 KiB (AllGather: in all, over
# the ranks):
#   AllReduce  ring | rd (recursive doubling) | rabenseifner | Open MPI
#   Broadcast  chain | tree (binomial) | Open MPI
#   AllGather  ring | bruck
# and, at 1 MiB and 16 MiB, AllReduce ring | auto (what the rules pick).
# Open MPI runs (its tuned collectives; where mpirun and mpi_allreduce_perf
# were built) one rank per namespace too, on the same kind of links. It
# prints the out-of-place time in microseconds; at the end the medians.
# Small AllReduce and Broadcast also run with --start-together 1 ("one call"):
# every call starts at a moment all ranks agreed on, on this machine's one
# clock, and is timed from there to the slowest rank's end (-a 3): one
# call's latency. Back to back, a rooted call's signature check around the
# ring (TIDAL_CHECK_CALLS) keeps Tidal's broadcasts from overlapping one
# another, while MPI_Bcast's root returns as soon as its sends are out, so
# the two modes measure different things (docs/benchmarks.md).
# With more ranks than cores a wait must not keep the core: Tidal's ranks
# sleep at once (TIDAL_BUSY_POLL=0 TIDAL_SPIN_US=0 unless set: a rank alone
# in its namespace would otherwise busy-poll, and yielding ranks take the
# cores from the one whose data has come), Open MPI's ranks yield
# (mpi_yield_when_idle=1, it cannot sleep). Needs root (ip netns). Run it on
# a quiet machine.
set -euo pipefail
build=$(cd "$1" && pwd)
hosts=${2:-8}
rounds=${3:-5}
delay=${4:-}
netns=$(cd "$(dirname "$0")/../../tests/fault" && pwd)/netns_hosts.sh
export NETNS_SWITCH=${NETNS_SWITCH:-$build/tests/fault/netns_delay_switch}
export TIDAL_BUSY_POLL=${TIDAL_BUSY_POLL:-0} TIDAL_SPIN_US=${TIDAL_SPIN_US:-0} NETNS_TIMEOUT=300
small="-b 8 -e 32768 -f 64 -n 100 -w 20"
once="-b 8 -e 32768 -f 64 -n 50 -w 20 --start-together 1 -a 3"
large="-b 1M -e 16M -f 16 -n 10 -w 2"
# run LAUNCH SETTING BINARY SIZES [ARGS...] -> "size:time size:time ..."
# LAUNCH is "" (Tidal's environment) or -M (under mpirun); SETTING a VAR=value.
run() {
  local launch=$1 setting=$2 binary=$3 sizes=$4
  shift 4
  # shellcheck disable=SC2086  # launch and sizes are lists of words
  env "$setting" "$netns" $launch -H "$hosts" -L 1 ${delay:+-d "$delay"} -- \
    "$build/benchmarks/$binary" $sizes "$@" 2>&1 |
    awk '$1 ~ /^[0-9]+$/ && NF > 8 {printf "%s:%s ", $1, $6}'
}
mpi=0
[ -x "$build/benchmarks/mpi_allreduce_perf" ] && command -v mpirun >/dev/null && mpi=1
log=$(mktemp)
for i in $(seq 1 "$rounds"); do
  measure() {  # LABEL, then run's arguments
    local label=$1
    shift
    echo "round $i $label $(run "$@")" | tee -a "$log"
  }
  measure AllReduce,ring "" TIDAL_ALLREDUCE_ALGO=ring all_reduce_perf "$small"
  measure AllReduce,rd "" TIDAL_ALLREDUCE_ALGO=rd all_reduce_perf "$small"
  measure AllReduce,rabenseifner "" TIDAL_ALLREDUCE_ALGO=rabenseifner all_reduce_perf "$small"
  measure Broadcast,chain "" TIDAL_BROADCAST_ALGO=chain broadcast_perf "$small"
  measure Broadcast,tree "" TIDAL_BROADCAST_ALGO=tree broadcast_perf "$small"
  measure AllReduce,ring,once "" TIDAL_ALLREDUCE_ALGO=ring all_reduce_perf "$once"
  measure AllReduce,rd,once "" TIDAL_ALLREDUCE_ALGO=rd all_reduce_perf "$once"
  measure Broadcast,chain,once "" TIDAL_BROADCAST_ALGO=chain broadcast_perf "$once"
  measure Broadcast,tree,once "" TIDAL_BROADCAST_ALGO=tree broadcast_perf "$once"
  measure AllGather,ring "" TIDAL_ALLGATHER_ALGO=ring all_gather_perf "$small"
  measure AllGather,bruck "" TIDAL_ALLGATHER_ALGO=bruck all_gather_perf "$small"
  measure AllReduce,ring "" TIDAL_ALLREDUCE_ALGO=ring all_reduce_perf "$large"
  measure AllReduce,auto "" TIDAL_ALLREDUCE_ALGO=auto all_reduce_perf "$large"
  if [ $mpi = 1 ]; then
    measure AllReduce,OpenMPI -M OMPI_MCA_mpi_yield_when_idle=1 mpi_allreduce_perf "$small"
    measure AllReduce,OpenMPI -M OMPI_MCA_mpi_yield_when_idle=1 mpi_allreduce_perf "$large"
    measure Broadcast,OpenMPI -M OMPI_MCA_mpi_yield_when_idle=1 mpi_allreduce_perf "$small" \
      --collective broadcast
    measure AllReduce,OpenMPI,once -M OMPI_MCA_mpi_yield_when_idle=1 mpi_allreduce_perf "$once"
    measure Broadcast,OpenMPI,once -M OMPI_MCA_mpi_yield_when_idle=1 mpi_allreduce_perf \
      "$once" --collective broadcast
  fi
done
python3 - "$log" <<'PY'
import statistics, sys
times = {}
for line in open(sys.argv[1]):
    words = line.split()
    for pair in words[3:]:
        size, t = pair.split(":")
        times.setdefault((words[2], int(size)), []).append(float(t))
print(f"{'collective,algorithm':28} {'bytes':>9} {'median us':>10} {'min us':>9} runs")
for (cfg, size), ts in sorted(times.items(), key=lambda kv: (kv[0][0].split(",")[0], kv[0][1], kv[0][0])):
    print(f"{cfg:28} {size:9d} {statistics.median(ts):10.1f} {min(ts):9.1f} {len(ts)}")
PY
rm -f "$log"
