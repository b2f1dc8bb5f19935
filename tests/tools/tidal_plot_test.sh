#!/bin/bash
# tools/tidal-plot renders a PNG and an SVG from the JSON of a real short
# all_reduce_perf run (2 ranks under tidalrun), and refuses a non-JSON input.
# Usage: tidal_plot_test.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1 build=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$build/tools/tidalrun" -np 2 --timeout 50 "$build/benchmarks/all_reduce_perf" -b 8 -e 64K -f 8 \
  -n 2 -w 1 -J "$dir/run.json" >/dev/null
"$src/tools/tidal-plot" -o "$dir/plot.png" "$dir/run.json"
"$src/tools/tidal-plot" -o "$dir/plot.svg" --place in_place "$dir/run.json"
[[ $(head -c 8 "$dir/plot.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
  { echo "FAIL: plot.png is not a PNG"; exit 1; }
[[ $(stat -c %s "$dir/plot.png") -gt 10000 ]] || { echo "FAIL: plot.png too small"; exit 1; }
grep -q "<svg" "$dir/plot.svg" || { echo "FAIL: plot.svg is not SVG"; exit 1; }
grep -q ">tidal<\|tidal" "$dir/plot.svg" || { echo "FAIL: no legend entry"; exit 1; }
echo '{}' >"$dir/bad.json"
if "$src/tools/tidal-plot" -o "$dir/bad.png" "$dir/bad.json" 2>"$dir/err"; then
  echo "FAIL: accepted a file without results"; exit 1
fi
grep -q "no 'results' list" "$dir/err" || { echo "FAIL: message: $(cat "$dir/err")"; exit 1; }
echo "all checks passed"
