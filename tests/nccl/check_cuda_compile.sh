#!/bin/sh
# Compiles and links nccl-tests-style code (cuda_runtime.h, then nccl.h) with
# the host C++ compiler against Tidal's nccl.h and libnccl.so.2. Skips (77)
# where there is no CUDA toolkit.
set -eu
cxx=$1 nccl_dir=$2 lib_dir=$3 tidal_dir=$4 out=$5
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -f "$cuda/include/cuda_runtime.h" ] || { echo "SKIPPED: no CUDA toolkit at $cuda"; exit 77; }
here=$(dirname "$0")
"$cxx" -std=c++17 -Wall -Wextra -Werror -I"$nccl_dir" -I"$cuda/include" \
  "$here/nccl_cuda_compile.cc" -o "$out" -L"$lib_dir" -lnccl -L"$cuda/lib64" -lcudart \
  -Wl,-rpath-link,"$tidal_dir"
objdump -p "$out" | grep -q 'NEEDED *libnccl.so.2' || { echo "FAIL: not linked to libnccl.so.2"; exit 1; }
echo "PASS: nccl-tests-style CUDA code compiles and links against Tidal's nccl.h"
