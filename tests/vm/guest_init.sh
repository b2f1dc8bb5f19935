#!/bb/sh
# PID 1 of the test VM: mounts, loads Soft-RoCE, creates rxe0 on a dummy
# interface, runs /tidal/guest_tests.sh, reports and powers off.
export PATH=/usr/bin:/bb HOME=/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm
ulimit -l unlimited
echo "[guest] up after $(cut -d' ' -f1 /proc/uptime) s, $(nproc) CPUs, kernel $(uname -r)"
for m in rdma_rxe ib_uverbs dummy; do modprobe "$m" || echo "[guest] modprobe $m failed"; done
ip link set lo up
if /tidal/guest_add_rxe.sh rxe0 rxed0 10.77.0.1/24; then
  echo "[guest] rxe0 ACTIVE on rxed0 (10.77.0.1) after $(cut -d' ' -f1 /proc/uptime) s"
  /tidal/guest_tests.sh
  rc=$?
else
  echo "[guest] FAIL: rxe0 did not become ACTIVE"
  rc=99
fi
echo "TIDAL_VM_EXIT=$rc"
poweroff -f
