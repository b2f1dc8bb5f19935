#!/usr/bin/env bash
# fails_within.sh SECONDS -- COMMAND ARGS...
# Passes (exit 0) when COMMAND fails by itself (non-zero, not 124 from a
# `timeout` inside it) in under SECONDS; fails when it succeeds, hangs, or
# takes too long. For faults that must end in a clear error, never a hang.
set -uo pipefail
limit=$1
shift
[ "${1:-}" = "--" ] && shift
start=$(date +%s)
out=$(mktemp)
timeout "$((limit + 5))" "$@" >"$out" 2>&1
rc=$?
took=$(($(date +%s) - start))
grep -E "netns_hosts|made no progress|lost|timed out|error" "$out" | head -8
rm -f "$out"
echo "fails_within: exit $rc after $took s (limit $limit s)"
if [ $rc -eq 0 ]; then echo "fails_within: FAIL: it succeeded"; exit 1; fi
if [ $rc -eq 124 ] || [ $took -ge "$limit" ]; then echo "fails_within: FAIL: it hung"; exit 1; fi
exit 0
