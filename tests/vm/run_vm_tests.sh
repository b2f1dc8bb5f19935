#!/usr/bin/env bash
# Boots Debian's kernel in QEMU with Soft-RoCE (rdma_rxe) and runs Tidal's ib
# tests inside, over a real verbs stack: libibverbs, the rxe provider and the
# kernel driver. One boot runs the whole set (guest_tests.sh), because a boot
# under software emulation costs 15-40 s.
#
#   run_vm_tests.sh WORK_DIR BINARY...
#
# The accelerator: KVM where a short probe boot shows it works, else TCG
# (choose_accel.sh; TIDAL_VM_ACCEL=auto|kvm|tcg).
#
# The binaries (and every library they need, including the dlopened
# libibverbs and its rxe provider) are copied into an initramfs together
# with busybox, kmod, iproute2's ip and rdma, and the kernel modules
# rdma_rxe needs. The VM has no network device at all: its only interfaces
# are dummy ones, rxed0 under rxe0 and, for the multi-rail steps at the end
# of guest_tests.sh, rxed1 under rxe1, so no packet leaves it.
#
# Exit status: 0 when every guest test passed, 1 when one failed or the VM
# died, 77 (ctest SKIP_RETURN_CODE) when QEMU, a kernel with rdma_rxe, or a
# tool is missing here. VM_TIMEOUT (s) bounds the VM's run (default 900);
# VM_GUEST_TESTS=script runs another guest script instead (for experiments).
set -uo pipefail

WORK=${1:?usage: run_vm_tests.sh WORK_DIR BINARY...}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIP: $*"; exit 77; }

for tool in qemu-system-x86_64 timeout cpio gzip ldd modprobe depmod busybox ip rdma; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool not found (scripts/bootstrap.sh installs the VM packages)"
done
# The newest installed kernel image whose module tree has rdma_rxe.
KVER=""
for k in $(ls /boot/vmlinuz-* 2>/dev/null | sed 's|/boot/vmlinuz-||' | sort -V); do
  modprobe -S "$k" --show-depends rdma_rxe >/dev/null 2>&1 && KVER=$k
done
[ -n "$KVER" ] || skip "no /boot/vmlinuz-* with an rdma_rxe module (install linux-image-amd64)"
MA=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
PROVIDER=$(ls /usr/lib/"$MA"/libibverbs/librxe-rdmav*.so 2>/dev/null | head -1)
VERBS=$(ls /usr/lib/"$MA"/libibverbs.so.1 2>/dev/null)
[ -n "$PROVIDER" ] && [ -n "$VERBS" ] || skip "libibverbs1 / ibverbs-providers (rxe) not installed"

ROOT=$WORK/root
INITRD=$WORK/initramfs.cpio.gz
LOG=$WORK/console.log
rm -rf "$ROOT"
mkdir -p "$ROOT"/{usr/bin,usr/lib,bb,etc/libibverbs.d,proc,sys,dev,tmp,run,tidal/bin}
ln -s usr/lib "$ROOT/lib"; ln -s usr/lib "$ROOT/lib64"; ln -s usr/bin "$ROOT/bin"; ln -s usr/bin "$ROOT/sbin"

