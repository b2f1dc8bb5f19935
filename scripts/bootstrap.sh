#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and builds Tidal into ./build.
#   scripts/bootstrap.sh            install packages (as root, or with sudo), configure, build
#   BUILD_DIR=out scripts/bootstrap.sh
# Extra CMake arguments may be passed in CMAKE_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
PACKAGES=(
  build-essential cmake pkg-config git
  libspdlog-dev libfmt-dev libcli11-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  openmpi-bin libopenmpi-dev libpmix-dev openssh-client
  libgloo-dev
  iproute2 procps clang-format
  # Packet loss and reordering on the namespaced hosts' links (tests/fault:
  # nft drops and reprioritises packets; the kernels here have no netem).
  nftables
  # The libFuzzer harnesses (tests/fuzz): clang with its fuzzer runtime.
  clang libclang-rt-14-dev
  # The ib transport (verbs headers; libibverbs is dlopened at run time) and
  # its Soft-RoCE VM test: Debian's kernel with rdma_rxe booted in QEMU.
  libibverbs-dev ibverbs-providers ibverbs-utils rdma-core
  # The ofi transport (libfabric headers; libfabric.so.1 is dlopened at run
  # time) and fi_info for its tests and logs.
  libfabric-dev libfabric-bin
  qemu-system-x86 linux-image-amd64 busybox-static kmod cpio xz-utils
  # tools/tidal-plot and its test.
  python3-matplotlib
  # The Slurm test (one-node slurmctld/slurmd, srun --mpi=pmix) and the
  # Kubernetes manifests' test (YAML parsing, kubectl --dry-run=client where
  # a kubectl is present; Debian's kubernetes-client is not installed because
  # it conflicts with the kubectl package some images carry).
  slurm-wlm munge python3-yaml
  # The torch.distributed backend (python/, tests/torch): Debian's CPU
  # PyTorch 1.13, its C++ headers and pybind11, pytest, and an optimised BLAS
  # for the DDP benchmark.
  python3-torch libtorch-dev pybind11-dev python3-pytest libopenblas0-pthread
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "bootstrap: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j"$(nproc)"
