#!/bin/bash
# A user's view of an install: `cmake --install` into a fresh prefix, then
# examples/minimal.c built with `pkg-config --cflags --libs tidal` and with
# find_package(tidal), both run on 2 ranks by the installed tidalrun, and the
# installed all_reduce_perf run as one rank.
# Usage: install_consumers.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1 build=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
prefix=$dir/prefix
cmake --install "$build" --prefix "$prefix" >"$dir/install.log"
pc=$(find "$prefix" -name tidal.pc | head -n 1)
[[ -n $pc ]] || { echo "FAIL: no tidal.pc installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
flags=$(pkg-config --cflags --libs tidal)
echo "pkg-config: $flags"
libdir=$(pkg-config --variable=libdir tidal)
cc -o "$dir/minimal_pc" "$src/examples/minimal.c" $flags -Wl,-rpath,"$libdir"
"$prefix/bin/tidalrun" -np 2 --timeout 50 "$dir/minimal_pc"

mkdir -p "$dir/fp"
cat >"$dir/fp/CMakeLists.txt" <<CML
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(tidal REQUIRED)
add_executable(minimal_fp $src/examples/minimal.c)
target_link_libraries(minimal_fp PRIVATE tidal::tidal)
CML
cmake -S "$dir/fp" -B "$dir/fp/build" -DCMAKE_PREFIX_PATH="$prefix" >"$dir/fp.log"
cmake --build "$dir/fp/build" >>"$dir/fp.log"
"$prefix/bin/tidalrun" -np 2 --timeout 50 "$dir/fp/build/minimal_fp"

"$prefix/bin/all_reduce_perf" -b 8 -e 64 -f 2 -n 1 -w 0 | grep -q "^# Out of bounds values : 0 OK$"
echo "all checks passed"
