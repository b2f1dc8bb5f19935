#include "net/wire.h"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace tidal::wire {

namespace {
constexpr uint16_t kFamilyV4 = 4;
constexpr uint16_t kFamilyV6 = 6;
}  // namespace

const char* typeName(uint16_t type) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::Hello:
      return "hello";
    case MsgType::AddressTable:
      return "address table";
    case MsgType::Reject:
      return "reject";
    case MsgType::RingHello:
      return "ring hello";
    case MsgType::AllGather:
      return "allGather";
    case MsgType::Broadcast:
      return "broadcast";
    case MsgType::IbHello:
      return "ib hello";
    case MsgType::IbReply:
      return "ib reply";
    case MsgType::Barrier:
      return "barrier";
    case MsgType::CudaIpcHello:
      return "cuda_ipc hello";
    case MsgType::TcpHello:
      return "tcp hello";
    case MsgType::ShmHello:
      return "shm hello";
    case MsgType::Notice:
      return "notice";
  }
  return "unknown";
}

std::array<uint8_t, kHeaderBytes> encodeHeader(MsgType type, uint32_t length) {
  std::vector<uint8_t> v;
  Writer w(v);
  w.u32(kMagic);
  w.u16(kVersion);
  w.u16(static_cast<uint16_t>(type));
  w.u32(length);
  std::array<uint8_t, kHeaderBytes> out{};
  std::memcpy(out.data(), v.data(), kHeaderBytes);
  return out;
}

Header decodeHeader(const uint8_t* bytes) {
  Reader r(bytes, kHeaderBytes, "header");
  Header h;
  h.magic = r.u32();
  h.version = r.u16();
  h.type = r.u16();
  h.length = r.u32();
  return h;
}

std::string headerProblem(const Header& h, MsgType expected, size_t length) {
  if (h.magic != kMagic) {
    return fmt::format("bad magic 0x{:08x} (not a Tidal peer?)", h.magic);
  }
  if (h.version != kVersion) {
    return fmt::format("protocol version {} (this library speaks {})", h.version, kVersion);
  }
  if (h.type != static_cast<uint16_t>(expected)) {
    return fmt::format("unexpected message type {} ({}), expected {}", h.type, typeName(h.type),
                       typeName(static_cast<uint16_t>(expected)));
  }
  if (h.length != length) {
    return fmt::format("{} message of {} bytes, expected {}", typeName(h.type), h.length, length);
  }
  return {};
}

void Writer::u16(uint16_t v) {
  out_.push_back(static_cast<uint8_t>(v));
  out_.push_back(static_cast<uint8_t>(v >> 8));
}

void Writer::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void Writer::bytes(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  out_.insert(out_.end(), p, p + n);
}

void Writer::address(const SocketAddress& a) {
  uint8_t ip[16] = {0};
  uint32_t scope = 0;
  if (a.family() == AF_INET) {
    u16(kFamilyV4);
    std::memcpy(ip, &reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr, 4);
  } else {
    u16(kFamilyV6);
    const auto* sa = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    std::memcpy(ip, &sa->sin6_addr, 16);
    scope = sa->sin6_scope_id;
  }
  u16(a.port());
  bytes(ip, sizeof ip);
  u32(scope);
}

const uint8_t* Reader::take(size_t n) {
  if (n > left_) {
    fail(tidalInvalidArgument, "{}: truncated ({} bytes needed, {} left)", what_, n, left_);
  }
  const uint8_t* p = p_;
  p_ += n;
  left_ -= n;
  return p;
}

uint16_t Reader::u16() {
  const uint8_t* p = take(2);
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

uint32_t Reader::u32() {
  const uint8_t* p = take(4);
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

void Reader::bytes(void* out, size_t n) { std::memcpy(out, take(n), n); }

SocketAddress Reader::address() {
  const uint16_t family = u16();
  const uint16_t port = u16();
  uint8_t ip[16];
  bytes(ip, sizeof ip);
  const uint32_t scope = u32();
  SocketAddress a;
  if (family == kFamilyV4) {
    a = SocketAddress::wildcard(AF_INET, port);
    std::memcpy(&reinterpret_cast<sockaddr_in*>(&a.storage)->sin_addr, ip, 4);
  } else if (family == kFamilyV6) {
    a = SocketAddress::wildcard(AF_INET6, port);
    auto* sa = reinterpret_cast<sockaddr_in6*>(&a.storage);
    std::memcpy(&sa->sin6_addr, ip, 16);
    sa->sin6_scope_id = scope;
  } else {
    fail(tidalInvalidArgument, "{}: address family code {} is neither IPv4 (4) nor IPv6 (6)", what_,
         family);
  }
  return a;
}

void sendMessage(Socket& s, MsgType type, const void* payload, size_t bytes, Deadline deadline,
                 const std::string& what) {
  const auto header = encodeHeader(type, static_cast<uint32_t>(bytes));
  s.sendAll(header.data(), header.size(), deadline, what);
  if (bytes > 0) s.sendAll(payload, bytes, deadline, what);
}

void sendReject(Socket& s, tidalResult_t code, const std::string& text) {
  // One buffer, one send: header and text leave together.
  const size_t textBytes = std::min(text.size(), kMaxRejectBytes - 4);
  std::vector<uint8_t> message;
  // Reserving up front also keeps GCC 12's -O3 -Wstringop-overflow from a
  // false positive on the inlined push_back into an empty vector.
  message.reserve(kHeaderBytes + kMaxRejectBytes);
  Writer w(message);
  const auto header = encodeHeader(MsgType::Reject, static_cast<uint32_t>(4 + textBytes));
  w.bytes(header.data(), header.size());
  w.u32(static_cast<uint32_t>(code));
  w.bytes(text.data(), textBytes);
  try {
    s.sendAll(message.data(), message.size(), deadlineIn(std::chrono::milliseconds(1000)),
              "reject");
  } catch (const Error&) {
    return;  // the peer is gone or not reading; it learns from the closed socket
  }
  // A refusal usually comes before the peer's message was read whole (a bad
  // header is refused without reading its payload). Closing a TCP socket with
  // unread bytes sends a reset instead of a FIN, and a reset may overtake and
  // discard a reject still queued, so the peer would see "connection reset"
  // instead of the reason. So: FIN after the reject, then drop what the peer
  // sent, so that the caller's close() is an orderly one.
  s.shutdownWrite();
  s.discardReadable();
}

void recvHeader(Socket& s, MsgType expected, size_t length, Deadline deadline,
                const std::string& what) {
  uint8_t raw[kHeaderBytes];
  s.recvAll(raw, sizeof raw, deadline, what);
  const Header h = decodeHeader(raw);
  if (h.magic == kMagic && h.type == static_cast<uint16_t>(MsgType::Reject) && h.length >= 4 &&
      h.length <= kMaxRejectBytes) {
    std::vector<uint8_t> body(h.length);
    s.recvAll(body.data(), body.size(), deadline, what);
    Reader r(body.data(), body.size(), what);
    auto code = static_cast<tidalResult_t>(r.u32());
    if (code <= tidalSuccess || code >= tidalNumResults) code = tidalRemoteError;
    const std::string text(reinterpret_cast<const char*>(body.data()) + 4, body.size() - 4);
    throw PeerRejected(code, fmt::format("{}: {}", what, text));
  }
  if (auto problem = headerProblem(h, expected, length); !problem.empty()) {
    fail(tidalRemoteError, "{}: {}", what, problem);
  }
}

}  // namespace tidal::wire
