#!/usr/bin/env bash
# A/B of small-call latency between two builds of libtidal, interleaved so
# that a noisy machine treats both alike: each round runs the 8-byte Send/Recv
# ping-pong (before, after, Open MPI) and the 8-byte AllReduce (before and
# after, TIDAL_CHECK_CALLS=0 and 1). The benchmark binaries come from the
# `after` build; the `before` library is swapped in with LD_LIBRARY_PATH.
#   benchmarks/compare/ab_small_calls.sh BEFORE_BUILD AFTER_BUILD [ROUNDS]
# Prints one line per round and the medians. Run it on a quiet machine.
set -euo pipefail
before=$(cd "$1" && pwd)
after=$(cd "$2" && pwd)
rounds=${3:-10}
cd "$after"
pingpong() {
  LD_LIBRARY_PATH=$1 tools/tidalrun -np 2 benchmarks/tidal_pingpong -b 8 -e 8 -n 100000 -w 5000 \
    -c 1 2>&1 | awk '$1=="8"{print $3}'
}
allreduce() {
  TIDAL_CHECK_CALLS=$2 LD_LIBRARY_PATH=$1 tools/tidalrun -np 2 benchmarks/all_reduce_perf -b 8 \
    -e 8 -n 100000 -w 5000 2>&1 | awk '$1=="8"{print $6}'
}
mpi() {
  mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none --mca pml ob1 \
    --mca btl vader,self benchmarks/mpi_pingpong -b 8 -e 8 -n 100000 -w 5000 -c 1 2>&1 |
    awk '$1=="8"{print $3}'
}
log=$(mktemp)
for i in $(seq 1 "$rounds"); do
  line="pp_before $(pingpong "$before") pp_after $(pingpong "$after") pp_mpi $(mpi)"
  line+=" ar_before_unchecked $(allreduce "$before" 0) ar_before_checked $(allreduce "$before" 1)"
  line+=" ar_after_unchecked $(allreduce "$after" 0) ar_after_checked $(allreduce "$after" 1)"
  echo "round $i: $line" | tee -a "$log"
done
python3 - "$log" <<'PY'
import statistics, sys
cols = {}
for line in open(sys.argv[1]):
    words = line.split(":", 1)[1].split()
    for name, value in zip(words[::2], words[1::2]):
        cols.setdefault(name, []).append(float(value))
for name, values in cols.items():
    print(f"{name:22s} median {statistics.median(values):.3f} us  range {min(values):.2f}-{max(values):.2f}")
PY
rm -f "$log"
