#!/usr/bin/env bash
# The tuner's model against measurement: for HOSTS namespaced hosts x
# PER_HOST ranks (tests/fault/netns_hosts.sh), runs all_reduce_perf,
# all_gather_perf and broadcast_perf from 8 B to 64 MiB, and beside each
# measured out-of-place time prints the time `tidal-info --tuning` predicts
# for the algorithm the library's rules pick at that size, and measured /
# predicted. The model predicts one call from a common start to its slowest
# rank's end, and every measurement is the slowest rank's (-a 3), timed so
# that it is one call: AllReduce and AllGather back to back, as nccl-tests
# times them (each rank's call waits for every other rank's data, so calls
# cannot overlap; from a common start, 8 ranks on this machine's 2 cores
# all wake at once and queue for the cores), Broadcast with
# --start-together 1 (every call starts at a moment the ranks agreed on, on
# this machine's one clock: back to back, the root starts its next call
# while the last one still travels down the tree).
#   benchmarks/compare/tuner_check.sh BUILD [HOSTS] [PER_HOST] [ROUNDS] [DELAY] [RATE]
# Measured times are the median over ROUNDS runs (default 3). DELAY (e.g.
# 200us) and RATE (e.g. 1gbit) shape every host link (netns_hosts.sh -d and
# -r: netns_delay_switch where the kernel has no netem, built in
# BUILD/tests/fault). Then the model's network costs come from those links,
# as the tuner's opt-in measurement would take them: network_alpha_us is
# the half round trip of 8 bytes between two such hosts (tidal_pingpong),
# network_mb_per_s the rate shared by a host's ranks (RATE / PER_HOST; the
# default, measured on unshaped links, without RATE). Pass a link file with
# TIDAL_TUNER_FILE to check other link costs instead. Needs root; run it on
# a quiet machine.
set -euo pipefail
build=$(cd "$1" && pwd)
hosts=${2:-2}
per_host=${3:-1}
rounds=${4:-3}
delay=${5:-}
rate=${6:-}
nranks=$((hosts * per_host))
netns=$(cd "$(dirname "$0")/../../tests/fault" && pwd)/netns_hosts.sh
export NETNS_SWITCH=${NETNS_SWITCH:-$build/tests/fault/netns_delay_switch} NETNS_TIMEOUT=600
links=(${delay:+-d "$delay"} ${rate:+-r "$rate"})
# Namespaced "hosts" share this machine's cores, but each rank counts only the
# ranks of its own host: with more ranks than cores a wait must not keep the
# core, so the ranks sleep at once (unless the variables are set), as ranks
# with cores of their own would not need to.
if [ "$nranks" -gt "$(nproc)" ]; then
  export TIDAL_BUSY_POLL=${TIDAL_BUSY_POLL:-0} TIDAL_SPIN_US=${TIDAL_SPIN_US:-0}
fi
out=$(mktemp -d)
if [ -z "${TIDAL_TUNER_FILE:-}" ] && [ -n "$delay$rate" ]; then
  alpha=$("$netns" -H 2 -L 1 "${links[@]}" -- "$build/benchmarks/tidal_pingpong" -b 8 -e 8 \
    -n 2000 -w 200 2>&1 | awk '$1 == 8 && NF >= 5 {print $3}')
  printf 'network_alpha_us %s\n' "$alpha" >"$out/links.txt"
  mbps="the default"
  if [ -n "$rate" ]; then
    # The model gives every rank a network link of its own (as on a cluster
    # with a NIC per GPU); a namespaced host's ranks share its one link.
    mbps=$(awk -v r="$rate" -v l="$per_host" 'BEGIN {
      n = r + 0; u = r; sub(/^[0-9.]+/, "", u)
      f = (u == "gbit") ? 1e9 : (u == "mbit") ? 1e6 : (u == "kbit") ? 1e3 : 1
      printf "%.1f\n", n * f / 8e6 / l }')
    printf 'network_mb_per_s %s\n' "$mbps" >>"$out/links.txt"
  fi
  export TIDAL_TUNER_FILE=$out/links.txt
  echo "links: ${delay:-no} delay, ${rate:-no} rate limit: network_alpha_us $alpha (8-byte half round trip), network_mb_per_s $mbps (a rank's share)"
fi
for coll in AllReduce:all_reduce_perf: AllGather:all_gather_perf: \
  "Broadcast:broadcast_perf:--start-together 1"; do
  name=${coll%%:*} rest=${coll#*:}
  binary=${rest%%:*} timing=${rest#*:}
  for _ in $(seq 1 "$rounds"); do
    for sizes in "-b 8 -e 256K -f 8 -n 20 -w 20" "-b 1M -e 64M -f 4 -n 3 -w 1"; do
      # shellcheck disable=SC2086  # sizes and timing are lists of flags
      "$netns" -H "$hosts" -L "$per_host" "${links[@]}" -- "$build/benchmarks/$binary" $sizes \
        $timing -a 3 2>&1 |
        awk '$1 ~ /^[0-9]+$/ && NF > 8 {print $1, $6}' >>"$out/$name.measured"
    done
  done
  "$build/tools/tidal-info" --tuning --nranks "$nranks" --hosts "$hosts" --step-factor 2 \
    --max-bytes 67108864 \
    --collective "$name" >"$out/$name.predicted"
done
python3 - "$out" <<'PY'
import os, statistics, sys
out = sys.argv[1]
print(f"{'collective':13} {'bytes':>9} {'rules pick':>13} {'measured us':>12} {'predicted us':>13} {'ratio':>6}")
for name in ("AllReduce", "AllGather", "Broadcast"):
    measured = {}
    for line in open(os.path.join(out, name + ".measured")):
        size, t = line.split()
        measured.setdefault(int(size), []).append(float(t))
    header = None
    for line in open(os.path.join(out, name + ".predicted")):
        words = line.split()
        if words and words[0] == "bytes":
            header = words[1:-4] + ["model", "rules"]  # candidate names, then the two picks
            continue
        if header is None or not words or not words[0].isdigit():
            continue
        size = int(words[0])
        times = dict(zip(header[:-2], words[1:-2]))
        pick = words[-1]
        if size not in measured or times.get(pick, "-") == "-":
            continue
        m, p = statistics.median(measured[size]), float(times[pick])
        ratio = m / p if p > 0 else float("nan")
        print(f"{name:13} {size:9d} {pick:>13} {m:12.1f} {p:13.1f} {ratio:6.2f}")
PY
rm -rf "$out"
