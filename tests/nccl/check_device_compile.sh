#!/bin/sh
# Compiles nccl_device_compile.cu with nvcc against Tidal's nccl.h and
# nccl_device.h (ahead of the toolkit's own NCCL headers, as nccl-tests'
# Makefile orders them), links it with -lnccl (Tidal's libnccl.so.2) and runs
# it. Skips (77) where there is no nvcc.
set -eu
nccl_dir=$1 lib_dir=$2 tidal_dir=$3 out=$4
cuda=${CUDA_HOME:-/usr/local/cuda}
nvcc=$cuda/bin/nvcc
[ -x "$nvcc" ] || { echo "SKIPPED: no nvcc at $nvcc"; exit 77; }
here=$(dirname "$0")
# The project's default architectures: sm_80, sm_90 and compute_90 PTX.
"$nvcc" -std=c++17 -gencode=arch=compute_80,code=sm_80 \
  -gencode=arch=compute_90,code=[sm_90,compute_90] -Werror all-warnings \
  -Xcompiler -Wall,-Wextra,-Werror -I"$nccl_dir" "$here/nccl_device_compile.cu" -o "$out" \
  -L"$lib_dir" -lnccl -Xlinker -rpath-link,"$tidal_dir"
objdump -p "$out" | grep -q 'NEEDED *libnccl.so.2' || { echo "FAIL: not linked to libnccl.so.2"; exit 1; }
LD_LIBRARY_PATH="$lib_dir:$tidal_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$out"
