#!/usr/bin/env bash
# Runs a Tidal job across "hosts" made of network namespaces on this machine.
#
#   netns_hosts.sh [-H hosts] [-L ranks-per-host] [-d delay | -D delay | -n NETEM] [-r rate]
#                  [-f DOWN@AFTER] -- PROGRAM ARGS...
#
# -d adds the delay where the kernel has tc netem and runs without it where
# it does not (this project's development and CI kernels); -D requires it and
# exits 1 without netem (tests/vm runs it so under Debian's kernel). -n gives
# netem a whole impairment ("delay 1ms loss 1% duplicate 1% reorder 25% 50%")
# and, like -D, requires netem. -f takes host 1's link down AFTER seconds
# after the ranks start, for DOWN seconds, then up again (a flapping cable).
#
# Creates H namespaces (tdl-h0 ..), each with a veth into a bridge in the
# root namespace at 10.231.0.(h+1)/24, an optional delay (tc netem, where
# the kernel has it) and rate limit (tc tbf) on every host link, and starts L ranks in each namespace with TIDAL_COMM_ID,
# TIDAL_RANK, TIDAL_NRANKS, TIDAL_SECRET and a per-namespace TIDAL_HOSTID, so
# ranks inside a host use shared memory and ranks across hosts use TCP over
# the veths. Exits 1 (naming the ranks) when any rank fails; 77 when namespaces
# cannot be made here (not root, no ip netns), which ctest reports as skipped.
set -uo pipefail

HOSTS=2 PER_HOST=2 DELAY="" NEED_DELAY=0 RATE="" FLAP="" TIMEOUT=${NETNS_TIMEOUT:-600}
NETEM=""  # the netem arguments: "delay $DELAY" for -d/-D, or -n's
while getopts "H:L:d:D:n:r:f:" opt; do
  case $opt in
    H) HOSTS=$OPTARG ;;
    L) PER_HOST=$OPTARG ;;
    d) DELAY=$OPTARG ;;
    D) DELAY=$OPTARG NEED_DELAY=1 ;;
    n) NETEM=$OPTARG DELAY=impaired NEED_DELAY=1 ;;
    r) RATE=$OPTARG ;;
    f) FLAP=$OPTARG ;;
    *) echo "usage: $0 [-H hosts] [-L ranks-per-host] [-d delay | -D delay | -n NETEM] [-r rate] [-f DOWN@AFTER] -- PROGRAM ARGS" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
[ $# -ge 1 ] || { echo "$0: no program given" >&2; exit 2; }

if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  echo "netns_hosts: needs root, ip and tc; skipping"; exit 77
fi

TAG="tdl$$"
BR="${TAG}br"
FLAP_PID=""
cleanup() {
  [ -n "$FLAP_PID" ] && kill "$FLAP_PID" 2>/dev/null
  for ((h = 0; h < HOSTS; h++)); do ip netns del "${TAG}h$h" 2>/dev/null; done
  ip link del "$BR" 2>/dev/null
}
trap cleanup EXIT

if ! ip link add "$BR" type bridge 2>/dev/null; then
  echo "netns_hosts: cannot create a bridge here; skipping"; exit 77
fi
ip link set "$BR" up
for ((h = 0; h < HOSTS; h++)); do
  ns="${TAG}h$h"
  ip netns add "$ns" || { echo "netns_hosts: ip netns add failed; skipping"; exit 77; }
  ip link add "${TAG}v$h" type veth peer name "${TAG}p$h"
  ip link set "${TAG}v$h" master "$BR" up
  ip link set "${TAG}p$h" netns "$ns"
  ip -n "$ns" addr add "10.231.0.$((h + 1))/24" dev "${TAG}p$h"
  ip -n "$ns" link set "${TAG}p$h" up
  ip -n "$ns" link set lo up
  # Delay needs netem; some kernels (this project's development and CI
  # machines among them) are built without sch_netem, and then -d runs
  # without the delay; tests/vm runs this script with -D under Debian's
  # kernel, which has it. Rate limiting uses tbf, which is always there.
  if [ -n "$DELAY" ]; then
    [ -n "$NETEM" ] || NETEM="delay $DELAY"
    # shellcheck disable=SC2086  # NETEM is a list of netem arguments
    if ! ip netns exec "$ns" tc qdisc add dev "${TAG}p$h" root handle 1: netem $NETEM 2>/dev/null; then
      if [ "$NEED_DELAY" = 1 ]; then
        echo "netns_hosts: FAIL: netem $NETEM needs tc netem, which this kernel lacks" >&2
        exit 1
      fi
      [ $h -eq 0 ] && echo "netns_hosts: no tc netem in this kernel; running without the $DELAY delay"
      DELAY=""
    fi
  fi
  if [ -n "$RATE" ]; then
    parent="root"
    [ -n "$DELAY" ] && parent="parent 1:1"
    ip netns exec "$ns" tc qdisc add dev "${TAG}p$h" $parent tbf rate "$RATE" burst 256kb latency 100ms
  fi
done

NRANKS=$((HOSTS * PER_HOST))
PORT=$((20000 + $$ % 20000))
SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
pids=()
for ((r = 0; r < NRANKS; r++)); do
  h=$((r / PER_HOST))
  ip netns exec "${TAG}h$h" env TIDAL_COMM_ID="10.231.0.1:$PORT" TIDAL_RANK=$r TIDAL_NRANKS=$NRANKS \
    TIDAL_SECRET="$SECRET" TIDAL_HOSTID="netns-host-$h" timeout "$TIMEOUT" "$@" &
  pids+=($!)
done
if [ -n "$FLAP" ] && [ "$HOSTS" -ge 2 ]; then
  (
    sleep "${FLAP#*@}"
    echo "netns_hosts: host 1's link down for ${FLAP%@*} s"
    ip link set "${TAG}v1" down
    sleep "${FLAP%@*}"
    ip link set "${TAG}v1" up
    echo "netns_hosts: host 1's link up again"
  ) &
  FLAP_PID=$!
fi
failed=0
for r in "${!pids[@]}"; do
  wait "${pids[$r]}"
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "netns_hosts: FAIL rank $r (host $((r / PER_HOST))) exited with status $rc" >&2
    failed=$((failed + 1))
  fi
done
if [ $failed -ne 0 ]; then
  echo "netns_hosts: $failed of $NRANKS ranks failed" >&2
  exit 1
fi
echo "netns_hosts: all $NRANKS ranks on $HOSTS hosts exited 0"
