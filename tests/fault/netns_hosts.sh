#!/usr/bin/env bash
# Runs a Tidal job across "hosts" made of network namespaces on this machine.
#
#   netns_hosts.sh [-H hosts] [-L ranks-per-host] [-d delay | -D delay | -n NETEM] [-r rate]
#                  [-l LOSS%] [-o REORDER%] [-f DOWN@AFTER] [-S] [-M] -- PROGRAM ARGS...
#
# -d and -D add a one-way delay (tc netem's units: 200us, 1ms) to every
# host link; -r limits every host link's rate (tc's units: 1gbit). Where
# the kernel has tc netem (Debian's, in tests/vm) the hosts are joined by
# veths and a bridge, and netem delays each host's egress. Where it has not
# (this project's development and CI kernels), and with -S anywhere, they
# are joined by netns_delay_switch instead: a user-space switch with a TUN
# device in every namespace that holds each packet for the delay
# (tests/fault/netns_delay_switch.cc; found through $NETNS_SWITCH or in
# build/tests/fault), and limits the rate itself: each host's link full
# duplex at RATE, no burst. On a bridge the rate is tc tbf on each host's
# egress, with a burst of $NETNS_BURST (default 256kb) that an idle link
# sends at once. Without netem and without the switch (or /dev/net/tun), -d
# runs without the delay and says so, -D exits 1 and -S skips (77). -n gives
# netem a whole impairment ("delay 1ms loss 1% duplicate 1% reorder 25%
# 50%") and always requires netem. -f takes host 1's link down AFTER seconds
# after the ranks start, for DOWN seconds, then up again (a flapping cable;
# bridge only).
#
# -l and -o impair every host link without netem, so they run on the
# development and CI kernels too: -l drops LOSS% of the packets each host
# receives (nftables, numgen random); -o sends REORDER% of those it sends through a slow
# HTB class (20 Mbit/s, a 50 kB queue: at most 20 ms), so they arrive after
# packets sent later: reordered, delayed, and dropped when that queue is
# full. Both need nft (package nftables) and exit 1 without it.
#
# Creates H namespaces (tdl-h0 ..), each with a link at 10.231.0.(h+1)/24
# (a veth into a bridge in the root namespace, or a port of the switch), an
# optional delay and rate limit on every host link, and starts L ranks in
# each namespace with TIDAL_COMM_ID,
# TIDAL_RANK, TIDAL_NRANKS, TIDAL_SECRET and a per-namespace TIDAL_HOSTID, so
# ranks inside a host use shared memory and ranks across hosts use TCP over
# the links. -M starts PROGRAM under Open MPI's mpirun instead, from the root
# namespace (at 10.231.0.254), with one orted per host through an rsh agent
# that enters the host's namespace, L slots a host, and the TCP BTL on the
# host links. Exits 1 (naming the ranks) when any rank fails; 77 when
# namespaces cannot be made here (not root, no ip netns), which ctest
# reports as skipped.
set -uo pipefail

HOSTS=2 PER_HOST=2 DELAY="" NEED_DELAY=0 RATE="" FLAP="" TIMEOUT=${NETNS_TIMEOUT:-600}
LOSS="" REORDER="" FORCE_SWITCH=0 MPIRUN=0
NETEM=""  # the netem arguments: "delay $DELAY" for -d/-D, or -n's
while getopts "H:L:d:D:n:r:l:o:f:SM" opt; do
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
    S) FORCE_SWITCH=1 ;;
    M) MPIRUN=1 ;;
    *) echo "usage: $0 [-H hosts] [-L ranks-per-host] [-d delay | -D delay | -n NETEM] [-r rate] [-l LOSS%] [-o REORDER%] [-f DOWN@AFTER] [-S] [-M] -- PROGRAM ARGS" >&2; exit 2 ;;
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
SWITCH_PID=""
WORK=$(mktemp -d)
cleanup() {
  [ -n "$FLAP_PID" ] && kill "$FLAP_PID" 2>/dev/null
  if [ -n "$SWITCH_PID" ]; then
    kill "$SWITCH_PID" 2>/dev/null
    wait "$SWITCH_PID" 2>/dev/null
    cat "$WORK/switch.err"  # what it forwarded, and how late
  fi
  for ((h = 0; h < HOSTS; h++)); do ip netns del "${TAG}h$h" 2>/dev/null; done
  ip link del "$BR" 2>/dev/null
  rm -rf "$WORK"
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

# has_netem: whether this kernel takes a netem qdisc (probed in a scratch namespace).
has_netem() {
  local ns="${TAG}probe" ok=1
  ip netns add "$ns" 2>/dev/null || return 1
  ip netns exec "$ns" tc qdisc add dev lo root netem delay 1ms 2>/dev/null && ok=0
  ip netns del "$ns"
  return $ok
}
# usec DELAY: netem's time units (us, ms, s; none = us) in microseconds.
usec() {
  awk -v d="$1" 'BEGIN {
    if (!match(d, /^[0-9]*\.?[0-9]+/)) exit 1
    n = substr(d, 1, RLENGTH); u = substr(d, RLENGTH + 1)
    f = (u == "" || u == "us" || u == "usec") ? 1 : (u == "ms" || u == "msec") ? 1000 : (u == "s" || u == "sec") ? 1000000 : -1
    if (f < 0) exit 1
    printf "%d\n", n * f + 0.5 }'
}

