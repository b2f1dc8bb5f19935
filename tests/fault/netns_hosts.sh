#!/usr/bin/env bash
# Runs a Tidal job across "hosts" made of network namespaces on this machine.
#
#   netns_hosts.sh [-H hosts] [-L ranks-per-host] [-d delay | -D delay | -n NETEM] [-r rate]
#                  [-l LOSS%] [-o REORDER%] [-f DOWN@AFTER] -- PROGRAM ARGS...
#
# -d adds the delay where the kernel has tc netem and runs without it where
# it does not (this project's development and CI kernels); -D requires it and
# exits 1 without netem (tests/vm runs it so under Debian's kernel). -n gives
# netem a whole impairment ("delay 1ms loss 1% duplicate 1% reorder 25% 50%")
# and, like -D, requires netem. -f takes host 1's link down AFTER seconds
# after the ranks start, for DOWN seconds, then up again (a flapping cable).
#
# -l and -o impair every host link without netem, so they run on the
# development and CI kernels too: -l drops LOSS% of the packets each host
# receives (nftables, numgen random); -o sends REORDER% of those it sends through a slow
# HTB class (20 Mbit/s, a 50 kB queue: at most 20 ms), so they arrive after
# packets sent later: reordered, delayed, and dropped when that queue is
# full. Both need nft (package nftables) and exit 1 without it.
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
LOSS="" REORDER=""
NETEM=""  # the netem arguments: "delay $DELAY" for -d/-D, or -n's
while getopts "H:L:d:D:n:r:l:o:f:" opt; do
  case $opt in
    H) HOSTS=$OPTARG ;;
    L) PER_HOST=$OPTARG ;;
    d) DELAY=$OPTARG ;;
    D) DELAY=$OPTARG NEED_DELAY=1 ;;
    n) NETEM=$OPTARG DELAY=impaired NEED_DELAY=1 ;;
    r) RATE=$OPTARG ;;
    l) LOSS=$OPTARG ;;
    o) REORDER=$OPTARG ;;
    f) FLAP=$OPTARG ;;
    *) echo "usage: $0 [-H hosts] [-L ranks-per-host] [-d delay | -D delay | -n NETEM] [-r rate] [-l LOSS%] [-o REORDER%] [-f DOWN@AFTER] -- PROGRAM ARGS" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
[ $# -ge 1 ] || { echo "$0: no program given" >&2; exit 2; }

if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  echo "netns_hosts: needs root, ip and tc; skipping"; exit 77
fi
if { [ -n "$LOSS" ] || [ -n "$REORDER" ]; } && ! command -v nft >/dev/null; then
  echo "netns_hosts: FAIL: -l and -o need nft (apt-get install nftables)" >&2
  exit 1
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

# impair NS DEV: -l on the packets DEV receives, -o on those it sends. The
# loss is taken on input because a packet dropped on output fails the
# sender's sendto with EPERM, which a lost packet never does (and which
# udp;ofi_rxd never recovers from). HTB takes a packet whose skb priority
# names one of its classes (1:20, set by nft) there directly; every other
# packet goes to the default, unlimited class 1:10.
impair() {
  local ns=$1 dev=$2 rules=""
  if [ -n "$REORDER" ]; then
    [ -z "$DELAY$RATE" ] || { echo "netns_hosts: -o cannot be combined with -d, -D, -n or -r" >&2; return 1; }
    ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: htb default 10 &&
      ip netns exec "$ns" tc class add dev "$dev" parent 1: classid 1:10 htb rate 10gbit &&
      ip netns exec "$ns" tc class add dev "$dev" parent 1: classid 1:20 htb rate 20mbit ceil 20mbit &&
      ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:20 bfifo limit 50000 || return 1
    rules+="    oifname \"$dev\" numgen random mod 100 < $REORDER counter meta priority set 1:20"$'\n'
  fi
  local drop=""
  [ -n "$LOSS" ] && drop="    iifname \"$dev\" numgen random mod 100 < $LOSS counter drop"
  ip netns exec "$ns" nft -f - <<EOF
table inet netns_hosts_impair {
  chain out {
    type filter hook output priority 0; policy accept;
$rules  }
  chain in {
    type filter hook input priority 0; policy accept;
$drop
  }
}
EOF
}

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
  if [ -n "$LOSS" ] || [ -n "$REORDER" ]; then
    impair "$ns" "${TAG}p$h" || { echo "netns_hosts: FAIL: cannot impair host $h's link" >&2; exit 1; }
  fi
done
[ -n "$LOSS$REORDER" ] && echo "netns_hosts: every host drops ${LOSS:-0}% of the packets it receives and reorders ${REORDER:-0}% of those it sends"

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
# impaired NS: "N dropped, M reordered" from the rules' counters.
impaired() {
  ip netns exec "$1" nft list table inet netns_hosts_impair 2>/dev/null | awk '
    /counter/ { for (i = 1; i < NF; i++) if ($i == "packets") n = $(i + 1)
                if (/drop/) d = n; else o = n }
    END { printf "%d dropped, %d reordered", d, o }'
}
for r in "${!pids[@]}"; do
  wait "${pids[$r]}"
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "netns_hosts: FAIL rank $r (host $((r / PER_HOST))) exited with status $rc" >&2
    failed=$((failed + 1))
  fi
done
if [ -n "$LOSS$REORDER" ]; then
  for ((h = 0; h < HOSTS; h++)); do
    queue=$(ip netns exec "${TAG}h$h" tc -s qdisc show dev "${TAG}p$h" 2>/dev/null |
      awk '/^qdisc bfifo/ { b = 1 } b && /dropped/ { sub(",", "", $7); print $7; exit }')
    echo "netns_hosts: host $h: $(impaired "${TAG}h$h") packets${queue:+, $queue more lost when the slow queue was full}"
  done
fi
if [ $failed -ne 0 ]; then
  echo "netns_hosts: $failed of $NRANKS ranks failed" >&2
  exit 1
fi
echo "netns_hosts: all $NRANKS ranks on $HOSTS hosts exited 0"
