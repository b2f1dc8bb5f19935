#!/bin/bash
# tools/tidal-plot renders a PNG and an SVG from a real short all_reduce_perf
# run (2 ranks under tidalrun), reads the same run's text table to the same
# series as its JSON, reads Open MPI's peer program's table (when built) with
# its "# Peer:" label, and refuses inputs without results.
# Usage: tidal_plot_test.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1 build=$2
plot=$src/tools/tidal-plot
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$build/tools/tidalrun" -np 2 --timeout 50 "$build/benchmarks/all_reduce_perf" -b 8 -e 64K -f 8 \
  -n 2 -w 1 -J "$dir/run.json" >"$dir/run.txt"
"$plot" -o "$dir/plot.png" "$dir/run.json"
"$plot" -o "$dir/plot.svg" --place in_place "$dir/run.json"
[[ $(head -c 8 "$dir/plot.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
  { echo "FAIL: plot.png is not a PNG"; exit 1; }
[[ $(stat -c %s "$dir/plot.png") -gt 10000 ]] || { echo "FAIL: plot.png too small"; exit 1; }
grep -q "<svg" "$dir/plot.svg" || { echo "FAIL: plot.svg is not SVG"; exit 1; }
grep -q ">tidal<\|tidal" "$dir/plot.svg" || { echo "FAIL: no legend entry"; exit 1; }

# The text table and the JSON of one run: the same sizes, times equal to the
# table's rounding, labelled by the version line / the LABEL= prefix.
"$plot" --print -o "$dir/both.png" "$dir/run.json" "$dir/run.txt" "mine=$dir/run.txt" >"$dir/series"
/usr/bin/python3 - "$dir/series" <<'PY'
import sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
by = {}
for label, size, t, bw in rows:
    by.setdefault(label, []).append((int(size), float(t), float(bw)))
assert set(by) == {"tidal", "Tidal", "mine"}, f"labels {sorted(by)}"
js, tx = by["tidal"], by["Tidal"]
assert [s for s, _, _ in js] == [8, 64, 512, 4096, 32768], f"JSON sizes {js}"
assert [s for s, _, _ in tx] == [s for s, _, _ in js], f"text sizes {tx} vs JSON {js}"
for (s, a, _), (_, b, _) in zip(js, tx):
    assert abs(a - b) <= max(0.006, 0.001 * a), f"size {s}: JSON time {a} vs text {b}"
assert by["mine"] == tx
print("text and JSON agree on", len(js), "sizes")
PY

mpi=$build/benchmarks/mpi_allreduce_perf
if [[ -x $mpi ]] && command -v mpirun >/dev/null; then
  timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none --mca btl self,vader \
    "$mpi" -b 8 -e 4K -f 8 -n 2 -w 1 >"$dir/mpi.txt"
  "$plot" --print -o "$dir/peers.svg" "$dir/run.json" "$dir/mpi.txt" >"$dir/peer_series"
  grep -q "^MPI" "$dir/peer_series" || grep -q "^Open MPI" "$dir/peer_series" ||
    { echo "FAIL: no MPI series: $(cut -f1 "$dir/peer_series" | sort -u)"; exit 1; }
  [[ $(grep -vc "^tidal" "$dir/peer_series") == 4 ]] ||
    { echo "FAIL: MPI rows: $(cat "$dir/peer_series")"; exit 1; }
else
  echo "MPI peer part skipped: $mpi not built or no mpirun"
fi

echo '{}' >"$dir/bad.json"
if "$plot" -o "$dir/bad.png" "$dir/bad.json" 2>"$dir/err"; then
  echo "FAIL: accepted a file without results"; exit 1
fi
grep -q "no 'results' list" "$dir/err" || { echo "FAIL: message: $(cat "$dir/err")"; exit 1; }
echo "just words" >"$dir/bad.txt"
if "$plot" -o "$dir/bad.png" "$dir/bad.txt" 2>"$dir/err"; then
  echo "FAIL: accepted a text without a table"; exit 1
fi
grep -q "nccl-tests table" "$dir/err" || { echo "FAIL: message: $(cat "$dir/err")"; exit 1; }
echo "all checks passed"
