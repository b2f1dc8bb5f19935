#!/usr/bin/env bash
# The GPU check, in one command: builds Tidal with CUDA, runs the GPU tests,
# and prints a short table of the reduction kernels' bandwidth beside a
# device-to-device copy and of all_reduce_perf on device buffers with 2 and
# 4 ranks sharing one GPU (cuda_ipc).
#
#   tests/gpu/run.sh                 build into build-gpu/, logs in build-gpu/gpu-run/
#   BUILD_DIR=out tests/gpu/run.sh   another build directory
#   MAX_BYTES=64M tests/gpu/run.sh   smaller all_reduce_perf sweep (default 256M)
#
# Exit status: 0 when every GPU test passed; 1 when one failed or a step broke;
# 77 when there is no usable GPU: then everything is still built (so CUDA code
# compiles and links) but nothing ran on a GPU, and the script says so.
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD_DIR=${BUILD_DIR:-build-gpu}
MAX_BYTES=${MAX_BYTES:-256M}
LOG_DIR=${LOG_DIR:-$BUILD_DIR/gpu-run}
JOBS=${JOBS:-$(nproc)}

echo "== building Tidal with CUDA into $BUILD_DIR"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIDAL_WITH_CUDA=ON \
  -DTIDAL_WARNINGS_AS_ERRORS=ON ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS"
mkdir -p "$LOG_DIR"

if ! "$BUILD_DIR/tests/gpu/gpu_probe" >"$LOG_DIR/probe.txt" 2>&1; then
  echo
  echo "NO GPU FOUND: $(cat "$LOG_DIR/probe.txt")"
  echo "Everything was built (the CUDA kernels compiled and linked), but no GPU test and no"
  echo "GPU benchmark ran. Run this script on a machine with an NVIDIA GPU."
  exit 77
fi

gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
status=0

echo "== GPU tests (ctest -L gpu)"
if ctest --test-dir "$BUILD_DIR" -L gpu --output-on-failure >"$LOG_DIR/ctest.txt" 2>&1; then
  tests_ok=yes
else
  tests_ok=no
  status=1
fi
tests_line=$(grep -E "tests passed|tests failed" "$LOG_DIR/ctest.txt" | tail -1 || echo "no summary")
# With a GPU present, a GPU test that skips itself (exit 77) did not prove
# anything: ctest counts it as passed, this script does not.
skipped=$(grep -c "(Skipped)" "$LOG_DIR/ctest.txt" || true)
if [ "${skipped:-0}" != 0 ]; then
  tests_ok=no
  status=1
  tests_line="$tests_line; $skipped skipped although a GPU is present"
fi

echo "== reduction kernels vs copy"
"$BUILD_DIR/benchmarks/cuda_reduce_bench" 256 20 >"$LOG_DIR/cuda_reduce_bench.txt" 2>&1 || status=1

for np in 2 4; do
  echo "== all_reduce_perf -W cuda, $np ranks on one GPU"
  TIDAL_TIMEOUT=300 "$BUILD_DIR/tools/tidalrun" --timeout 900 -np "$np" \
    "$BUILD_DIR/benchmarks/all_reduce_perf" -W cuda -b 8 -e "$MAX_BYTES" -f 8 -c 1 -n 20 -w 5 \
    >"$LOG_DIR/all_reduce_perf_np$np.txt" 2>&1 || status=1
done

# The table: the parts of the logs worth reading at a glance.
echo
echo "== Tidal GPU run $(date -u +%Y-%m-%d) on ${gpu_name:-unknown GPU} (driver ${driver:-?}),"
echo "   commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "GPU tests: $tests_line (all passed: $tests_ok; log $LOG_DIR/ctest.txt)"
echo
echo "Reduction kernel bandwidth beside a device-to-device copy (bytes read + written per s):"
grep -v '^#' "$LOG_DIR/cuda_reduce_bench.txt" | sed 's/^/  /' || true
echo
echo "all_reduce_perf -W cuda, float sum, ranks sharing one GPU through cuda_ipc (out of place):"
printf "  %12s %14s %12s %14s %12s %7s\n" "size (B)" "np2 time(us)" "np2 busbw" "np4 time(us)" \
  "np4 busbw" "#wrong"
join -j1 \
  <(awk '!/^#/ && NF >= 13 {print $1, $6, $8, $9}' "$LOG_DIR/all_reduce_perf_np2.txt" | sort -k1,1) \
  <(awk '!/^#/ && NF >= 13 {print $1, $6, $8, $9}' "$LOG_DIR/all_reduce_perf_np4.txt" | sort -k1,1) |
  sort -n -k1,1 |
  awk '{printf "  %12s %14s %12s %14s %12s %7s\n", $1, $2, $3, $5, $6, $4 + $7}'
echo
echo "Raw logs: $LOG_DIR"
exit "$status"
