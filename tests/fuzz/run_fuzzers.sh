#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, -fsanitize=fuzzer,address,undefined)
# and runs each for a bounded time, starting from its seed corpus in
# tests/fuzz/corpus/<name> (copied: the repo's corpus is never written).
#   run_fuzzers.sh SRC_DIR OUT_DIR SECONDS [NAME...]
# Exit 0: no finding; 1: a harness crashed, leaked or hit UB (its reproducer
# is in OUT_DIR/NAME/crash-*, rerun with: OUT_DIR/NAME.fuzz CRASH_FILE);
# 77: no clang with libFuzzer here (CTest reports the test as skipped).
set -uo pipefail
src=$1 out=$2 seconds=$3
shift 3
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(fuzz_wire fuzz_unique_id fuzz_ib_protocol fuzz_call_signature)
CXX=${TIDAL_FUZZ_CXX:-clang++}
mkdir -p "$out"

probe="$out/probe.cc"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe"
if ! "$CXX" -fsanitize=fuzzer "$probe" -o "$out/probe" 2>"$out/probe.log"; then
  echo "run_fuzzers: $CXX cannot build libFuzzer programs (install clang and libclang-rt-14-dev): $(tail -1 "$out/probe.log")"
  exit 77
fi

# The parsers and what they need of the library, nothing that does I/O.
common=(src/core/error.cc src/core/socket.cc src/core/secret.cc src/core/params.cc
        src/core/params_table.cc src/core/log.cc src/core/path_pattern.cc src/core/dtype.cc
        src/net/wire.cc)
declare -A extra=(
  [fuzz_wire]="src/net/notice.cc"
  [fuzz_unique_id]="src/bootstrap/unique_id.cc"
  [fuzz_ib_protocol]="transports/ib/protocol.cc"
  [fuzz_call_signature]="src/engine/call_signature.cc"
)
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$src/src" -I"$src/include" -I"$src" $(pkg-config --cflags spdlog fmt))
libs=($(pkg-config --libs spdlog fmt) -ldl)

# The common sources are compiled once, not once per harness (they were most
# of this script's time: 4 x 9 files with spdlog and fmt).
failures=0
objects=()
mkdir -p "$out/common"
for f in "${common[@]}"; do
  obj="$out/common/$(echo "$f" | tr / _).o"
  if ! "$CXX" "${flags[@]}" -c "$src/$f" -o "$obj" 2>"$out/common.build.log"; then
    echo "run_fuzzers: $f: build failed:"; tail -20 "$out/common.build.log"
    exit 1
  fi
  objects+=("$obj")
done
for name in "${names[@]}"; do
  files=("$src/tests/fuzz/$name.cc")
  for f in ${extra[$name]}; do files+=("$src/$f"); done
  bin="$out/$name.fuzz"
  if ! "$CXX" "${flags[@]}" "${files[@]}" "${objects[@]}" "${libs[@]}" -o "$bin" \
      2>"$out/$name.build.log"; then
    echo "run_fuzzers: $name: build failed:"; tail -20 "$out/$name.build.log"
    failures=$((failures + 1)); continue
  fi
  work="$out/$name"
  rm -rf "$work"; mkdir -p "$work/corpus"
  cp "$src/tests/fuzz/corpus/$name/"* "$work/corpus/" 2>/dev/null || true
  (cd "$work" && "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 corpus >"$work/log" 2>&1)
  rc=$?
  runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$work/log" | grep -Eo '[0-9]+$')
  if [[ $rc -ne 0 ]]; then
    echo "run_fuzzers: $name: FINDING after ${runs:-?} executions:"; grep -E 'ERROR|runtime error|SUMMARY' "$work/log" | head -5
    ls "$work"/crash-* "$work"/leak-* 2>/dev/null
    failures=$((failures + 1))
  else
    echo "run_fuzzers: $name: ${runs:-?} executions in ${seconds} s, no finding"
  fi
done
exit $((failures != 0))
