#include "transports/ib/ib_transport.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "topology/placement.h"
#include "transports/ib/ib_rails_connection.h"
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

size_t maxRailsFromParams(int rank) {
  const int64_t rails = params::getInt("TIDAL_IB_MAX_RAILS");
  if (rails < 1 || rails > static_cast<int64_t>(kMaxRails)) {
    fail(tidalInvalidArgument, "rank {}: TIDAL_IB_MAX_RAILS={} is out of range 1..{}", rank, rails,
         kMaxRails);
  }
  return static_cast<size_t>(rails);
}

// Where this rank's rails come from (pickRails): the NICs nearest its GPU,
// as communicator init chose them (TransportContext::placement), `nearest`
// when the topology restricted the rank to them. When TIDAL_IB_HCA chose the
// ports (it overrides): no preference, and `listed` unless it only excludes.
// Nothing, leaving rank mod ports, without a placement.
RailSource topologyPreference(const HcaSpec& spec, const topo::Placement* placement) {
  if (!spec.items.empty()) return {{}, false, !spec.exclude};
  if (placement == nullptr) return {};
  return {placement->choice.nics, placement->choice.path.has_value(), false};
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
    : ctx_(ctx),
      geometry_(geometryFromParams(ctx.rank)),
      options_(qpOptionsFromParams(ctx.rank)),
      maxRails_(maxRailsFromParams(ctx.rank)) {}

IbTransport::~IbTransport() {
  for (auto& [ptr, entries] : pinned_) {
    for (size_t r = 0; r < entries.size(); ++r) devices_[r]->cache().unpin(entries[r]);
  }
}

bool IbTransport::supports(MemoryKind kind) const {
  if (kind == MemoryKind::Host) return true;
  // Every rail must reach GPU memory: a transfer may be striped over all.
  return !devices_.empty() && std::all_of(devices_.begin(), devices_.end(), [](const auto& d) {
    return d->gpu().mode() != GpuDirect::Mode::Off;
  });
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
  const RailSource source = topologyPreference(spec, placement);
  const std::vector<size_t> rails = pickRails(usableNames, source, ctx_.rank, maxRails_);
  try {
    for (size_t index : rails) {
      devices_.push_back(IbDevice::open(*api, scan.usable[index], policy, gdr, ctx_.rank,
                                        gdrDistance(placement, usableNames[index])));
    }
  } catch (const Error& e) {
    // A GID choice the user asked for, or TIDAL_GDR=1, fails loudly; a
    // device that merely cannot be used falls back unless ib is forced.
    devices_.clear();
    if (forced || e.code() == tidalInvalidArgument) throw;
    return notOffered(e.what());
  }
  if (rails.size() > 1) {
    std::string names;
    for (size_t index : rails) names += (names.empty() ? "" : ", ") + usableNames[index];
    TIDAL_INFO(Net, "rank {}: ib stripes over {} rails: {} ({})", ctx_.rank, rails.size(), names,
               source.listed ? "the ports TIDAL_IB_HCA lists" : "the topology's nearest NICs");
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
  for (const auto& d : devices_) {
    RailAddress rail;
    rail.name = fmt::format("{}:{}", d->name(), d->port());
    rail.port.lid = d->lid();
    rail.port.gid = d->gid().raw;
    rail.port.gidIndex = static_cast<uint32_t>(d->gid().index);
    rail.port.mtu = d->activeMtu();
    rail.port.ethernet = d->ethernet();
    info.rails.push_back(rail);
  }
  return encodeListenInfo(info);
}

void IbTransport::logRailFallback(int peer, const ListenInfo& info, size_t used) const {
  auto names = [](const std::vector<std::string>& all, size_t from) {
    std::string s;
    for (size_t i = from; i < all.size(); ++i) s += (s.empty() ? "" : ", ") + all[i];
    return s;
  };
  std::vector<std::string> mine, theirs;
  for (const auto& d : devices_) mine.push_back(fmt::format("{}:{}", d->name(), d->port()));
  for (const auto& r : info.rails) theirs.push_back(r.name);
  std::string dropped;
  if (mine.size() > used) dropped = fmt::format("{} of rank {}", names(mine, used), ctx_.rank);
  if (theirs.size() > used) dropped = fmt::format("{} of rank {}", names(theirs, used), peer);
  TIDAL_INFO(Net,
             "rank {} -> {}: ib multi-rail falls back to the {} rail{} both ranks have (NIC i "
             "pairs with NIC i): rank {} offers [{}], rank {} offers [{}]; dropped {}",
             ctx_.rank, peer, used, used == 1 ? "" : "s", ctx_.rank, names(mine, 0), peer,
             names(theirs, 0), dropped);
}

std::unique_ptr<Connection> IbTransport::connectSend(int peer, const ConnectHandle& peerHandle,
                                                     Deadline deadline) {
  if (devices_.empty()) {
    fail(tidalInternalError, "rank {}: ib connection to rank {} without a device", ctx_.rank, peer);
  }
  if (peerHandle.empty()) {
    fail(tidalInvalidUsage, "rank {}: rank {} offers no ib (no usable RDMA port there)", ctx_.rank,
         peer);
  }
  const ListenInfo info = decodeListenInfo(peerHandle, ctx_.rank, peer);
  const size_t used = std::min(devices_.size(), info.rails.size());
  if (used < std::max(devices_.size(), info.rails.size())) logRailFallback(peer, info, used);
  for (size_t r = 0; r < used; ++r) {
    const IbDevice& device = *devices_[r];
    const PortAddress& port = info.rails[r].port;
    if (port.ethernet != device.ethernet() ||
        (device.ethernet() &&
         GidEntry{0, port.gid, ""}.ipv4Mapped() != device.gid().ipv4Mapped())) {
      fail(tidalInvalidArgument,
           "rank {}: cannot reach rank {} over ib: this rank uses {}, rank {} uses GID index {} "
           "({}, {}). Set TIDAL_IB_GID_INDEX or TIDAL_IB_ADDR_FAMILY so that every rank uses "
           "the same kind of address",
           ctx_.rank, peer, device.whereText(), peer, port.gidIndex,
           GidEntry{0, port.gid, ""}.address(), port.ethernet ? "RoCE" : "InfiniBand");
    }
  }
  std::vector<std::unique_ptr<IbConnection>> rails;
  for (size_t r = 0; r < used; ++r) {
    Socket s = Socket::connectTo(info.sideChannel, deadline,
                                 fmt::format("rank {} ib set-up listener", peer));
    s.setNoDelay();
    const RailSlot slot{static_cast<uint32_t>(r), static_cast<uint32_t>(used),
                        static_cast<uint32_t>(devices_.size())};
    rails.push_back(std::make_unique<IbSendConnection>(devices_[r], ctx_, peer, info.rails[r].port,
                                                       slot, geometry_, options_, std::move(s),
                                                       deadline));
  }
  return joinRails(std::move(rails));
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
  const size_t common = std::min<size_t>(devices_.size(), h.rail.offered);
  if (h.rail.count < 1 || h.rail.index >= h.rail.count || h.rail.count != common) {
    return fmt::format(
        "rail {} of {} does not fit: rank {} offers {} NICs and this rank {}, so {} rails are "
        "common (mixed Tidal versions?)",
        h.rail.index, h.rail.count, h.fromRank, h.rail.offered, devices_.size(), common);
  }
  const IbDevice& device = *devices_[h.rail.index];
  if (h.port.ethernet != device.ethernet()) {
    return fmt::format("rank {} is on {}, this rank on {}", h.fromRank,
                       h.port.ethernet ? "RoCE" : "InfiniBand", device.pathText());
  }
  if (arrived_.count({h.fromRank, h.rail.index})) return "duplicate connection for that rank";
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
  arrived_.emplace(std::pair<int, uint32_t>{hello.fromRank, hello.rail.index}, std::move(accepted));
}

AcceptedHello IbTransport::awaitHello(int peer, uint32_t rail, Deadline deadline) {
  const std::pair<int, uint32_t> key{peer, rail};
  acceptor_->serveUntil([&] { return arrived_.count(key) != 0; },
                        [&](AcceptedHello& hello) { file(hello); }, deadline, aborted_,
                        fmt::format("rank {} to open its ib connection", peer));
  auto it = arrived_.find(key);
  AcceptedHello accepted = std::move(it->second);
  arrived_.erase(it);
  return accepted;
}

std::unique_ptr<Connection> IbTransport::acceptRecv(int peer, Deadline deadline) {
  if (!acceptor_) {
    fail(tidalInternalError, "rank {}: ib accept from rank {} without a listener", ctx_.rank, peer);
  }
  // Rail 0's hello says how many rails the sender set up; each rail's
  // receive side replies as soon as its hello is here.
  std::vector<std::unique_ptr<IbConnection>> rails;
  uint32_t count = 1;
  for (uint32_t r = 0; r < count; ++r) {
    AcceptedHello accepted = awaitHello(peer, r, deadline);
    const Hello hello = decodeHello(accepted.body);
    if (r == 0) count = hello.rail.count;
    if (hello.rail.count != count) {
      fail(tidalRemoteError, "rank {}: rank {} set up rail {} of {} after saying {} rails",
           ctx_.rank, peer, r, hello.rail.count, count);
    }
    rails.push_back(std::make_unique<IbRecvConnection>(devices_[r], ctx_.rank, hello, options_,
                                                       std::move(accepted.socket), deadline));
  }
  return joinRails(std::move(rails));
}

MemoryRegistration IbTransport::registerMemory(void* ptr, size_t bytes, MemoryKind kind) {
  if (devices_.empty()) {
    fail(tidalInvalidUsage, "rank {}: ib registerMemory before listen (or ib not offered)",
         ctx_.rank);
  }
  // With its rails' every device: a striped transfer reads or writes it
  // through each of them.
  std::vector<RegistrationCache::Entry*> entries;
  try {
    for (const auto& d : devices_) {
      const GpuDirect* gpu = d->gpu().mode() == GpuDirect::Mode::Off ? nullptr : &d->gpu();
      entries.push_back(pinMemory(d->cache(), d->pd(), ptr, bytes, kind, gpu, d->whereText()));
    }
  } catch (...) {
    for (size_t r = 0; r < entries.size(); ++r) devices_[r]->cache().unpin(entries[r]);
    throw;
  }
  const uint32_t rkey = entries.front()->mr->rkey;
  pinned_[ptr] = std::move(entries);
  return {ptr, bytes, kind, rkey};
}

void IbTransport::deregisterMemory(const MemoryRegistration& registration) {
  auto it = pinned_.find(registration.ptr);
  if (it == pinned_.end()) return;
  for (size_t r = 0; r < it->second.size(); ++r) devices_[r]->cache().unpin(it->second[r]);
  pinned_.erase(it);
}

void IbTransport::abort() {
  aborted_ = true;
  if (listener_.valid()) listener_.shutdownBoth();
}

}  // namespace tidal::ib
