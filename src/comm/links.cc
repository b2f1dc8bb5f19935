#include "comm/links.h"

#include <algorithm>
#include <cstring>

#include "comm/host_identity.h"
#include "core/error.h"
#include "core/log.h"
#include "core/params.h"

namespace tidal {

namespace {
// Bootstrap record slots: one per transport a rank may listen on.
constexpr size_t kMaxTransports = 8;
}  // namespace

// What every rank tells every other at init: where it is and how to reach it
// over each transport it listens on. Fixed-size slots keep the exchange one
// bounded allGather.
struct Links::Record {
  char hostId[kMaxHostIdBytes];
  uint32_t transportCount;
  struct Slot {
    uint16_t length;
    uint8_t bytes[kMaxConnectHandleBytes];
  } handles[kMaxTransports];
};

Links::Links(int rank, int nranks, Bootstrap& bootstrap, Engine& engine,
             std::shared_ptr<const topo::Placement> placement)
    : rank_(rank),
      nranks_(nranks),
      bootstrap_(bootstrap),
      engine_(engine),
      placement_(std::move(placement)) {}

Links::~Links() = default;

void Links::exchange() {
  forcedNet_ = params::getString("TIDAL_NET");
  shmDisabled_ = params::getBool("TIDAL_SHM_DISABLE");
  const std::vector<std::string> names =
      forcedNet_.empty() ? availableTransports() : std::vector<std::string>{forcedNet_};
  if (names.size() > kMaxTransports) {
    fail(tidalInternalError, "rank {}: {} transports exceed the {} bootstrap slots", rank_,
         names.size(), kMaxTransports);
  }
  auto mine = std::make_unique<Record>();
  std::memset(mine.get(), 0, sizeof(Record));
  const std::string host = localHostIdentity();
  std::memcpy(mine->hostId, host.data(), std::min(host.size(), kMaxHostIdBytes));
  mine->transportCount = static_cast<uint32_t>(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    auto t = createTransport(names[i], {rank_, nranks_, bootstrap_.secret(), placement_});
    const ConnectHandle h = t->listen();
    if (h.size() > kMaxConnectHandleBytes) {
      fail(tidalInternalError, "rank {}: {} handle of {} bytes is too large", rank_, names[i],
           h.size());
    }
    mine->handles[i].length = static_cast<uint16_t>(h.size());
    // An empty handle (a transport that needs none) may have a null data():
    // memcpy from null is undefined even for zero bytes (UBSan says so).
    if (!h.empty()) std::memcpy(mine->handles[i].bytes, h.data(), h.size());
    transportOrder_.push_back(names[i]);
    transports_[names[i]] = std::move(t);
  }
  records_.resize(static_cast<size_t>(nranks_));
  bootstrap_.allGather(mine.get(), records_.data(), sizeof(Record));
  for (int r = 0; r < nranks_; ++r) {
    const Record& rec = records_[static_cast<size_t>(r)];
    if (rec.transportCount != mine->transportCount) {
      fail(tidalInvalidUsage,
           "rank {}: rank {} offers {} transports and this rank {}: set TIDAL_NET the same on "
           "every rank",
           rank_, r, rec.transportCount, mine->transportCount);
    }
    hostOfRank_.emplace_back(rec.hostId, strnlen(rec.hostId, kMaxHostIdBytes));
  }
  engine_.setLinkOpener(this);
}

std::string Links::chooseTransport(int peer) const {
  if (!forcedNet_.empty()) return forcedNet_;
  const bool sameHost =
      hostOfRank_[static_cast<size_t>(rank_)] == hostOfRank_[static_cast<size_t>(peer)];
  if (sameHost && !shmDisabled_ && transports_.count("shm")) return "shm";
  // A transport whose listen() returned an empty handle is not offered by
  // that rank (ib without an active RDMA port): both ends must offer it.
  const auto offers = [&](int r, const std::string& name) {
    const auto it = std::find(transportOrder_.begin(), transportOrder_.end(), name);
    if (it == transportOrder_.end()) return false;
    const auto index = static_cast<size_t>(it - transportOrder_.begin());
    return records_[static_cast<size_t>(r)].handles[index].length > 0;
  };
  if (offers(rank_, "ib") && offers(peer, "ib")) return "ib";
  // Offered where EFA is or TIDAL_OFI_PROVIDER asks for it (ofi_transport.h).
  if (offers(rank_, "ofi") && offers(peer, "ofi")) return "ofi";
  return "tcp";
}

ConnectHandle Links::handleOf(int peer, const std::string& transport) const {
  const auto index =
      static_cast<size_t>(std::find(transportOrder_.begin(), transportOrder_.end(), transport) -
                          transportOrder_.begin());
  const auto& slot = records_[static_cast<size_t>(peer)].handles[index];
  if (slot.length > kMaxConnectHandleBytes) {
    fail(tidalRemoteError, "rank {}: rank {} sent a malformed {} handle", rank_, peer, transport);
  }
  return ConnectHandle(slot.bytes, slot.bytes + slot.length);
}

Connection& Links::openSend(int peer, const char* what) {
  if (auto it = sendTo_.find(peer); it != sendTo_.end()) return *it->second;
  if (peer < 0 || peer >= nranks_ || records_.empty()) {
    fail(tidalInternalError, "rank {}: {} names rank {}, which has no link", rank_, what, peer);
  }
  const std::string name = chooseTransport(peer);
  auto c = transports_.at(name)->connectSend(peer, handleOf(peer, name), deadlineFromNow());
  engine_.addSendConnection(peer, c.get());
  TIDAL_INFO(Init, "rank {} -> {}: {}", rank_, peer, c->describe());
  std::lock_guard lock(mutex_);
  return *(sendTo_[peer] = std::move(c));
}

Connection& Links::openRecv(int peer, const char* what) {
  if (auto it = recvFrom_.find(peer); it != recvFrom_.end()) return *it->second;
  if (peer < 0 || peer >= nranks_ || records_.empty()) {
    fail(tidalInternalError, "rank {}: {} names rank {}, which has no link", rank_, what, peer);
  }
  const std::string name = chooseTransport(peer);
  auto c = transports_.at(name)->acceptRecv(peer, deadlineFromNow());
  engine_.addRecvConnection(peer, c.get());
  TIDAL_INFO(Init, "rank {} <- {}: {}", rank_, peer, c->describe());
  std::lock_guard lock(mutex_);
  return *(recvFrom_[peer] = std::move(c));
}

void Links::connect(const std::set<int>& sendPeers, const std::set<int>& recvPeers) {
  for (int peer : sendPeers) openSend(peer, "init");
  for (int peer : recvPeers) openRecv(peer, "init");
}

void Links::abortConnections() {
  std::lock_guard lock(mutex_);
  for (auto& [peer, c] : sendTo_) c->abort();
  for (auto& [peer, c] : recvFrom_) c->abort();
}

void Links::abortTransports() {
  for (auto& [name, t] : transports_) t->abort();
}

std::vector<std::shared_ptr<KeptOpen>> Links::keepOpenUntilAllDone() {
  std::vector<std::shared_ptr<KeptOpen>> held;
  for (auto& [name, t] : transports_) {
    if (std::shared_ptr<KeptOpen> h = t->keepOpenUntilAllDone()) held.push_back(std::move(h));
  }
  return held;
}

}  // namespace tidal
