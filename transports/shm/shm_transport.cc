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
#include "net/wire.h"

namespace tidal::shm {

namespace {

// 2: transfers start at 64-byte boundaries of the stream (reduce on arrival);
// 3: the sender restarts at the ring's beginning when the ring is empty;
// 4: the hello in wire.h framing on a stream socket, the descriptors after it;
// 5: transfer headers and pulls (shm_ring.h);
// 6: Send/Recv payload pieces pulled at the sender's choice;
// 7: the packet area for transfers of at most 448 bytes (shm_ring.h);
// 8: each side's waiting CPU in the control page.
constexpr uint16_t kHelloVersion = 8;
constexpr size_t kHelloFds = 3;  // segment, data-ready, space-ready
constexpr int64_t kMaxSlots = 1024;
constexpr int64_t kMinSlotBytes = 4096;
constexpr int64_t kMaxSlotBytes = int64_t{64} << 20;

// The hello after the secret, little-endian: version u16, from rank u32,
// to rank u32, slots u32, slot bytes u32.
struct Hello {
  uint16_t version = 0;
  int32_t fromRank = 0;
  int32_t toRank = 0;
  uint32_t slots = 0;
  uint32_t slotBytes = 0;
};
constexpr size_t kHelloBodyBytes = 2 + 4 * 4;

std::vector<uint8_t> encodeHello(const Secret& secret, const Hello& h) {
  std::vector<uint8_t> out;
  wire::Writer w(out);
  w.bytes(secret.data(), secret.size());
  w.u16(h.version);
  w.u32(static_cast<uint32_t>(h.fromRank));
  w.u32(static_cast<uint32_t>(h.toRank));
  w.u32(h.slots);
  w.u32(h.slotBytes);
  return out;
}

Hello decodeHello(const std::vector<uint8_t>& body) {
  wire::Reader r(body.data(), body.size(), "shm hello");
  Hello h;
  h.version = r.u16();
  h.fromRank = static_cast<int32_t>(r.u32());
  h.toRank = static_cast<int32_t>(r.u32());
  h.slots = r.u32();
  h.slotBytes = r.u32();
  return h;
}

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

Socket unixStreamSocket() {
  Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) fail(tidalSystemError, "unix socket failed: {}", errnoText(errno));
  return s;
}

// Waits until `limit` for the one byte that carries a hello's descriptors.
// Empty `r.fds` with `why` set when they did not come.
Received receiveDescriptors(int socket, Deadline limit, const std::atomic<bool>& aborted,
                            std::string* why) {
  uint8_t marker = 0;
  for (;;) {
    Received r = receiveWithFds(socket, &marker, sizeof marker, kHelloFds);
    if (r.status == Received::Status::Message) return r;
    if (r.status == Received::Status::Closed) {
      *why = "it closed the connection after its hello, before the descriptors";
      return {};
    }
    if (aborted.load()) {
      *why = "aborted";
      return {};
    }
    if (Clock::now() >= limit) {
      *why = fmt::format("no descriptors within {} s of connecting", kHelloReadLimit.count());
      return {};
    }
    pollfd p{socket, POLLIN, 0};
    ::poll(&p, 1, std::min(100, pollTimeoutMs(limit)));
  }
}

// The word a receiver reads in this process to prove it can pull from it:
// random, so that a pid that names another process (another pid namespace)
// is found out.
const uint64_t& probeWord() {
  static const uint64_t word = [] {
    uint64_t w = 0;
    while (w == 0) {
      if (::getrandom(&w, sizeof w, 0) != sizeof w) w = 0x5eed5eed5eed5eedull ^ ::getpid();
    }
    return w;
  }();
  return word;
}

pid_t peerPidOf(int unixSocket) {
  ucred cred{};
  socklen_t length = sizeof cred;
  if (::getsockopt(unixSocket, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) return 0;
  return cred.pid;
}

std::string sizeText(size_t bytes) {
  if (bytes % (1 << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

}  // namespace

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
  // A pull threshold: 0 turns that kind of pull off, else the smallest
  // transfer (or Send/Recv and AllToAll piece) read from the sender's memory.
  const auto pullThreshold = [&](const char* name) {
    const int64_t v = params::getInt(name);
    if (v < 0) {
      fail(tidalInvalidArgument,
           "rank {}: {}={} is negative (0 turns these pulls off; else the smallest transfer a "
           "receiver reads straight from the sender's memory)",
           ctx.rank, name, v);
    }
    return static_cast<uint64_t>(v);
  };
  pullMinBytes_ = pullThreshold("TIDAL_SHM_PULL_BYTES");
  payloadPullMinBytes_ = pullThreshold("TIDAL_SHM_P2P_PULL_BYTES");
  hostKey_ = localHostKey();
}

ConnectHandle ShmTransport::listen() {
  uint64_t tag = 0;
  if (::getrandom(&tag, sizeof tag, 0) != sizeof tag) {
    fail(tidalSystemError, "rank {}: getrandom for the shm socket name failed: {}", ctx_.rank,
         errnoText(errno));
  }
  socketName_ = fmt::format("tidal-shm-{}-{:016x}", ::getpid(), tag);
  listener_ = unixStreamSocket();
  socklen_t length;
  const sockaddr_un addr = abstractAddress(socketName_, &length);
  if (::bind(listener_.fd(), reinterpret_cast<const sockaddr*>(&addr), length) != 0 ||
      ::listen(listener_.fd(), SOMAXCONN) != 0) {
    fail(tidalSystemError, "rank {}: shm listen on @{} failed: {}", ctx_.rank, socketName_,
         errnoText(errno));
  }
  acceptor_ = std::make_unique<HelloAcceptor>(
      listener_, wire::MsgType::ShmHello, sizeof(Secret) + kHelloBodyBytes, ctx_.secret,
      fmt::format("rank {} shm listener @{}", ctx_.rank, socketName_), log::Subsys::Net);
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

  Socket sock = unixStreamSocket();
  socklen_t length;
  const sockaddr_un addr = abstractAddress(name, &length);
  for (;;) {
    if (::connect(sock.fd(), reinterpret_cast<const sockaddr*>(&addr), length) == 0) break;
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
  control->pullMinBytes = pullMinBytes_;
  control->payloadPullMinBytes = payloadPullMinBytes_;
  control->probeAddress = reinterpret_cast<uintptr_t>(&probeWord());
  control->probeValue = probeWord();
  control->senderCpu = -1;
  control->receiverCpu = -1;

  ShmConnection::Parts parts;
  parts.dataReady = makeEventFd(what);
  parts.spaceReady = makeEventFd(what);
  const Hello hello{kHelloVersion, ctx_.rank, peer, static_cast<uint32_t>(slots_),
                    static_cast<uint32_t>(slotBytes_)};
  const std::vector<uint8_t> payload = encodeHello(ctx_.secret, hello);
  wire::sendMessage(sock, wire::MsgType::ShmHello, payload.data(), payload.size(), deadline, what);
  // The descriptors follow on one byte of their own: the receiver takes them
  // only from a peer whose hello proved it knows the secret.
  const uint8_t marker = 0;
  const std::vector<int> fds{memfd.get(), parts.dataReady.get(), parts.spaceReady.get()};
  while (!sendWithFds(sock.fd(), &marker, sizeof marker, fds, what)) {
    if (aborted_) fail(tidalRemoteError, "{}: aborted", what);
    if (Clock::now() > deadline) fail(tidalTimeout, "{}: timed out sending the descriptors", what);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  parts.socket = UniqueFd(sock.release());
  parts.segment = std::move(segment);
  return std::make_unique<ShmConnection>(
      ctx_.rank, peer, ShmConnection::Direction::Send, std::move(parts),
      fmt::format("shm ring {}x{} via @{}", slots_, sizeText(slotBytes_), name));
}

void ShmTransport::file(AcceptedHello& accepted) {
  const Hello h = decodeHello(accepted.body);
  auto refuse = [&](const std::string& problem) {
    acceptor_->warnDropped(accepted.peer, fmt::format("claims rank {}: {}", h.fromRank, problem));
  };
  if (h.version != kHelloVersion) {
    return refuse(
        fmt::format("shm protocol version {} (this library speaks {})", h.version, kHelloVersion));
  }
  if (h.toRank != ctx_.rank || h.fromRank < 0 || h.fromRank >= ctx_.nranks) {
    return refuse(fmt::format("inconsistent ranks (from {} to {})", h.fromRank, h.toRank));
  }
  if (h.slots < 1 || h.slots > kMaxSlots || h.slotBytes < kMinSlotBytes ||
      h.slotBytes % kMinSlotBytes != 0 || h.slotBytes > kMaxSlotBytes) {
    return refuse("bad segment geometry");
  }
  if (arrived_.count(h.fromRank)) return refuse("duplicate connection for that rank");

  std::string why;
  Received r = receiveDescriptors(accepted.socket.fd(), accepted.readLimit, aborted_, &why);
  if (!why.empty()) return refuse(why);
  struct stat st {};
  if (r.truncated || r.fds.size() != kHelloFds || ::fstat(r.fds[0].get(), &st) != 0 ||
      static_cast<uint64_t>(st.st_size) != segmentBytes(h.slots, h.slotBytes)) {
    return refuse("bad descriptors (not a segment of its geometry and two eventfds)");
  }
  const std::string what =
      fmt::format("rank {}: shm connection from rank {}", ctx_.rank, h.fromRank);
  ShmConnection::Parts parts;
  parts.segment = Mapping(r.fds[0].get(), static_cast<size_t>(st.st_size), true, what);
  const auto* control = reinterpret_cast<const RingControl*>(parts.segment.data());
  if (control->magic != kSegmentMagic || control->slots != h.slots ||
      control->slotBytes != h.slotBytes) {
    return refuse("bad segment");
  }
  parts.dataReady = std::move(r.fds[1]);
  parts.spaceReady = std::move(r.fds[2]);
  parts.peerPid = peerPidOf(accepted.socket.fd());
  parts.mayPull = pullMinBytes_ != 0 || payloadPullMinBytes_ != 0;
  parts.socket = UniqueFd(accepted.socket.release());
  arrived_.emplace(h.fromRank, std::move(parts));
}

std::unique_ptr<Connection> ShmTransport::acceptRecv(int peer, Deadline deadline) {
  if (!acceptor_) {
    fail(tidalInternalError, "rank {}: shm accept from rank {} before listen", ctx_.rank, peer);
  }
  acceptor_->serveUntil([&] { return arrived_.count(peer) != 0; },
                        [&](AcceptedHello& hello) { file(hello); }, deadline, aborted_,
                        fmt::format("rank {} to connect", peer));
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
  listener_.shutdownBoth();
}

}  // namespace tidal::shm