# How the hosts are joined: a bridge (netem delays, where there is one), or the switch.
SWITCH=""
if [ "$FORCE_SWITCH" = 1 ] || { [ -n "$DELAY" ] && [ -z "$NETEM" ] && ! has_netem; }; then
  [ -z "$NETEM" ] || { echo "netns_hosts: FAIL: -n needs tc netem; the switch (-S) only delays" >&2; exit 1; }
  [ -z "$FLAP" ] || { echo "netns_hosts: FAIL: -f takes a bridge's link down; it cannot be combined with the switch (-S, or -d/-D without netem)" >&2; exit 1; }
  SWITCH=${NETNS_SWITCH:-$(cd "$(dirname "$0")/../.." && pwd)/build/tests/fault/netns_delay_switch}
  missing=""
  [ -x "$SWITCH" ] || missing="no switch at $SWITCH (build netns_delay_switch or set NETNS_SWITCH)"
  [ -c /dev/net/tun ] || missing="no /dev/net/tun for the switch's devices"
  if [ -n "$missing" ]; then
    [ "$FORCE_SWITCH" = 1 ] && { echo "netns_hosts: -S: $missing; skipping"; exit 77; }
    [ "$NEED_DELAY" = 1 ] && { echo "netns_hosts: FAIL: no tc netem here and $missing" >&2; exit 1; }
    echo "netns_hosts: no tc netem in this kernel and $missing; running without the $DELAY delay"
    SWITCH="" DELAY=""
  fi
fi

if [ -n "$SWITCH" ]; then
  DEV="${TAG}s"  # every namespace's port of the switch
  ports=()
  for ((h = 0; h < HOSTS; h++)); do
    ns="${TAG}h$h"
    ip netns add "$ns" || { echo "netns_hosts: ip netns add failed; skipping"; exit 77; }
    ip -n "$ns" link set lo up
    ports+=("$ns=10.231.0.$((h + 1))/24")
  done
  [ "$MPIRUN" = 1 ] && ports+=(".=10.231.0.254/24")
  us=$(usec "${DELAY:-0}") || { echo "netns_hosts: FAIL: cannot read the delay '$DELAY' (use us, ms or s)" >&2; exit 1; }
  "$SWITCH" -d "$us" ${RATE:+-r "$RATE"} -i "$DEV" "${ports[@]}" >"$WORK/switch.out" \
    2>"$WORK/switch.err" &
  SWITCH_PID=$!
  for _ in $(seq 100); do
    grep -q '^ready' "$WORK/switch.out" 2>/dev/null && break
    kill -0 "$SWITCH_PID" 2>/dev/null || break
    sleep 0.1
  done
  if ! grep -q '^ready' "$WORK/switch.out"; then
    echo "netns_hosts: FAIL: the switch did not start: $(cat "$WORK/switch.err")" >&2
    SWITCH_PID=""
    exit 1
  fi
  echo "netns_hosts: hosts joined by netns_delay_switch, $(cat "$WORK/switch.out")"
else
  if ! ip link add "$BR" type bridge 2>/dev/null; then
    echo "netns_hosts: cannot create a bridge here; skipping"; exit 77
  fi
  ip link set "$BR" up
  [ "$MPIRUN" = 1 ] && ip addr add 10.231.0.254/24 dev "$BR"
