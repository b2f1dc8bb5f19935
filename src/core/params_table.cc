// The single declaration of every TIDAL_* parameter. docs/env.md mirrors this
// table; a unit test checks that every name here appears there.
#include "core/params.h"

namespace tidal::params {

const std::vector<Definition>& definitions() {
  static const std::vector<Definition> kDefinitions = {
      // Logging.
      {"TIDAL_DEBUG", Kind::String, "WARN", "Log level: NONE, VERSION, WARN, INFO, TRACE."},
      {"TIDAL_DEBUG_SUBSYS", Kind::String, "ALL",
       "Comma list of subsystems to log (INIT,BOOT,NET,COLL,ENV); ^ prefix excludes."},
      {"TIDAL_DEBUG_FILE", Kind::String, "",
       "Write logs to this file instead of stderr; %h is replaced by the host, %p by the pid."},
      {"TIDAL_CONF_FILE", Kind::String, "/etc/tidal.conf",
       "Config file of NAME=VALUE lines read under the environment (environment only)."},
      // Bootstrap and launch.
      {"TIDAL_COMM_ID", Kind::String, "",
       "host:port of the rendezvous root; rank 0 listens there (with TIDAL_RANK/TIDAL_NRANKS)."},
      {"TIDAL_RANK", Kind::Int, "-1", "This process's rank, used with TIDAL_COMM_ID."},
      {"TIDAL_NRANKS", Kind::Int, "-1", "Number of ranks, used with TIDAL_COMM_ID."},
      {"TIDAL_MASTER_PORT_OFFSET", Kind::Int, "1",
       "With MASTER_ADDR/MASTER_PORT, the root listens on MASTER_PORT plus this (torch holds it)."},
      {"TIDAL_SECRET", Kind::String, "",
       "32 hex digits: the job's shared secret when the id comes from the environment."},
      {"TIDAL_TIMEOUT", Kind::Int, "300",
       "Seconds any blocking wait (bootstrap, connect, collective) may last before it fails."},
      // Sockets and TCP transport.
      {"TIDAL_SOCKET_IFNAME", Kind::String, "",
       "Interfaces to use: prefix list, ^ excludes, = exact. Default: first up, not lo/docker."},
      {"TIDAL_SOCKET_FAMILY", Kind::String, "",
       "AF_INET or AF_INET6 to restrict interface addresses to one family."},
      {"TIDAL_NSOCKS", Kind::Int, "1",
       "TCP sockets per peer connection; large chunks are striped."},
      {"TIDAL_HOSTID", Kind::String, "",
       "Host identity for transport choice (default: machine id + boot id); same id = same host."},
      {"TIDAL_SHM_DISABLE", Kind::Bool, "0",
       "1: ranks on one host talk over TCP instead of shared memory (set it on every rank)."},
      {"TIDAL_NET", Kind::String, "", "Force one transport for every peer (tcp, shm, ib)."},
      // Shared-memory transport.
      {"TIDAL_SHM_SLOTS", Kind::Int, "8",
       "Slots in each shm connection's ring (the sender's value is used)."},
      {"TIDAL_SHM_SLOT_BYTES", Kind::Int, "262144",
       "Bytes per shm ring slot: the step in which a sender publishes data to its receiver."},
      // InfiniBand verbs / RoCE transport.
      {"TIDAL_IB_HCA", Kind::String, "",
       "RDMA ports to use: mlx5_0:1,mlx5_1 (prefixes, optional port); ^ excludes; = exact."},
      {"TIDAL_IB_GID_INDEX", Kind::Int, "-1",
       "RoCE GID index; -1 picks a RoCE v2 GID with an IPv4 address automatically."},
      {"TIDAL_IB_ADDR_FAMILY", Kind::String, "",
       "AF_INET or AF_INET6: the address family of the automatically chosen RoCE GID."},
      {"TIDAL_IB_ADDR_RANGE", Kind::String, "",
       "CIDR range (10.0.0.0/8, fd00::/8) the automatically chosen RoCE GID must be in."},
      {"TIDAL_IB_TC", Kind::Int, "0", "Traffic class (DSCP << 2 | ECN) of RoCE packets."},
      {"TIDAL_IB_SL", Kind::Int, "0", "InfiniBand service level (RoCE: the priority, 0..7)."},
      {"TIDAL_IB_TIMEOUT", Kind::Int, "18",
       "QP ACK timeout exponent: 4.096 us * 2^N per try before a retransmission (1..31)."},
      {"TIDAL_IB_RETRY_CNT", Kind::Int, "7", "Retransmissions before a QP gives up (0..7)."},
      {"TIDAL_IB_QPS_PER_CONNECTION", Kind::Int, "1",
       "Queue pairs per ib connection; transfers of 64 KiB and more are striped across them."},
      {"TIDAL_IB_EAGER_BYTES", Kind::Int, "8192",
       "ib transfers up to this size go eagerly (no clear-to-send round trip); 0 disables."},
      {"TIDAL_GDR", Kind::String, "auto",
       "GPUDirect RDMA: auto (dma-buf, else nvidia_peermem, else staging), 0 off, 1 required."},
      {"TIDAL_NET_GDR_LEVEL", Kind::String, "PXB",
       "GPUDirect RDMA only when GPU and NIC are at most this far apart: LOC PIX PXB PHB SYS."},
      // Topology.
      {"TIDAL_TOPO_SYSFS", Kind::String, "/sys",
       "sysfs root topology discovery reads (a fixture tree in tests)."},
      {"TIDAL_TOPO_FILE", Kind::String, "",
       "Read the topology from this dump (TIDAL_TOPO_DUMP_FILE's format) instead of sysfs."},
      {"TIDAL_TOPO_DUMP_FILE", Kind::String, "",
       "Write the detected topology (GPUs, NICs, PCI paths, NUMA) to this file."},
      {"TIDAL_BIND", Kind::String, "auto",
       "At init: auto binds an unbound rank with a GPU to its GPU's CPUs; none never binds."},
      // Engine and algorithms.
      {"TIDAL_CHUNK_SIZE", Kind::Int, "524288",
       "Pipeline chunk in bytes: ring steps are cut into chunks so send, recv, reduce overlap."},
      {"TIDAL_ALLREDUCE_ALGO", Kind::String, "auto",
       "AllReduce algorithm: auto, ring, rd (recursive doubling), hier (hierarchical by host)."},
      {"TIDAL_ALLGATHER_ALGO", Kind::String, "auto",
       "AllGather algorithm: auto (hier when ranks span equal hosts, else ring), ring, hier."},
      {"TIDAL_REDUCESCATTER_ALGO", Kind::String, "auto",
       "ReduceScatter algorithm: auto (hier when ranks span equal hosts, else ring), ring, hier."},
      {"TIDAL_ALLREDUCE_RD_BYTES", Kind::Int, "65536",
       "AllReduce of at most this many bytes uses recursive doubling (latency) instead of the "
       "ring."},
      {"TIDAL_STAGING_SLOTS", Kind::Int, "4",
       "Receive staging slots of TIDAL_CHUNK_SIZE per connection (persistent, pre-touched)."},
      {"TIDAL_SPIN_US", Kind::Int, "5000",
       "Microseconds a wait spins (TIDAL_BUSY_POLL says how) before it sleeps in poll()."},
      {"TIDAL_BUSY_POLL", Kind::String, "auto",
       "How a wait spins: 1 busy-polls (no system call), 0 yields the CPU each round, auto "
       "busy-polls when the host's ranks fit its CPUs."},
      // CUDA device buffers.
      {"TIDAL_CUDA_DISABLE", Kind::Bool, "0",
       "1: never use CUDA (no context is created; a non-NULL stream is refused)."},
      {"TIDAL_CUDA_IPC_DISABLE", Kind::Bool, "0",
       "1: device buffers of ranks on one host go through pinned host memory, not CUDA IPC."},
      {"TIDAL_CUDA_IPC_SLOTS", Kind::Int, "4",
       "Slots in each cuda_ipc connection's device ring (the sender's value is used)."},
      {"TIDAL_CUDA_IPC_SLOT_BYTES", Kind::Int, "1048576",
       "Bytes per cuda_ipc ring slot: the step in which a sender copies and publishes."},
  };
  return kDefinitions;
}

}  // namespace tidal::params
