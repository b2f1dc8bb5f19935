#include "transports/ib/ib_transport.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "topology/placement.h"
#include "transports/ib/ib_recv_connection.h"
#include "transports/ib/ib_send_connection.h"

namespace tidal::ib {

namespace {

ConnectionGeometry geometryFromParams(int rank) {
  ConnectionGeometry g;
  const int64_t qps = params::getInt("TIDAL_IB_QPS_PER_CONNECTION");
  if (qps < 1 || qps > kMaxQpsPerConnection) {
    fail(tidalInvalidArgument, "rank {}: TIDAL_IB_QPS_PER_CONNECTION={} is out of range 1..{}",
         rank, qps, kMaxQpsPerConnection);
  }
  const int64_t eager = params::getInt("TIDAL_IB_EAGER_BYTES");
  if (eager < 0 || eager > kMaxEagerBytes) {
    fail(tidalInvalidArgument, "rank {}: TIDAL_IB_EAGER_BYTES={} is out of range 0..{}", rank,
         eager, kMaxEagerBytes);
  }
  g.nqps = static_cast<uint32_t>(qps);
  g.eagerBytes = static_cast<uint32_t>(eager);
  g.eagerSlots = kEagerSlots;
  return g;
}

// The ports topology prefers for this rank: the NICs nearest its GPU, as
// communicator init chose them (TransportContext::placement). Empty, leaving
// rank mod ports, when TIDAL_IB_HCA chose the ports (it overrides) or there
// is no placement.
std::vector<std::string> topologyPreference(const HcaSpec& spec, const topo::Placement* placement) {
  if (!spec.items.empty() || placement == nullptr) return {};
  return placement->choice.nics;
}

// What TIDAL_NET_GDR_LEVEL says about GDR between the rank's GPU and `port`;
// nullopt when the topology has no word (no GPU, or the port is not in it).
std::optional<GdrDistance> gdrDistance(const topo::Placement* placement, const std::string& port) {
  if (placement == nullptr) return std::nullopt;
  const auto d = topo::gdrForNic(placement->topology, placement->choice, port, placement->gdrLevel);
  if (!d) return std::nullopt;
  return GdrDistance{d->on, d->reason};
}

}  // namespace

IbTransport::IbTransport(const TransportContext& ctx)
    : ctx_(ctx), geometry_(geometryFromParams(ctx.rank)), options_(qpOptionsFromParams(ctx.rank)) {}

IbTransport::~IbTransport() {
  if (device_) {
    for (auto& [ptr, entry] : pinned_) device_->cache().unpin(entry);
  }
}

bool IbTransport::supports(MemoryKind kind) const {
  if (kind == MemoryKind::Host) return true;
  return device_ && device_->gpu().mode() != GpuDirect::Mode::Off;
}

ConnectHandle IbTransport::listen() {
  const bool forced = params::getString("TIDAL_NET") == "ib";
  // Settings the user wrote are checked first, whatever else happens: a
  // typo must not turn into a silent fallback to tcp.
  const HcaSpec spec = parseHcaSpec(params::getString("TIDAL_IB_HCA"));
  const GidPolicy policy = gidPolicyFromParams(ctx_.rank);
  const std::string gdr = params::getString("TIDAL_GDR");
  auto notOffered = [&](const std::string& why) -> ConnectHandle {
    if (forced) {
      fail(tidalInvalidUsage,
           "rank {}: TIDAL_NET=ib but this rank has no usable RDMA port: {}. Check 'ibv_devinfo' "
           "and TIDAL_IB_HCA, or unset TIDAL_NET to let pairs fall back to tcp",
           ctx_.rank, why);
    }
    TIDAL_INFO(Net, "rank {}: ib not offered: {}", ctx_.rank, why);
    return {};
  };
  std::string why;
  const VerbsApi* api = VerbsApi::load(&why);
  if (api == nullptr) return notOffered(why);
  const PortScan scan = scanPorts(*api, spec);
  if (scan.usable.empty()) {
    if (scan.ports == 0) return notOffered(scan.seen);
    return notOffered(fmt::format("no active port{}; ports: {}",
                                  spec.items.empty() ? "" : " selected by TIDAL_IB_HCA",
                                  scan.seen));
  }
  std::vector<std::string> usableNames;
  for (const auto& p : scan.usable) usableNames.push_back(fmt::format("{}:{}", p.device, p.port));
  const topo::Placement* placement = ctx_.placement.get();
  const size_t picked = pickPort(usableNames, topologyPreference(spec, placement), ctx_.rank);
  const PortCandidate& port = scan.usable[picked];
  try {
    device_ = IbDevice::open(*api, port, policy, gdr, ctx_.rank,
                             gdrDistance(placement, usableNames[picked]));
  } catch (const Error& e) {
    // A GID choice the user asked for, or TIDAL_GDR=1, fails loudly; a
    // device that merely cannot be used falls back unless ib is forced.
    if (forced || e.code() == tidalInvalidArgument) throw;
    return notOffered(e.what());
  }
  listener_ = Socket::listenOn(localInterfaceAddress());
  listener_.setNonBlocking();
  const SocketAddress address = listener_.localAddress();
  acceptor_ = std::make_unique<HelloAcceptor>(
      listener_, wire::MsgType::IbHello, sizeof(Secret) + kHelloBodyBytes, ctx_.secret,
      fmt::format("rank {}: ib set-up listener {}", ctx_.rank, address.toString()),
      log::Subsys::Net);
  TIDAL_INFO(Net, "rank {}: ib listening for set-up on {}; ports seen: {}", ctx_.rank,
             address.toString(), scan.seen);
  ListenInfo info;
  info.sideChannel = address;
  info.port.lid = device_->lid();
  info.port.gid = device_->gid().raw;
  info.port.gidIndex = static_cast<uint32_t>(device_->gid().index);
  info.port.mtu = device_->activeMtu();
  info.port.ethernet = device_->ethernet();
  return encodeListenInfo(info);
}

std::unique_ptr<Connection> IbTransport::connectSend(int peer, const ConnectHandle& peerHandle,
                                                     Deadline deadline) {
  if (!device_) {
    fail(tidalInternalError, "rank {}: ib connection to rank {} without a device", ctx_.rank, peer);
  }
  if (peerHandle.empty()) {
    fail(tidalInvalidUsage, "rank {}: rank {} offers no ib (no usable RDMA port there)", ctx_.rank,
         peer);
  }
  const ListenInfo info = decodeListenInfo(peerHandle, ctx_.rank, peer);
  if (info.port.ethernet != device_->ethernet() ||
      (device_->ethernet() &&
       GidEntry{0, info.port.gid, ""}.ipv4Mapped() != device_->gid().ipv4Mapped())) {
    fail(tidalInvalidArgument,
         "rank {}: cannot reach rank {} over ib: this rank uses {}, rank {} uses GID index {} "
         "({}, {}). Set TIDAL_IB_GID_INDEX or TIDAL_IB_ADDR_FAMILY so that every rank uses the "
         "same kind of address",
         ctx_.rank, peer, device_->whereText(), peer, info.port.gidIndex,
         GidEntry{0, info.port.gid, ""}.address(), info.port.ethernet ? "RoCE" : "InfiniBand");
  }
  Socket s = Socket::connectTo(info.sideChannel, deadline,
                               fmt::format("rank {} ib set-up listener", peer));
  s.setNoDelay();
  return std::make_unique<IbSendConnection>(device_, ctx_, peer, info, geometry_, options_,
                                            std::move(s), deadline);
}

std::string IbTransport::helloProblem(const Hello& h) const {
  if (h.toRank != ctx_.rank || h.fromRank < 0 || h.fromRank >= ctx_.nranks) {
    return fmt::format("inconsistent ranks (from {} to {})", h.fromRank, h.toRank);
  }
  if (h.geometry.nqps < 1 || h.geometry.nqps > kMaxQpsPerConnection ||
      h.geometry.eagerBytes > kMaxEagerBytes || h.geometry.eagerSlots < 1 ||
      h.geometry.eagerSlots > 1024) {
    return "bad connection geometry";
  }
  if (h.port.ethernet != device_->ethernet()) {
    return fmt::format("rank {} is on {}, this rank on {}", h.fromRank,
                       h.port.ethernet ? "RoCE" : "InfiniBand", device_->pathText());
  }
  if (arrived_.count(h.fromRank)) return "duplicate connection for that rank";
  return {};
}

void IbTransport::file(AcceptedHello& accepted) {
  Hello hello;
  std::string problem;
  try {
    hello = decodeHello(accepted.body);
    problem = helloProblem(hello);
  } catch (const Error& e) {
    problem = e.what();
  }
  if (!problem.empty()) {
    acceptor_->warnDropped(accepted.peer, problem);
    wire::sendReject(accepted.socket, tidalInvalidUsage,
                     fmt::format("rank {} refused the ib connection: {}", ctx_.rank, problem));
    return;
  }
  arrived_.emplace(hello.fromRank, std::move(accepted));
}

std::unique_ptr<Connection> IbTransport::acceptRecv(int peer, Deadline deadline) {
  if (!acceptor_) {
    fail(tidalInternalError, "rank {}: ib accept from rank {} without a listener", ctx_.rank, peer);
  }
  acceptor_->serveUntil([&] { return arrived_.count(peer) != 0; },
                        [&](AcceptedHello& hello) { file(hello); }, deadline, aborted_,
                        fmt::format("rank {} to open its ib connection", peer));
  auto it = arrived_.find(peer);
  AcceptedHello accepted = std::move(it->second);
  arrived_.erase(it);
  const Hello hello = decodeHello(accepted.body);
  return std::make_unique<IbRecvConnection>(device_, ctx_.rank, hello, options_,
                                            std::move(accepted.socket), deadline);
}

MemoryRegistration IbTransport::registerMemory(void* ptr, size_t bytes, MemoryKind kind) {
  if (!device_) {
    fail(tidalInvalidUsage, "rank {}: ib registerMemory before listen (or ib not offered)",
         ctx_.rank);
  }
  const GpuDirect* gpu = device_->gpu().mode() == GpuDirect::Mode::Off ? nullptr : &device_->gpu();
  RegistrationCache::Entry* e = device_->cache().pin(ptr, bytes, kind, gpu);
  pinned_[ptr] = e;
  return {ptr, bytes, kind, e->mr->rkey};
}

void IbTransport::deregisterMemory(const MemoryRegistration& registration) {
  auto it = pinned_.find(registration.ptr);
  if (it == pinned_.end()) return;
  device_->cache().unpin(it->second);
  pinned_.erase(it);
}

void IbTransport::abort() {
  aborted_ = true;
  if (listener_.valid()) listener_.shutdownBoth();
}

}  // namespace tidal::ib
