#!/bin/bash
# The lines of nccl-tests 2.19/2.20 output that users' scripts read, the -J
# JSON file, and the exit codes of the perf binaries (docs/benchmarks.md):
# run all_reduce_perf for real as one rank and check each.
# Usage: nccl_tests_output.sh BUILD_DIR
set -u
bin=$1/benchmarks/all_reduce_perf
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$bin" -b 8 -e 1K -f 4 -n 2 -w 1 -J "$dir/out.json" >"$dir/out.txt" 2>"$dir/err.txt"
rc=$?
[[ $rc == 0 ]] || fail "all_reduce_perf exited $rc: $(cat "$dir/err.txt")"
cat "$dir/out.txt"
for pattern in \
  '^# Writing JSON output to ' \
  '^# nccl-tests version 2\.20\.0 \(Tidal [0-9.]+\) nccl-headers=[0-9]+ nccl-library=[0-9]+$' \
  '^# Collective test starting: all_reduce_perf$' \
  '^# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 4\(factor\) warmup iters: 1 iters: 2 agg iters: 1 validation: 1 graph: 0 unalign: 0$' \
  '^# Using devices$' \
  '^#  Rank  0 Group  0 Pid +[0-9]+ on +[^ ]+ device  0 \[0000:00:00\] host memory$' \
  '^#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong $' \
  '^#        \(B\)    \(elements\)                               \(us\)  \(GB/s\)  \(GB/s\)             \(us\)  \(GB/s\)  \(GB/s\) +$' \
  '^ +512 +128 +float +sum +-1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0$' \
  '^# Out of bounds values : 0 OK$' \
  '^# Avg bus bandwidth    : [0-9.e+-]+ $' \
  '^# Collective test concluded: all_reduce_perf$'; do
  grep -Eq -- "$pattern" "$dir/out.txt" || fail "no line matching: $pattern"
done
python3 - "$dir/out.json" <<'PY' || fail "JSON check"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["version"] == 3, doc["version"]
assert doc["config"]["minimum_bytes"] == 8 and doc["config"]["maximum_bytes"] == 1024
assert doc["config"]["devices"][0]["rank"] == 0
sizes = [r["size"] for r in doc["results"]]
assert sizes == [8, 32, 128, 512], sizes
for r in doc["results"]:
    for place in ("out_of_place", "in_place"):
        assert r[place]["time"] > 0 and r[place]["nwrong"] == 0, r
assert doc["out_of_bounds"] == {"count": 0, "okay": "true"}, doc["out_of_bounds"]
assert doc["average_bus_bandwidth"]["bandwidth"] >= 0
PY
# A second run never overwrites the first file.
"$bin" -b 8 -e 8 -n 1 -w 0 -J "$dir/out.json" >/dev/null 2>&1 || fail "second -J run failed"
[[ -s $dir/out.json.0 ]] || fail "second -J run did not write out.json.0"

# Exit codes: 2 for a bad flag or value, as tidal-info and tidalrun.
expect() {
  local want=$1; shift
  "$@" >"$dir/x.out" 2>&1
  local got=$?
  [[ $got == "$want" ]] || fail "exit $got, want $want: $* ($(head -c 300 "$dir/x.out"))"
}
expect 2 "$bin" --no-such-flag
expect 2 "$bin" -d notatype
expect 2 "$bin" -b 2K -e 1K
expect 2 "$bin" -R 1
grep -q "not supported in Tidal" "$dir/x.out" || fail "-R 1 does not say 'not supported in Tidal'"
expect 2 "$bin" -b 8 -e 8 --start-together 1 -z 1
grep -q "cannot be combined with -z 1" "$dir/x.out" || fail "--start-together with -z: $(cat "$dir/x.out")"
# One call at a time from an agreed start: its own banner line, times > 0, results checked.
expect 0 "$bin" -b 8 -e 1K -f 4 -n 3 -w 1 --start-together 1
grep -q "^# Start Together Enabled: " "$dir/x.out" || fail "no Start Together line"
grep -Eq '^ +512 +128 +float +sum +-1 +[0-9.]*[1-9][0-9.]* +[0-9.]+ +[0-9.]+ +0 ' "$dir/x.out" ||
  fail "--start-together: no 512-byte row with a time: $(cat "$dir/x.out")"
expect 2 "$1/tools/tidal-info" --no-such-flag
expect 2 "$1/tools/tidalrun" --no-such-flag
# Bad logging variables are refused at init with the variable, value and what is accepted.
expect 2 env TIDAL_DEBUG=bogus "$bin" -b 8 -e 8 -n 1 -w 0
grep -q "TIDAL_DEBUG='bogus' (from environment) is not one of NONE, VERSION, WARN, INFO, TRACE" \
  "$dir/x.out" || fail "TIDAL_DEBUG=bogus message: $(cat "$dir/x.out")"
expect 2 env TIDAL_DEBUG_SUBSYS=INIT,FOO "$bin" -b 8 -e 8 -n 1 -w 0
grep -q "TIDAL_DEBUG_SUBSYS='INIT,FOO' (from environment): 'FOO' is not a subsystem" \
  "$dir/x.out" || fail "TIDAL_DEBUG_SUBSYS=FOO message: $(cat "$dir/x.out")"
# The version line is labelled VERSION, not warning.
expect 0 env TIDAL_DEBUG=VERSION "$bin" -b 8 -e 8 -n 1 -w 0
grep -Eq "TIDAL VERSION Tidal version [0-9.]+ " "$dir/x.out" || fail "no VERSION line"
grep -q "warning Tidal version" "$dir/x.out" && fail "version line labelled warning"
# Every other line keeps its own level's label (they once all said VERSION).
expect 0 env TIDAL_DEBUG=INFO "$bin" -b 8 -e 8 -n 1 -w 0
grep -Eq "TIDAL INFO \[INIT\] rank 0" "$dir/x.out" || fail "no INFO line labelled INFO"
grep -E "TIDAL VERSION" "$dir/x.out" | grep -qv "Tidal version" && fail "a non-version line labelled VERSION"

[[ $failures == 0 ]] && echo "all checks passed"
exit $((failures != 0))
