#!/usr/bin/env bash
# Decides how QEMU runs the test VM: KVM where it really runs a guest, else
# software emulation (TCG). Prints the choice, `kvm` or `tcg`, alone on
# stdout; says which one and why on stderr as "[vm] accelerator: ...".
#
#   choose_accel.sh KERNEL WORK_DIR
#
# Why a probe: /dev/kvm can exist and open read-write on a host that cannot
# run a guest (nested virtualisation without the CPU features, say). There
# QEMU does not fall back to TCG: it aborts on the first vCPU setup
# ("kvm_buf_set_msrs: Assertion ... failed"), even with `-accel kvm -accel tcg`.
# So in auto mode we boot the same kernel once under KVM with an init that only
# prints a marker and powers off, bounded by a few seconds, and use KVM only
# when the marker appears. The probe uses the same QEMU flags as the real run
# (-accel kvm -cpu max), so what it proves is what the run needs.
#
# Variables:
#   TIDAL_VM_ACCEL=auto|kvm|tcg    auto (default) probes; kvm / tcg force the choice.
#   TIDAL_VM_KVM_PROBE_TIMEOUT=S   bound of the probe boot in seconds (default 10; a
#                                  working KVM reaches init in 1-3 s).
#   TIDAL_VM_KVM_DEVICE=PATH       the KVM device looked at (default /dev/kvm; tests).
#   TIDAL_VM_QEMU=PROGRAM          the QEMU binary (default qemu-system-x86_64; tests).
# Exit status: 0 with a choice printed; 2 on a bad TIDAL_VM_ACCEL or missing tool.
set -uo pipefail

KERNEL=${1:?usage: choose_accel.sh KERNEL WORK_DIR}
WORK=${2:?usage: choose_accel.sh KERNEL WORK_DIR}
MODE=${TIDAL_VM_ACCEL:-auto}
TIMEOUT=${TIDAL_VM_KVM_PROBE_TIMEOUT:-10}
KVM_DEVICE=${TIDAL_VM_KVM_DEVICE:-/dev/kvm}
QEMU=${TIDAL_VM_QEMU:-qemu-system-x86_64}

choose() {  # choose ACCEL REASON
  echo "[vm] accelerator: $1 ($2)" >&2
  echo "$1"
  exit 0
}

case "$MODE" in
  kvm) choose kvm "forced by TIDAL_VM_ACCEL=kvm, no probe" ;;
  tcg) choose tcg "forced by TIDAL_VM_ACCEL=tcg, no probe" ;;
  auto) ;;
  *)
    echo "[vm] TIDAL_VM_ACCEL='$MODE' is not one of auto, kvm, tcg" >&2
    exit 2
    ;;
esac
case "$TIMEOUT" in
  '' | *[!0-9]*)
    echo "[vm] TIDAL_VM_KVM_PROBE_TIMEOUT='$TIMEOUT' is not a whole number of seconds" >&2
    exit 2
    ;;
esac

[ -e "$KVM_DEVICE" ] || choose tcg "$KVM_DEVICE is absent"
{ [ -r "$KVM_DEVICE" ] && [ -w "$KVM_DEVICE" ]; } || choose tcg "$KVM_DEVICE is not read-write for $(id -un)"
BUSYBOX=$(command -v busybox) || { echo "[vm] busybox not found (busybox-static)" >&2; exit 2; }

# The probe's initramfs: busybox and an init that prints the marker. Kept
# apart from the tests' initramfs so the probe costs no decompression of it.
PROBE=$WORK/kvm-probe
rm -rf "$PROBE"
mkdir -p "$PROBE/root/bb"
cp "$BUSYBOX" "$PROBE/root/bb/busybox"
cat >"$PROBE/root/init" <<'EOF'
#!/bb/busybox sh
echo TIDAL_KVM_PROBE_OK
/bb/busybox poweroff -f
EOF
chmod +x "$PROBE/root/init"
(cd "$PROBE/root" && find . | cpio -o -H newc --quiet | gzip -1) >"$PROBE/initramfs.cpio.gz"

start=$(date +%s.%N)
# The braces take bash's own "Aborted" report of QEMU's assertion off stderr.
{
  timeout "$TIMEOUT" "$QEMU" -nographic -no-reboot -m 256 -smp 1 -accel kvm -cpu max -nic none \
    -kernel "$KERNEL" -initrd "$PROBE/initramfs.cpio.gz" \
    -append "console=ttyS0 panic=-1 loglevel=0 edd=off" </dev/null >"$PROBE/console.log" 2>&1
  rc=$?
} 2>/dev/null
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
if grep -a -q TIDAL_KVM_PROBE_OK "$PROBE/console.log"; then
  choose kvm "$KVM_DEVICE works: a probe boot under KVM reached init in $secs s"
fi
if [ "$rc" = 124 ]; then
  why="no init within ${TIMEOUT} s"
else
  # QEMU's own words, e.g. "error: failed to set MSR 0x10a" or the assertion.
  why=$(grep -a -m1 -i -e error -e assert -e fail "$PROBE/console.log" | tr -d '\r')
  [ -n "$why" ] || why="QEMU exited with status $rc before init"
fi
choose tcg "$KVM_DEVICE is present but a probe boot under KVM failed after $secs s: $why"
