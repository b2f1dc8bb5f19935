#!/bb/sh
# Inside the test VM: creates a dummy interface with an address and a
# Soft-RoCE device on it, and waits (up to 10 s) for its port to be ACTIVE.
#   guest_add_rxe.sh RXE IFACE ADDR/LEN      e.g. rxe0 rxed0 10.77.0.1/24
# Exit status 0 once the port is ACTIVE, 1 otherwise.
rxe=$1 dev=$2 addr=$3
ip link add "$dev" type dummy && ip addr add "$addr" dev "$dev" && ip link set "$dev" up
rdma link add "$rxe" type rxe netdev "$dev" || echo "[guest] rdma link add $rxe failed"
for i in $(seq 1 40); do
  grep -q ACTIVE "/sys/class/infiniband/$rxe/ports/1/state" 2>/dev/null && exit 0
  sleep 0.25
done
exit 1
