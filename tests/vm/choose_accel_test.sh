#!/usr/bin/env bash
# Tests choose_accel.sh in every state a host's KVM can be in:
#   - absent, not read-write, forced either way, a bad setting;
#   - present but failing: a QEMU stand-in that aborts under -accel kvm as QEMU
#     does on such hosts ("failed to set MSR", assertion), and this host's own
#     /dev/kvm with the real QEMU when it is of that kind;
#   - present and hanging: a stand-in that never boots (the probe's bound);
#   - present and working: a stand-in that runs the real QEMU under TCG in
#     place of KVM, so the probe's own initramfs really boots the kernel and
#     prints its marker.
# Only KVM itself is replaced, since no host here can run a KVM guest.
#
#   choose_accel_test.sh WORK_DIR
# Exit status: 0 when every case passed, 1 otherwise, 77 without QEMU or a kernel.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${1:?usage: choose_accel_test.sh WORK_DIR}
CHOOSE=$HERE/choose_accel.sh
rm -rf "$WORK"
mkdir -p "$WORK/bin"
command -v qemu-system-x86_64 >/dev/null || { echo "SKIP: qemu-system-x86_64 not found"; exit 77; }
command -v busybox >/dev/null || { echo "SKIP: busybox not found"; exit 77; }
KERNEL=$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)
[ -n "$KERNEL" ] || { echo "SKIP: no /boot/vmlinuz-*"; exit 77; }

PASSED=0 FAILED=0
# expect NAME WANT_STATUS WANT_CHOICE REASON_PATTERN [VAR=VALUE...]
expect() {
  local name=$1 want_rc=$2 want=$3 pattern=$4
  shift 4
  local got rc
  got=$(env "$@" "$CHOOSE" "$KERNEL" "$WORK/probe" 2>"$WORK/stderr")
  rc=$?
  if [ "$rc" = "$want_rc" ] && [ "$got" = "$want" ] && grep -q -E -e "$pattern" "$WORK/stderr"; then
    echo "PASS $name: $(cat "$WORK/stderr")"
    PASSED=$((PASSED + 1))
  else
    echo "FAIL $name: exit $rc (want $want_rc), chose '$got' (want '$want'), stderr:"
    sed 's/^/    /' "$WORK/stderr"
    echo "    (wanted a line matching: $pattern)"
    FAILED=$((FAILED + 1))
  fi
}

REAL_QEMU=$(command -v qemu-system-x86_64)
FAKE_KVM=$WORK/kvm-node
: >"$FAKE_KVM"
chmod 600 "$FAKE_KVM"

# QEMU as it behaves where /dev/kvm opens but cannot run a guest.
cat >"$WORK/bin/qemu-kvm-broken" <<'EOF'
#!/bin/sh
case " $* " in *" -accel kvm "*)
  echo "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69" >&2
  echo "qemu-system-x86_64: ../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: Assertion \`ret == cpu->kvm_msr_buf->nmsrs' failed." >&2
  kill -ABRT $$ ;;
esac
exit 1
EOF
# QEMU whose KVM never gets to init.
cat >"$WORK/bin/qemu-kvm-hangs" <<'EOF'
#!/bin/sh
exec sleep 600
EOF
# QEMU with a working KVM: the real QEMU, emulating where KVM would run.
cat >"$WORK/bin/qemu-kvm-works" <<EOF
#!/bin/sh
args=""
for a in "\$@"; do
  [ "\$a" = kvm ] && a=tcg
  args="\$args '\$a'"
done
eval exec "$REAL_QEMU" "\$args"
EOF
chmod +x "$WORK"/bin/*

expect forced-tcg 0 tcg 'accelerator: tcg \(forced by TIDAL_VM_ACCEL=tcg' TIDAL_VM_ACCEL=tcg
expect forced-kvm 0 kvm 'accelerator: kvm \(forced by TIDAL_VM_ACCEL=kvm' TIDAL_VM_ACCEL=kvm
expect bad-setting 2 '' "TIDAL_VM_ACCEL='fast' is not one of auto, kvm, tcg" TIDAL_VM_ACCEL=fast
expect bad-timeout 2 '' "TIDAL_VM_KVM_PROBE_TIMEOUT='soon' is not a whole number" \
  TIDAL_VM_KVM_PROBE_TIMEOUT=soon
expect absent 0 tcg "accelerator: tcg \\($WORK/no-such-kvm is absent\\)" \
  TIDAL_VM_KVM_DEVICE="$WORK/no-such-kvm"
if [ "$(id -u)" != 0 ]; then
  chmod 000 "$FAKE_KVM"
  expect not-read-write 0 tcg 'is not read-write' TIDAL_VM_KVM_DEVICE="$FAKE_KVM"
  chmod 600 "$FAKE_KVM"
fi
expect present-but-failing 0 tcg 'probe boot under KVM failed after .*failed to set MSR 0x10a' \
  TIDAL_VM_KVM_DEVICE="$FAKE_KVM" TIDAL_VM_QEMU="$WORK/bin/qemu-kvm-broken"
expect present-but-hanging 0 tcg 'probe boot under KVM failed after .*no init within 2 s' \
  TIDAL_VM_KVM_DEVICE="$FAKE_KVM" TIDAL_VM_QEMU="$WORK/bin/qemu-kvm-hangs" \
  TIDAL_VM_KVM_PROBE_TIMEOUT=2
# Under emulation the probe boot takes 3-10 s on these machines, so its bound is widened.
expect present-and-working 0 kvm 'works: a probe boot under KVM reached init in' \
  TIDAL_VM_KVM_DEVICE="$FAKE_KVM" TIDAL_VM_QEMU="$WORK/bin/qemu-kvm-works" \
  TIDAL_VM_KVM_PROBE_TIMEOUT=120

# This host's own KVM, for the log: which kind of host CI ran on.
if [ -e /dev/kvm ]; then
  "$CHOOSE" "$KERNEL" "$WORK/probe" 2>&1 >/dev/null | sed 's/^/this host: /'
fi

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
