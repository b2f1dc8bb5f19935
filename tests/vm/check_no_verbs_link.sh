#!/bin/sh
# libtidal must load where rdma-core is absent: it dlopens libibverbs and so
# must neither need it (NEEDED) nor leave an ibv_* symbol for the loader.
lib=${1:?usage: check_no_verbs_link.sh LIBTIDAL}
command -v readelf >/dev/null && command -v nm >/dev/null || { echo "SKIP: no binutils"; exit 77; }
if readelf -d "$lib" | grep -q 'NEEDED.*libibverbs'; then
  echo "FAIL: $lib links libibverbs:"; readelf -d "$lib" | grep NEEDED; exit 1
fi
if nm -D --undefined-only "$lib" | grep -E ' (ibv_|__ibv_|_ibv_)'; then
  echo "FAIL: $lib leaves the verbs symbols above to the loader"; exit 1
fi
echo "OK: $lib neither needs libibverbs nor any ibv_ symbol"
