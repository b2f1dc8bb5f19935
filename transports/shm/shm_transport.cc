#include "transports/shm/shm_transport.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"

namespace tidal::shm {

namespace {

constexpr uint32_t kHelloMagic = 0x5444534du;  // "TDSM"
// 2: transfers start at 64-byte boundaries of the stream (reduce on arrival);
// 3: the sender restarts at the ring's beginning when the ring is empty.
constexpr uint16_t kHelloVersion = 3;
constexpr size_t kHelloFds = 3;  // segment, data-ready, space-ready
// A connection that has not said hello within this long is dropped.
constexpr auto kHelloPatience = std::chrono::seconds(5);
constexpr int64_t kMaxSlots = 1024;
constexpr int64_t kMinSlotBytes = 4096;
constexpr int64_t kMaxSlotBytes = int64_t{64} << 20;

struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  int32_t fromRank;
  int32_t toRank;
  uint8_t secret[16];
  uint64_t slots;
  uint64_t slotBytes;
};
static_assert(sizeof(Hello) == 48);

// Identifies this host and network namespace: abstract unix sockets are
// per network namespace, so two ranks with equal keys can reach each other.
std::string localHostKey() {
  std::string bootId;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> bootId;
  struct stat st {};
  ::stat("/proc/self/ns/net", &st);
  return fmt::format("{}/{}", bootId, st.st_ino);
}

sockaddr_un abstractAddress(const std::string& name, socklen_t* length) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // sun_path[0] = '\0' selects the abstract namespace; the name is not
  // NUL-terminated and its length is part of the address.
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return addr;
}

UniqueFd seqpacketSocket() {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(tidalSystemError, "unix socket failed: {}", errnoText(errno));
  return UniqueFd(fd);
}

// "pid 1234 uid 1000" of the process at the other end, for warnings.
std::string peerCredentials(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return "unknown process";
  return fmt::format("pid {} uid {}", cred.pid, cred.uid);
}

std::string sizeText(size_t bytes) {
  if (bytes % (1 << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

}  // namespace

struct ShmTransport::Pending {
  UniqueFd socket;
  std::string from;
  Clock::time_point since = Clock::now();
};

ShmTransport::~ShmTransport() = default;

ShmTransport::ShmTransport(const TransportContext& ctx) : ctx_(ctx) {
  const int64_t slots = params::getInt("TIDAL_SHM_SLOTS");
  const int64_t slotBytes = params::getInt("TIDAL_SHM_SLOT_BYTES");
  if (slots < 1 || slots > kMaxSlots) {
    fail(tidalInvalidArgument, "rank {}: TIDAL_SHM_SLOTS={} is out of range 1..{}", ctx.rank, slots,
         kMaxSlots);
  }
  if (slotBytes < kMinSlotBytes || slotBytes > kMaxSlotBytes || slotBytes % kMinSlotBytes != 0) {
    fail(tidalInvalidArgument,
         "rank {}: TIDAL_SHM_SLOT_BYTES={} is not a multiple of {} in the range {}..{}", ctx.rank,
         slotBytes, kMinSlotBytes, kMinSlotBytes, kMaxSlotBytes);
  }
  slots_ = static_cast<size_t>(slots);
  slotBytes_ = static_cast<size_t>(slotBytes);
  hostKey_ = localHostKey();
}

ConnectHandle ShmTransport::listen() {
  uint64_t tag = 0;
  if (::getrandom(&tag, sizeof tag, 0) != sizeof tag) {
    fail(tidalSystemError, "rank {}: getrandom for the shm socket name failed: {}", ctx_.rank,
         errnoText(errno));
  }
  socketName_ = fmt::format("tidal-shm-{}-{:016x}", ::getpid(), tag);
  listener_ = seqpacketSocket();
  socklen_t length;
  const sockaddr_un addr = abstractAddress(socketName_, &length);
  if (::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&addr), length) != 0 ||
      ::listen(listener_.get(), SOMAXCONN) != 0) {
    fail(tidalSystemError, "rank {}: shm listen on @{} failed: {}", ctx_.rank, socketName_,
         errnoText(errno));
  }
  TIDAL_INFO(Net, "rank {}: shm listening on @{}", ctx_.rank, socketName_);
  const std::string text = hostKey_ + " " + socketName_;
  return ConnectHandle(text.begin(), text.end());
}

