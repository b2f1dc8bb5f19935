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
      {"TIDAL_NET", Kind::String, "", "Force one transport for every peer (tcp, shm, ib, ofi)."},
      // Shared-memory transport.
      {"TIDAL_SHM_SLOTS", Kind::Int, "8",
       "Slots in each shm connection's ring (the sender's value is used)."},
      {"TIDAL_SHM_SLOT_BYTES", Kind::Int, "262144",
       "Bytes per shm ring slot: the step in which a sender publishes data to its receiver."},
      {"TIDAL_SHM_PULL_BYTES", Kind::Int, "0",
       "shm transfers of at least this many bytes are read straight from the sender's memory "
       "(process_vm_readv, one copy instead of two) where the kernel allows it; 0: never."},
      {"TIDAL_SHM_P2P_PULL_BYTES", Kind::Int, "16384",
       "Send/Recv pieces (of messages below 2 MiB) and pairwise AllToAll(v) pieces of at least "
       "this many bytes are read straight from the sender's memory where the kernel allows it; "
       "0: never."},
      // libfabric (ofi) transport.
      {"TIDAL_OFI_PROVIDER", Kind::String, "",
       "ofi provider (efa, tcp;ofi_rxm, udp;ofi_rxd, shm); set: ofi is offered between hosts "
       "without TIDAL_NET; empty: FI_PROVIDER with TIDAL_NET=ofi, efa where an EFA adapter is."},
      {"TIDAL_OFI_REGISTER_ALWAYS", Kind::Bool, "0",
       "ofi: register every buffer (FI_MR_LOCAL) even where the provider does not ask."},
      {"TIDAL_OFI_COMPLETION", Kind::String, "auto",
       "ofi: when a send completes: transmit (FI_TRANSMIT_COMPLETE), provider (its default), "
       "auto (the provider's default where it means the data left the process: net)."},
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
      {"TIDAL_IB_MAX_RAILS", Kind::Int, "4",
       "Most NICs one ib connection stripes over (1..4); 1 turns multi-rail off."},
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
       "AllReduce algorithm: auto, ring, rd (recursive doubling), hier (hierarchical by host), "
       "rabenseifner (recursive halving, then doubling), tree (double binary tree)."},
      {"TIDAL_ALLGATHER_ALGO", Kind::String, "auto",
       "AllGather algorithm: auto (hier when ranks span equal hosts, bruck for small blocks, else "
       "ring), ring, hier, bruck (log2 n rounds)."},
      {"TIDAL_REDUCESCATTER_ALGO", Kind::String, "auto",
       "ReduceScatter algorithm: auto (hier when ranks span equal hosts, halving for small blocks, "
       "else ring), ring, hier, halving (recursive halving, log2 n steps)."},
      {"TIDAL_ALLREDUCE_RD_BYTES", Kind::Int, "65536",
       "AllReduce of at most this many bytes uses recursive doubling (latency) instead of the "
       "ring."},
      {"TIDAL_ALLREDUCE_RABENSEIFNER_BYTES", Kind::Int, "1048576",
       "AllReduce above TIDAL_ALLREDUCE_RD_BYTES and up to this many bytes uses Rabenseifner "
       "(auto, from 4 ranks, one host or uneven hosts)."},
      {"TIDAL_TUNER", Kind::String, "rules",
       "Who picks AllReduce/AllGather/Broadcast/Reduce algorithms under auto: rules (size "
       "thresholds) or model (the tuner's predicted times, up to 64 ranks)."},
      {"TIDAL_TUNER_FILE", Kind::String, "",
       "Link costs for the tuner's model (src/tuner/link_model.h format): alphas, bandwidths."},
      {"TIDAL_ALLGATHER_BRUCK_BYTES", Kind::Int, "8192",
       "AllGather of at most this many bytes per rank uses Bruck (auto, from 4 ranks, one host "
       "or uneven hosts)."},
      {"TIDAL_REDUCESCATTER_HALVING_BYTES", Kind::Int, "65536",
       "ReduceScatter of at most this many bytes per rank uses recursive halving (auto, from 4 "
       "ranks, one host or uneven hosts)."},
      {"TIDAL_ALLTOALL_ALGO", Kind::String, "auto",
       "AllToAll algorithm: auto, pairwise (staggered exchange), bruck (log2 n rounds)."},
      {"TIDAL_ALLTOALL_BRUCK_BYTES", Kind::Int, "1024",
       "AllToAll of at most this many bytes per peer uses Bruck (auto, from 16 ranks)."},
      {"TIDAL_GATHER_ALGO", Kind::String, "auto",
       "Gather algorithm: auto, direct (root to every rank), tree (binomial)."},
      {"TIDAL_GATHER_TREE_BYTES", Kind::Int, "4096",
       "Gather of at most this many bytes per rank uses the binomial tree (auto, from 16 ranks)."},
      {"TIDAL_SCATTER_ALGO", Kind::String, "auto",
       "Scatter algorithm: auto, direct (root to every rank), tree (binomial)."},
      {"TIDAL_SCATTER_TREE_BYTES", Kind::Int, "4096",
       "Scatter of at most this many bytes per rank uses the binomial tree (auto, from 16 ranks)."},
      {"TIDAL_BROADCAST_ALGO", Kind::String, "auto",
       "Broadcast algorithm: auto, chain (pipelined along the ring), tree (binomial)."},
      {"TIDAL_BROADCAST_TREE_BYTES", Kind::Int, "65536",
       "Broadcast of at most this many bytes uses the binomial tree (auto, from 3 ranks)."},
      {"TIDAL_REDUCE_ALGO", Kind::String, "auto",
       "Reduce algorithm: auto, chain (pipelined along the ring), tree (binomial)."},
      {"TIDAL_REDUCE_TREE_BYTES", Kind::Int, "65536",
       "Reduce of at most this many bytes uses the binomial tree (auto, from 3 ranks)."},
      {"TIDAL_STAGING_SLOTS", Kind::Int, "4",
       "Receive staging slots of TIDAL_CHUNK_SIZE per connection (persistent, pre-touched)."},
      {"TIDAL_SPIN_US", Kind::Int, "5000",
       "Microseconds a wait spins (TIDAL_BUSY_POLL says how) before it sleeps in poll()."},
      {"TIDAL_FLIGHT_RECORDER", Kind::Int, "256",
       "How many of its last calls each communicator keeps in its flight record (0: none)."},
      {"TIDAL_DUMP_ON_TIMEOUT", Kind::Bool, "0",
       "1: a call that times out, or fails because a peer gave up, writes the communicator's "
       "flight record (TIDAL_DUMP_FILE)."},
      {"TIDAL_DUMP_SIGNAL", Kind::String, "",
       "A signal (USR1, USR2, HUP, URG, PWR, WINCH) that makes every communicator of the "
       "process write its flight record; empty: none."},
      {"TIDAL_DUMP_FILE", Kind::String, "tidal-flight.%h.%p.%c.json",
       "Where flight records go: %h host, %p pid, %r rank, %c the communicator's id."},
      {"TIDAL_CHECK_CALLS", Kind::Bool, "1",
       "1: each collective sends its signature (collective, count, datatype, op, root, call "
       "number) ahead of its data, and ranks that disagree fail naming both calls (all ranks)."},
      {"TIDAL_BUSY_POLL", Kind::String, "auto",
       "How a wait spins: 1 busy-polls (no system call), 0 yields the CPU each round, auto "
       "busy-polls when the host's ranks fit its CPUs."},
      {"TIDAL_SPIN_MOVE", Kind::Bool, "1",
       "1: a busy-polling wait whose shm peer waits on the same CPU moves this thread to another "
       "CPU of its affinity mask (the mask is left as it was); 0: never."},
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
