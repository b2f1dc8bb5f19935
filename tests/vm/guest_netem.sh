#!/bin/sh
# Run inside the test VM (run_vm_tests.sh with VM_GUEST_TESTS=this file):
# "hosts" made of network namespaces, joined by veths and a bridge, with a
# real tc netem delay on every host link, which the development and CI
# kernels lack but Debian's has. The correctness suite runs across 2 hosts x
# 2 ranks (shm inside a host, tcp across, hierarchical AllReduce, AllGather
# and ReduceScatter by default), then all_reduce_perf compares hierarchical
# with the flat tcp ring under the same delay (printed, not asserted: the VM
# emulates its CPUs). Between them, chaos: loss, duplication and reordering
# on every host link, and a link down for 2 s mid-run, with exact results. Each step prints "RESULT <name>: PASS|FAIL"; the exit
# status is the number of failures.
B=/tidal/bin
# iproute2's ip and tc: busybox's sh would run its own ip applet for a bare "ip".
IP=/usr/bin/ip TC=/usr/bin/tc
export TIDAL_TIMEOUT=120 TIDAL_CONF_FILE=/nonexistent NETNS_TIMEOUT=400
FAILS=0
result() {  # result NAME RC
  if [ "$2" = 0 ]; then echo "RESULT $1: PASS"; else echo "RESULT $1: FAIL (exit $2)"; FAILS=$((FAILS + 1)); fi
}
for m in veth bridge sch_netem sch_tbf; do modprobe "$m" || echo "[netem] modprobe $m failed"; done

# The delay is real: a round trip between two namespaces joined by veths with
# netem takes at least twice the one-way delay.
$IP netns add pa && $IP netns add pb && $IP link add va type veth peer name vb &&
  $IP link set va netns pa && $IP link set vb netns pb &&
  $IP -n pa addr add 10.232.0.1/24 dev va && $IP -n pb addr add 10.232.0.2/24 dev vb &&
  $IP -n pa link set va up && $IP -n pb link set vb up &&
  $IP netns exec pa $TC qdisc add dev va root netem delay 20ms
rc=$?
result netem-qdisc $rc
$IP netns exec pa ping -c 3 10.232.0.2 > /tmp/ping.out 2>&1
cat /tmp/ping.out
avg=$(sed -n 's|.*= [0-9.]*/\([0-9.]*\)/.*|\1|p' /tmp/ping.out)
awk -v a="${avg:-0}" 'BEGIN { exit !(a >= 20) }'
result netem-delays-the-link $?
$IP netns del pa; $IP netns del pb

echo "===== suite: 2 hosts x 2 ranks, 2 ms each way on every host link"
$B/netns_hosts.sh -H 2 -L 2 -D 2ms -- $B/collective_worker > /tmp/suite.out 2>&1
rc=$?
grep -E "passed|FAIL|netns_hosts" /tmp/suite.out | head -20
[ $rc = 0 ] || tail -40 /tmp/suite.out
result suite-2hosts-x2-netem $rc

echo "===== the same with the tcp links limited to 1 Gbit/s under the delay"
$B/netns_hosts.sh -H 2 -L 2 -D 2ms -r 1gbit -- $B/collective_worker > /tmp/suite.out 2>&1
rc=$?
grep -E "passed|FAIL|netns_hosts" /tmp/suite.out | head -20
[ $rc = 0 ] || tail -40 /tmp/suite.out
result suite-2hosts-x2-netem-1gbit $rc

# Chaos: every host link loses, duplicates and reorders packets; TCP must
# hide it and every result must be exact (collective_worker checks each).
echo "===== suite: 2 hosts x 2 ranks, netem delay 1ms loss 1% duplicate 1% reorder 25% 50%"
$B/netns_hosts.sh -H 2 -L 2 -n "delay 1ms loss 1% duplicate 1% reorder 25% 50%" -- \
  $B/collective_worker > /tmp/suite.out 2>&1
rc=$?
grep -E "passed|FAIL|netns_hosts" /tmp/suite.out | head -20
[ $rc = 0 ] || tail -40 /tmp/suite.out
result suite-2hosts-x2-loss-dup-reorder $rc

# The loss above and a link that goes down for 2 s in the middle of a run
# of AllReduces (the host tests run the flaps without netem; this is both).
echo "===== all_reduce_perf under the same loss, across a link down for 2 s"
TIDAL_TIMEOUT=60 $B/netns_hosts.sh -H 2 -L 1 -n "delay 1ms loss 1% duplicate 1% reorder 25% 50%" \
  -f 2@1 -- $B/all_reduce_perf -b 1M -e 1M -n 100 -w 1 -c 1 > /tmp/flap.out 2>&1
rc=$?
grep -E "netns_hosts|wrong|^ +[0-9]" /tmp/flap.out | head -10
[ $rc = 0 ] || tail -30 /tmp/flap.out
result flap-2s-under-loss-completes-exact $rc

# Hierarchical against the flat tcp ring under the same delay (sizes where
# the delay, not the emulated CPU, dominates).
for algo in hier ring; do
  net=""
  [ $algo = ring ] && net="TIDAL_NET=tcp"
  echo "===== all_reduce_perf, $algo, 2 hosts x 2 ranks, 2 ms delay"
  env $net TIDAL_ALLREDUCE_ALGO=$algo $B/netns_hosts.sh -H 2 -L 2 -D 2ms -- \
    $B/all_reduce_perf -b 8 -e 1M -f 32 -n 5 -w 1 > /tmp/perf.out 2>&1
  rc=$?
  grep -v -E '^# (Rank|Using|nThread|Avg)' /tmp/perf.out | grep -E '^ +[0-9]|wrong|netns_hosts'
  result all_reduce_perf-$algo $rc
done
exit $FAILS
