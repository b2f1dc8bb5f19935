#!/bin/bash
# Starts a one-node Slurm on localhost (munged, slurmctld, slurmd, all in a
# scratch directory with their own ports), runs
#   srun --mpi=pmix -n 4 all_reduce_perf
# and checks that it completes with every value correct; tears everything
# down after. Exit 77 (skipped) with the reason when it cannot run here.
set -u
perf=$1
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (slurmd runs jobs as their user; munged needs its key)"
for b in munged slurmctld slurmd srun; do
  command -v $b >/dev/null || skip "$b is not installed (slurm-wlm, munge)"
done
[ -x "$perf" ] || skip "$perf not built"

dir=$(mktemp -d /tmp/tidal-slurm.XXXXXX)
chmod 755 "$dir" # munged wants its socket directory searchable
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$dir"/*.log; do echo "== $f"; tail -20 "$f"; done
  exit 1
}

# Munge with its own key and socket.
dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
chmod 0400 "$dir/munge.key"
munged -f -F --key-file="$dir/munge.key" --socket="$dir/munge.sock" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge.seed" >"$dir/munged.out.log" 2>&1 &
pids+=($!)

# Free ports for slurmctld and slurmd, drawn at random below the kernel's
# ephemeral range as tidalrun draws its own (a port from bind(0) comes from
# the pool every outgoing connection on the host draws from, and a test
# beside this one may take it before slurmctld binds it).
read -r cport dport < <(python3 -c 'import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
rng, ports = random.SystemRandom(), []
while len(ports) < 2:
    with socket.socket() as x:
        try:
            x.bind(("127.0.0.1", rng.randrange(10000, low) if low > 11000 else 0))
        except OSError:
            continue  # taken: draw again
        p = x.getsockname()[1]
    if p not in ports:
        ports.append(p)
print(*ports)')
host=$(hostname -s)
mkdir -p "$dir/state" "$dir/spool"
cat >"$dir/slurm.conf" <<CONF
ClusterName=tidalci
SlurmctldHost=$host(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$cport
SlurmdPort=$dport
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=10 State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -D -i -f "$SLURM_CONF" >"$dir/slurmctld.out.log" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$host" >"$dir/slurmd.out.log" 2>&1 &
pids+=($!)

# Wait (bounded) until the node is idle.
for _ in $(seq 60); do
  state=$(sinfo -h -N -o %t 2>/dev/null | head -1)
  [ "$state" = idle ] && break
  sleep 1
done
[ "$state" = idle ] || fail "the node did not come up (state '$state')"
srun --mpi=list 2>&1 | grep -q pmix || skip "this Slurm has no pmix plugin"

out=$(timeout 180 srun --mpi=pmix -n 4 -t 5 "$perf" -b 8 -e 1M -f 4 -c 1 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || fail "srun exited with $rc"
echo "$out" | grep -q '# Out of bounds values : 0 OK' || fail "all_reduce_perf reported wrong values"
echo "$out" | grep -qE 'nranks 4|Rank  *3' || fail "the output does not show 4 ranks"
echo "PASS: srun --mpi=pmix -n 4 all_reduce_perf"
