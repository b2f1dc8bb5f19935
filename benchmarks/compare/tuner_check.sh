#!/usr/bin/env bash
# The tuner's model against measurement: for HOSTS namespaced hosts x
# PER_HOST ranks (tests/fault/netns_hosts.sh), runs all_reduce_perf,
# all_gather_perf and broadcast_perf from 8 B to 16 MiB (factors of 8), and
# beside each measured out-of-place time prints the time `tidal-info
# --tuning` predicts for the algorithm the library's rules pick at that size,
# and measured / predicted.
#   benchmarks/compare/tuner_check.sh BUILD [HOSTS] [PER_HOST] [ROUNDS]
# Measured times are the median over ROUNDS runs (default 3). Pass a link
# file with TIDAL_TUNER_FILE to check other link costs. Needs root; run it on
# a quiet machine.
set -euo pipefail
build=$(cd "$1" && pwd)
hosts=${2:-2}
per_host=${3:-1}
rounds=${4:-3}
nranks=$((hosts * per_host))
netns=$(cd "$(dirname "$0")/../../tests/fault" && pwd)/netns_hosts.sh
# Namespaced "hosts" share this machine's cores, but each rank counts only the
# ranks of its own host: with more ranks than cores every wait must yield.
[ "$nranks" -gt "$(nproc)" ] && export TIDAL_BUSY_POLL=0
out=$(mktemp -d)
for coll in AllReduce:all_reduce_perf AllGather:all_gather_perf Broadcast:broadcast_perf; do
  name=${coll%%:*} binary=${coll#*:}
  for i in $(seq 1 "$rounds"); do
    NETNS_TIMEOUT=300 "$netns" -H "$hosts" -L "$per_host" -- "$build/benchmarks/$binary" -b 8 \
      -e 16M -f 8 -n 20 -w 5 2>&1 | awk '$1 ~ /^[0-9]+$/ && NF > 8 {print $1, $6}' \
      >>"$out/$name.measured"
  done
  "$build/tools/tidal-info" --tuning --nranks "$nranks" --hosts "$hosts" --max-bytes 16777216 \
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