fi
for ((h = 0; h < HOSTS; h++)); do
  ns="${TAG}h$h"
  if [ -z "$SWITCH" ]; then
    DEV="${TAG}p$h"
    ip netns add "$ns" || { echo "netns_hosts: ip netns add failed; skipping"; exit 77; }
    ip link add "${TAG}v$h" type veth peer name "$DEV"
    ip link set "${TAG}v$h" master "$BR" up
    ip link set "$DEV" netns "$ns"
    ip -n "$ns" addr add "10.231.0.$((h + 1))/24" dev "$DEV"
    ip -n "$ns" link set "$DEV" up
    ip -n "$ns" link set lo up
    if [ -n "$DELAY" ]; then
      [ -n "$NETEM" ] || NETEM="delay $DELAY"
      # shellcheck disable=SC2086  # NETEM is a list of netem arguments
      if ! ip netns exec "$ns" tc qdisc add dev "$DEV" root handle 1: netem $NETEM 2>/dev/null; then
        echo "netns_hosts: FAIL: tc refused netem $NETEM (does this kernel have sch_netem?)" >&2
        exit 1
      fi
    fi
  fi
  if [ -n "$RATE" ] && [ -z "$SWITCH" ]; then  # the switch limits the rate itself
    parent="root"
    [ -n "$DELAY" ] && parent="parent 1:1"  # under netem
    # shellcheck disable=SC2086  # parent is "root" or "parent 1:1", two words
    ip netns exec "$ns" tc qdisc add dev "$DEV" $parent tbf rate "$RATE" burst "${NETNS_BURST:-256kb}" latency 100ms
  fi
  if [ -n "$LOSS" ] || [ -n "$REORDER" ]; then
    impair "$ns" "$DEV" || { echo "netns_hosts: FAIL: cannot impair host $h's link" >&2; exit 1; }
  fi
done
[ -n "$LOSS$REORDER" ] && echo "netns_hosts: every host drops ${LOSS:-0}% of the packets it receives and reorders ${REORDER:-0}% of those it sends"

NRANKS=$((HOSTS * PER_HOST))
pids=()
if [ "$MPIRUN" = 1 ]; then
  # mpirun calls the agent as: agent [ssh options] HOST COMMAND...
  cat >"$WORK/agent" <<AGENT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
exec ip netns exec ${TAG}h\$((\${host##*.} - 1)) sh -c "\$*"
AGENT
  chmod +x "$WORK/agent"
  for ((h = 0; h < HOSTS; h++)); do echo "10.231.0.$((h + 1)) slots=$PER_HOST"; done >"$WORK/hosts"
  timeout "$TIMEOUT" mpirun --allow-run-as-root -np "$NRANKS" --hostfile "$WORK/hosts" \
    --mca plm_rsh_agent "$WORK/agent" --mca pml ob1 --mca btl tcp,self,vader \
    --mca btl_tcp_if_include 10.231.0.0/24 --mca oob_tcp_if_include 10.231.0.0/24 "$@" &
  pids+=($!)
else
  PORT=$((20000 + $$ % 20000))
  SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  for ((r = 0; r < NRANKS; r++)); do
    h=$((r / PER_HOST))
    ip netns exec "${TAG}h$h" env TIDAL_COMM_ID="10.231.0.1:$PORT" TIDAL_RANK=$r TIDAL_NRANKS=$NRANKS \
      TIDAL_SECRET="$SECRET" TIDAL_HOSTID="netns-host-$h" timeout "$TIMEOUT" "$@" &
    pids+=($!)
  done
fi
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
    if [ "$MPIRUN" = 1 ]; then
      echo "netns_hosts: FAIL mpirun exited with status $rc" >&2
    else
      echo "netns_hosts: FAIL rank $r (host $((r / PER_HOST))) exited with status $rc" >&2
    fi
    failed=$((failed + 1))
  fi
done
if [ -n "$LOSS$REORDER" ]; then
  for ((h = 0; h < HOSTS; h++)); do
    dev="${TAG}p$h"
    [ -n "$SWITCH" ] && dev="${TAG}s"
    queue=$(ip netns exec "${TAG}h$h" tc -s qdisc show dev "$dev" 2>/dev/null |
      awk '/^qdisc bfifo/ { b = 1 } b && /dropped/ { sub(",", "", $7); print $7; exit }')
    echo "netns_hosts: host $h: $(impaired "${TAG}h$h") packets${queue:+, $queue more lost when the slow queue was full}"
  done
fi
if [ $failed -ne 0 ]; then
  echo "netns_hosts: $failed of $NRANKS ranks failed" >&2
  exit 1
fi
echo "netns_hosts: all $NRANKS ranks on $HOSTS hosts exited 0"