std::unique_ptr<Connection> ShmTransport::connectSend(int peer, const ConnectHandle& peerHandle,
                                                      Deadline deadline) {
  const std::string text(peerHandle.begin(), peerHandle.end());
  const size_t space = text.find(' ');
  if (space == std::string::npos || space + 1 >= text.size() ||
      text.size() - space - 1 > sizeof(sockaddr_un::sun_path) - 1) {
    fail(tidalInternalError, "rank {}: malformed shm handle from rank {}", ctx_.rank, peer);
  }
  if (text.substr(0, space) != hostKey_) {
    fail(tidalInvalidArgument,
         "rank {}: rank {} is on another host or network namespace; the shm transport "
         "(TIDAL_NET=shm) needs every rank on one host",
         ctx_.rank, peer);
  }
  const std::string name = text.substr(space + 1);
  const std::string what =
      fmt::format("rank {}: shm connection to rank {} (@{})", ctx_.rank, peer, name);

  UniqueFd sock = seqpacketSocket();
  socklen_t length;
  const sockaddr_un addr = abstractAddress(name, &length);
  for (;;) {
    if (::connect(sock.get(), reinterpret_cast<const sockaddr*>(&addr), length) == 0) break;
    if (errno == EINTR) continue;
    // A full backlog: the peer is alive but busy accepting others.
    if (errno != EAGAIN) fail(tidalRemoteError, "{}: connect failed: {}", what, errnoText(errno));
    if (aborted_) fail(tidalRemoteError, "{}: aborted", what);
    if (Clock::now() > deadline) {
      fail(tidalTimeout,
           "{}: timed out after TIDAL_TIMEOUT={} s: the listener's backlog stayed "
           "full",
           what, timeoutSeconds());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  // The segment: anonymous memory with a descriptor, shared by passing it.
  const size_t bytes = segmentBytes(slots_, slotBytes_);
  const std::string memfdName = fmt::format("tidal-shm-{}-to-{}", ctx_.rank, peer);
  UniqueFd memfd(::memfd_create(memfdName.c_str(), MFD_CLOEXEC));
  if (!memfd.valid()) fail(tidalSystemError, "{}: memfd_create failed: {}", what, errnoText(errno));
  if (::ftruncate(memfd.get(), static_cast<off_t>(bytes)) != 0) {
    fail(tidalSystemError, "{}: sizing the {} segment failed: {}", what, sizeText(bytes),
         errnoText(errno));
  }
  Mapping segment(memfd.get(), bytes, false, what);
  // Huge pages where shmem allows them (shmem_enabled=advise); harmless if not.
  ::madvise(segment.data(), bytes, MADV_HUGEPAGE);
  // Touch every page now: a first touch costs microseconds, and the data path
  // must not take page faults.
  std::memset(segment.data(), 0, bytes);
  auto* control = new (segment.data()) RingControl{};
  control->magic = kSegmentMagic;
  control->slots = slots_;
  control->slotBytes = slotBytes_;
  control->restartFrom = ~uint64_t{0};

  ShmConnection::Parts parts;
  parts.dataReady = makeEventFd(what);
  parts.spaceReady = makeEventFd(what);
  Hello hello{kHelloMagic, kHelloVersion, 0, ctx_.rank, peer, {}, slots_, slotBytes_};
  std::memcpy(hello.secret, ctx_.secret.data(), sizeof hello.secret);
  const std::vector<int> fds{memfd.get(), parts.dataReady.get(), parts.spaceReady.get()};
  while (!sendWithFds(sock.get(), &hello, sizeof hello, fds, what)) {
    if (aborted_) fail(tidalRemoteError, "{}: aborted", what);
    if (Clock::now() > deadline) fail(tidalTimeout, "{}: timed out sending the hello", what);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  parts.socket = std::move(sock);
  parts.segment = std::move(segment);
  return std::make_unique<ShmConnection>(
      ctx_.rank, peer, ShmConnection::Direction::Send, std::move(parts),
      fmt::format("shm ring {}x{} via @{}", slots_, sizeText(slotBytes_), name));
}

bool ShmTransport::servicePending(Pending& p) {
  Hello h{};
  Received r = receiveWithFds(p.socket.get(), &h, sizeof h, kHelloFds);
  if (r.status == Received::Status::WouldBlock) {
    if (Clock::now() - p.since > kHelloPatience) {
      TIDAL_WARN(Net, "rank {}: dropped shm connection from {}: no hello within {} s", ctx_.rank,
                 p.from, kHelloPatience.count());
      return true;
    }
    return false;
  }
  if (r.status == Received::Status::Closed) {
    TIDAL_WARN(Net, "rank {}: dropped shm connection from {}: closed before its hello", ctx_.rank,
               p.from);
    return true;
  }
  Secret secret;
  std::memcpy(secret.data(), h.secret, secret.size());
  struct stat st {};
  const char* problem = nullptr;
  if (r.bytes != sizeof h || r.truncated || r.fds.size() != kHelloFds || h.magic != kHelloMagic) {
    problem = "not a Tidal shm connection (bad hello)";
  } else if (h.version != kHelloVersion) {
    problem = "protocol version mismatch";
  } else if (!secretsEqual(secret, ctx_.secret)) {
    problem = "wrong job secret";
  } else if (h.toRank != ctx_.rank || h.fromRank < 0 || h.fromRank >= ctx_.nranks) {
    problem = "inconsistent ranks";
  } else if (h.slots < 1 || h.slots > kMaxSlots || h.slotBytes < kMinSlotBytes ||
             h.slotBytes % kMinSlotBytes != 0 || h.slotBytes > kMaxSlotBytes ||
             ::fstat(r.fds[0].get(), &st) != 0 ||
             static_cast<uint64_t>(st.st_size) != segmentBytes(h.slots, h.slotBytes)) {
    problem = "bad segment geometry";
  } else if (arrived_.count(h.fromRank)) {
    problem = "duplicate connection for that rank";
  }
  if (problem) {
    TIDAL_WARN(Net, "rank {}: refused shm connection from {} (claims rank {}): {}", ctx_.rank,
               p.from, h.fromRank, problem);
    return true;
  }
  const std::string what =
      fmt::format("rank {}: shm connection from rank {}", ctx_.rank, h.fromRank);
  ShmConnection::Parts parts;
  parts.segment = Mapping(r.fds[0].get(), static_cast<size_t>(st.st_size), true, what);
  const auto* control = reinterpret_cast<const RingControl*>(parts.segment.data());
  if (control->magic != kSegmentMagic || control->slots != h.slots ||
      control->slotBytes != h.slotBytes) {
    TIDAL_WARN(Net, "rank {}: refused shm connection from {} (claims rank {}): bad segment",
               ctx_.rank, p.from, h.fromRank);
    return true;
  }
  parts.dataReady = std::move(r.fds[1]);
  parts.spaceReady = std::move(r.fds[2]);
  parts.socket = std::move(p.socket);
  arrived_.emplace(h.fromRank, std::move(parts));
  return true;
}

std::unique_ptr<Connection> ShmTransport::acceptRecv(int peer, Deadline deadline) {
  while (!arrived_.count(peer)) {
    if (aborted_) {
      fail(tidalRemoteError, "rank {}: aborted while accepting rank {}", ctx_.rank, peer);
    }
    if (Clock::now() > deadline) {
      fail(tidalTimeout,
           "rank {}: timed out after TIDAL_TIMEOUT={} s waiting for rank {} to connect to shm "
           "listener @{}",
           ctx_.rank, timeoutSeconds(), peer, socketName_);
    }
    std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
    for (auto& p : pending_) fds.push_back({p.socket.get(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), std::min(100, pollTimeoutMs(deadline)));
    for (;;) {
      const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      pending_.push_back(Pending{UniqueFd(fd), peerCredentials(fd)});
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      it = servicePending(*it) ? pending_.erase(it) : std::next(it);
    }
  }
  auto it = arrived_.find(peer);
  ShmConnection::Parts parts = std::move(it->second);
  arrived_.erase(it);
  const auto* control = reinterpret_cast<const RingControl*>(parts.segment.data());
  std::string description = fmt::format("shm ring {}x{} via @{}", control->slots,
                                        sizeText(control->slotBytes), socketName_);
  return std::make_unique<ShmConnection>(ctx_.rank, peer, ShmConnection::Direction::Recv,
                                         std::move(parts), std::move(description));
}

void ShmTransport::abort() {
  aborted_ = true;
  if (listener_.valid()) ::shutdown(listener_.get(), SHUT_RDWR);
}

}  // namespace tidal::shm
