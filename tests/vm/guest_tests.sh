#!/bin/sh
# The ib test set, run inside the Soft-RoCE VM (run_vm_tests.sh) with every
# pair of ranks forced onto ib (TIDAL_NET=ib) over rxe0, then over two rails
# (rxe0 and rxe1) at the end. Each step prints
# "RESULT <name>: PASS|FAIL"; the exit status is the number of failures.
B=/tidal/bin
export TIDAL_NET=ib TIDAL_TIMEOUT=60 TIDAL_CONF_FILE=/nonexistent
FAILS=0
# step NAME FILTER COMMAND...: runs COMMAND (bounded), shows the lines that
# match FILTER (all of them when it fails), and records the result.
step() {
  name=$1 filter=$2
  shift 2
  echo "===== $name: $*"
  t0=$(cut -d' ' -f1 /proc/uptime)
  timeout 400 "$@" > /tmp/step.out 2>&1
  rc=$?
  t1=$(cut -d' ' -f1 /proc/uptime)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
  if [ $rc = 0 ]; then
    grep -E -e "$filter" /tmp/step.out | head -60
    echo "RESULT $name: PASS (${secs} s)"
  else
    tail -80 /tmp/step.out
    echo "RESULT $name: FAIL (exit $rc, ${secs} s)"
    FAILS=$((FAILS + 1))
  fi
}
# expect_line NAME PATTERN: the previous step's output must contain PATTERN.
expect_line() {
  if grep -q -E -e "$2" /tmp/step.out; then
    echo "RESULT $1: PASS"
  else
    echo "RESULT $1: FAIL (no line matching '$2')"
    FAILS=$((FAILS + 1))
  fi
}

PATHLINE=' -> [0-9]+: ib rxe0:1 RoCEv2 gid [0-9]+ mtu [0-9]+ GDR (off|dmabuf|peermem)'
INFO="TIDAL_DEBUG=INFO TIDAL_DEBUG_SUBSYS=INIT,NET"

step tidal-info 'Transports' $B/tidal-info
expect_line tidal-info-lists-ib 'Transports:.* ib'

# MultiRail.* need two devices: they run at the end, once rxe1 exists.
step transport-unit 'PASSED|SKIPPED|tests ran' \
  env TIDAL_TEST_NETDEV=rxed0 $B/ib_transport_test --gtest_filter='-MultiRail.*'
expect_line transport-unit-not-skipped '\[  PASSED  \] [1-9]'
grep -q SKIPPED /tmp/step.out && { echo "RESULT transport-unit-ran-everything: FAIL (skipped)"; FAILS=$((FAILS + 1)); }

step suite-np2 "$PATHLINE|passed|registration cache|hw_counters" \
  env $INFO $B/tidalrun -np 2 $B/collective_worker
expect_line suite-np2-path-line "rank 0 -> 1: ib rxe0:1 RoCEv2"

step suite-np3-rdma-path "$PATHLINE|passed|registration cache" \
  env $INFO TIDAL_IB_EAGER_BYTES=0 TIDAL_CHUNK_SIZE=65536 \
  $B/tidalrun -np 3 $B/collective_worker --big-count 65539
expect_line suite-np3-path-line "rank 2 -> 0: ib rxe0:1 RoCEv2"
expect_line suite-np3-cache-reuse 'registration cache: [1-9][0-9]* hits'

step suite-np2-4qps "$PATHLINE|passed" \
  env $INFO TIDAL_IB_QPS_PER_CONNECTION=4 TIDAL_IB_EAGER_BYTES=0 TIDAL_CHUNK_SIZE=262144 \
  $B/tidalrun -np 2 $B/collective_worker --big-count 262147
expect_line suite-np2-4qps-striped ' -> 1: ib rxe0:1 .*4 QPs'

# Send/Recv, groups, AlltoAll(v), Gather/Scatter and split over ib: links
# opened on first use (np3: every pair, not only ring neighbours).
step p2p-np3 "$PATHLINE|passed" env $INFO $B/tidalrun -np 3 $B/p2p_worker
expect_line p2p-np3-path-line "rank 0 -> 2: ib rxe0:1 RoCEv2"

step faults 'PASSED|OK \]|expected' $B/ib_fault_test
expect_line faults-bad-gid-text 'TIDAL_IB_GID_INDEX=[0-9]+ is not a usable GID on rxe0 port 1'

step all_reduce_perf "^#|^ +[0-9]|$PATHLINE" \
  env TIDAL_DEBUG=INFO TIDAL_DEBUG_SUBSYS=INIT $B/tidalrun -np 2 $B/all_reduce_perf -b 8 -e 8M -f 4 -n 20 -w 2