add_file() { mkdir -p "$ROOT$(dirname "${2:-$1}")" && cp -L "$1" "$ROOT${2:-$1}"; }
add_libs() {  # every shared library an ELF needs, where the guest's loader finds it
  # System libraries keep their path. Ours (libtidal, found through the build
  # tree's RUNPATH) go to the library directory: the build tree may lie under
  # /tmp, which the guest mounts a fresh tmpfs over, and ldconfig below puts
  # them in the loader's cache.
  ldd "$1" 2>/dev/null | awk '$2=="=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' |
    while read -r lib; do
      case "$lib" in
        /lib/* | /lib64/* | /usr/lib/* | /usr/lib64/*) dest=$lib ;;
        *) dest=/usr/lib/$MA/$(basename "$lib") ;;
      esac
      [ -e "$ROOT$dest" ] || add_file "$lib" "$dest"
    done
}
add_bin() { add_file "$1" "$2"; add_libs "$1"; }

cp "$(command -v busybox)" "$ROOT/bb/busybox"
for applet in $(busybox --list); do [ "$applet" = busybox ] || ln -sf busybox "$ROOT/bb/$applet"; done
ln -sf ../../bb/busybox "$ROOT/usr/bin/sh"
for t in ip rdma kmod; do add_bin "$(command -v $t)" "/usr/bin/$t"; done
# For guest scripts that build network-namespace "hosts" (guest_netem.sh runs
# tests/fault/netns_hosts.sh, a bash script that needs tc).
for t in tc bash; do
  if command -v "$t" >/dev/null 2>&1; then add_bin "$(command -v $t)" "/usr/bin/$t"; fi
done
mkdir -p "$ROOT/var" && ln -s ../run "$ROOT/var/run"  # ip netns keeps its names in /var/run/netns
ln -sf ../../bb/busybox "$ROOT/usr/bin/env"              # for "#!/usr/bin/env bash"
for t in modprobe lsmod; do ln -sf kmod "$ROOT/usr/bin/$t"; done
# Dlopened, so ldd of our binaries does not list them.
add_bin "$VERBS" "$VERBS"
add_bin "$(readlink -f "$PROVIDER")" "$PROVIDER"
cp /etc/libibverbs.d/rxe.driver "$ROOT/etc/libibverbs.d/"
[ -e /lib/"$MA"/libgcc_s.so.1 ] && add_file /lib/"$MA"/libgcc_s.so.1  # glibc dlopens it for pthread_exit
for bin in "$@"; do add_bin "$bin" "/tidal/bin/$(basename "$bin")"; done
cp "${VM_GUEST_TESTS:-$HERE/guest_tests.sh}" "$ROOT/tidal/guest_tests.sh"
cp "$HERE/guest_init.sh" "$ROOT/init"
cp "$HERE/guest_add_rxe.sh" "$ROOT/tidal/guest_add_rxe.sh"
cp "$HERE/two_rail_topology.txt" "$ROOT/tidal/two_rail_topology.txt"
chmod +x "$ROOT/init" "$ROOT/tidal/guest_tests.sh" "$ROOT/tidal/guest_add_rxe.sh"
printf '/lib/%s\n/usr/lib/%s\n' "$MA" "$MA" > "$ROOT/etc/ld.so.conf"
ldconfig -r "$ROOT" 2>/dev/null || true
echo 'root:x:0:0:root:/root:/bb/sh' > "$ROOT/etc/passwd"
echo 'root:x:0:' > "$ROOT/etc/group"
printf '127.0.0.1 localhost\n' > "$ROOT/etc/hosts"

# Kernel modules with their dependencies, decompressed, plus depmod, so that
# the kernel's own request_module (rxe asks for the crc32 crypto module) works.
MD=/lib/modules/$KVER
mkdir -p "$ROOT$MD"
cp "$MD"/modules.builtin* "$MD"/modules.order "$ROOT$MD/" 2>/dev/null
for m in rdma_rxe ib_uverbs dummy crc32_generic crc32c_generic veth bridge sch_netem sch_tbf; do
  modprobe -S "$KVER" --show-depends "$m" 2>/dev/null | while read -r kw ko _; do
    [ "$kw" = insmod ] || continue
    dst=${ko%.xz}; dst=${dst%.zst}; dst=${dst%.gz}
    [ -e "$ROOT$dst" ] && continue
    mkdir -p "$ROOT$(dirname "$dst")"
    case $ko in
      *.xz) xz -dc "$ko" ;; *.zst) zstd -qdc "$ko" ;; *.gz) gzip -dc "$ko" ;; *) cat "$ko" ;;
    esac > "$ROOT$dst"
  done
done
depmod -b "$ROOT" "$KVER" || skip "depmod failed"

(cd "$ROOT" && find . | cpio -o -H newc --quiet | gzip -1) > "$INITRD"
echo "[vm] kernel $KVER, initramfs $(du -h "$INITRD" | cut -f1)"

# KVM only where a probe boot shows it runs a guest, else software emulation
# (TCG): choose_accel.sh says why, and TIDAL_VM_ACCEL=kvm|tcg forces either.
CHOICE=$("$HERE/choose_accel.sh" "/boot/vmlinuz-$KVER" "$WORK") || { echo "[vm] FAIL: no accelerator chosen"; exit 1; }
case "$CHOICE" in
  kvm) ACCEL=(-accel kvm) ;;
  *) ACCEL=(-accel tcg,thread=multi) ;;
esac
start=$(date +%s)
# idle=poll: an idle vCPU under TCG otherwise adds milliseconds to every wakeup.
timeout "${VM_TIMEOUT:-900}" qemu-system-x86_64 -nographic -no-reboot -m 2048 -smp 2 \
  "${ACCEL[@]}" -cpu max -nic none -kernel "/boot/vmlinuz-$KVER" -initrd "$INITRD" \
  -append "console=ttyS0 panic=-1 loglevel=3 edd=off idle=poll" </dev/null 2>&1 |
  sed -u -e 's/\r//g' -e 's/\x1bc//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' | tee "$LOG"
echo "[vm] VM ran $(( $(date +%s) - start )) s"
rc=$(grep -a -o 'TIDAL_VM_EXIT=[0-9]*' "$LOG" | tail -1 | cut -d= -f2)
if [ -z "$rc" ]; then
  echo "[vm] FAIL: the VM did not report a result (timeout after ${VM_TIMEOUT:-900} s, or crash)"
  exit 1
fi
[ "$rc" = 0 ] && { echo "[vm] all guest tests passed"; exit 0; }
echo "[vm] FAIL: $rc guest test(s) failed"
exit 1
