#!/bin/sh
# The drop-in's ABI: SONAME libnccl.so.2, every host call of nccl.h and
# nccl_device.h exported, and a program linked with -lnccl that without
# LD_LIBRARY_PATH cannot find the library (so the nccl_dropin test proves
# LD_LIBRARY_PATH alone suffices).
set -eu
lib=$1 prog=$2
fail() { echo "FAIL: $*"; exit 1; }
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
[ "$soname" = libnccl.so.2 ] || fail "SONAME is '$soname', not libnccl.so.2"
header=$(dirname "$0")/../../nccl/nccl.h
calls=$(grep -o '^[a-zA-Z_ *]*nccl[A-Za-z]*(' "$header" | grep -o 'nccl[A-Za-z]*(' | tr -d '(' | sort -u)
[ -n "$calls" ] || fail "no calls found in $header"
# nccl_device.h's host calls (its device calls are inline, never exported).
device_header=$(dirname "$0")/../../nccl/nccl_device.h
device_calls=$(grep -oE '^(ncclResult_t|ncclTeam_t) nccl[A-Za-z]*\(' "$device_header" |
  grep -o 'nccl[A-Za-z]*(' | tr -d '(' | sort -u)
[ "$(echo "$device_calls" | wc -l)" -ge 6 ] || fail "host calls of $device_header not found"
calls="$calls
$device_calls"
exported=$(nm -D --defined-only "$lib" | awk '{print $3}')
for c in $calls; do
  echo "$exported" | grep -qx "$c" || fail "$c is declared in nccl.h or nccl_device.h but not exported"
done
extra=$(echo "$exported" | grep -v '^nccl' | grep -v '^_' || true)
[ -z "$extra" ] || fail "exports beyond NCCL's names: $extra"
objdump -p "$prog" | grep -q 'NEEDED *libnccl.so.2' || fail "$prog does not need libnccl.so.2"
if objdump -p "$prog" | grep -qE 'R(UN)?PATH'; then fail "$prog has an RPATH"; fi
echo "PASS: $(echo "$calls" | wc -l) calls exported, SONAME $soname"