expect_line all_reduce_perf-over-ib "rank 0 -> 1: ib rxe0:1"
# The same over tcp in the same VM, for the side-by-side table in docs/benchmarks.md.
step all_reduce_perf-tcp "^ +[0-9]" \
  env TIDAL_NET=tcp $B/tidalrun -np 2 $B/all_reduce_perf -b 8 -e 8M -f 4 -n 20 -w 2

# Multi-rail: a second Soft-RoCE device on a second virtual NIC (a dummy
# interface, like rxed0), set up only now so that every step above sees one
# device. With TIDAL_IB_HCA=rxe0,rxe1 each connection stripes over both
# rails (rxe0 with rxe0, rxe1 with rxe1); both devices' packet counters must
# move by comparable amounts (each at least a quarter of the total). Few
# iterations: this checks results and counters; docs/benchmarks.md has the
# timed one-rail / two-rail comparison.
/tidal/guest_add_rxe.sh rxe1 rxed1 10.77.1.1/24 || echo "[guest] rxe1 did not become ACTIVE"
sent() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/sent_pkts" 2>/dev/null || echo 0; }

step multirail-unit 'PASSED|SKIPPED|OK \]' $B/ib_transport_test --gtest_filter='MultiRail.*'
expect_line multirail-unit-not-skipped '\[  PASSED  \] 3 tests'
grep -q SKIPPED /tmp/step.out && { echo "RESULT multirail-unit-ran-everything: FAIL (skipped)"; FAILS=$((FAILS + 1)); }

a0=$(sent rxe0) b0=$(sent rxe1)
step all_reduce_perf-2rails "^ +[0-9]| -> 1: ib |stripes over" \
  env $INFO TIDAL_IB_HCA=rxe0,rxe1 $B/tidalrun -np 2 $B/all_reduce_perf -b 8 -e 8M -f 4 -n 5 -w 1
expect_line all_reduce_perf-2rails-path 'rank 0 -> 1: ib 2 rails \[rxe0:1 .* \| rxe1:1 '
da=$(( $(sent rxe0) - a0 )) db=$(( $(sent rxe1) - b0 ))
total=$((da + db))
echo "rail packets during all_reduce_perf-2rails: rxe0 +$da, rxe1 +$db"
if [ "$total" -gt 0 ] && [ $((4 * da)) -ge "$total" ] && [ $((4 * db)) -ge "$total" ]; then
  echo "RESULT all_reduce_perf-2rails-both-devices-moved: PASS"
else
  echo "RESULT all_reduce_perf-2rails-both-devices-moved: FAIL (rxe0 +$da, rxe1 +$db)"
  FAILS=$((FAILS + 1))
fi

# The same two rails chosen by the topology instead of TIDAL_IB_HCA: a
# made-up layout (two_rail_topology.txt; rxe has no PCI device of its own)
# puts rxe0 and rxe1 nearest each rank's GPU.
step all_reduce_perf-topology-rails "^ +[0-9]|stripes over| -> 1: ib " \
  env $INFO TIDAL_TOPO_FILE=/tidal/two_rail_topology.txt \
  $B/tidalrun -np 2 $B/all_reduce_perf -b 8 -e 1M -f 8 -n 2 -w 1
expect_line all_reduce_perf-topology-rails-choice \
  "rank 1: ib stripes over 2 rails: rxe0:1, rxe1:1 \(the topology's nearest NICs\)"
expect_line all_reduce_perf-topology-rails-path 'rank 0 -> 1: ib 2 rails \[rxe0:1 '

# Rank 1 is given only rxe0: every connection falls back to the one rail
# both ranks have, says so at INFO, and the results are still checked.
step all_reduce_perf-rail-fallback "^ +[0-9]|falls back" \
  env $INFO TIDAL_IB_HCA=rxe0,rxe1 $B/tidalrun -np 2 sh -c \
  '[ "$TIDAL_RANK" = 1 ] && export TIDAL_IB_HCA=rxe0; exec /tidal/bin/all_reduce_perf -b 8 -e 1M -f 8 -n 5 -w 1'
expect_line all_reduce_perf-rail-fallback-info \
  'rank 0 -> 1: ib multi-rail falls back to the 1 rail both ranks have .*dropped rxe1:1 of rank 0'
expect_line all_reduce_perf-rail-fallback-peer-info \
  'rank 1 -> 0: ib multi-rail falls back to the 1 rail both ranks have .*dropped rxe1:1 of rank 0'

echo "GUEST_TESTS_DONE failures=$FAILS uptime=$(cut -d' ' -f1 /proc/uptime)s"
exit $FAILS
