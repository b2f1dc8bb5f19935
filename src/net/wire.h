// The wire format every Tidal socket speaks before (bootstrap: instead of)
// its payload: the bootstrap root and ring, the unique id's fields, and every
// transport's hello (tcp, shm, ib, cuda_ipc), which HelloAcceptor reads.
//
// Every message is a 12-byte header {magic u32, version u16, type u16,
// length u32} followed by `length` payload bytes. All integers are
// little-endian whatever the host, so mixed hosts agree. A receiver always
// knows the exact (or, for Reject, the maximum) length it will accept before
// it allocates or reads the payload, so an attacker-chosen length is never
// allocated.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/socket.h"

namespace tidal::wire {

inline constexpr uint32_t kMagic = 0x5444424bu;  // "TDBK"
inline constexpr uint16_t kVersion = 1;

// Most ranks one job may have: the bootstrap's address table must fit its
// kMaxMessageBytes.
inline constexpr int kMaxRanks = 1 << 20;

// An error a peer sent us in a Reject message: passed on as it is, never
// reworded as a local timeout.
class PeerRejected : public Error {
 public:
  using Error::Error;
};

enum class MsgType : uint16_t {
  Hello = 1,         // rank -> root: secret, rank, nranks, listen address
  AddressTable = 2,  // root -> rank: every rank's listen address
  Reject = 3,        // either way: error code + text, then the sender closes
  RingHello = 4,     // rank -> rank+1: secret, rank, nranks
  AllGather = 5,     // ring payloads, one type per collective so that ranks
  Broadcast = 6,     // that disagree on the call sequence fail loudly
  Barrier = 7,
  IbHello = 8,        // ib transport set-up: sender -> receiver (QPs, FIFO)
  IbReply = 9,        // ib transport set-up: receiver -> sender (QPs, eager ring)
  CudaIpcHello = 10,  // cuda_ipc sender -> receiver: secret, ranks, ring, IPC handle
  TcpHello = 11,      // tcp data socket: secret, ranks, socket index and count
  ShmHello = 12,      // shm sender -> receiver: secret, ranks, ring geometry (fds follow)
  Notice = 13,        // ring: why a rank's call failed (net/notice.h)
};
const char* typeName(uint16_t type);

inline constexpr size_t kHeaderBytes = 12;
inline constexpr size_t kAddressBytes = 24;
inline constexpr size_t kMaxRejectBytes = 4096;

struct Header {
  uint32_t magic = 0;
  uint16_t version = 0;
  uint16_t type = 0;
  uint32_t length = 0;
};

std::array<uint8_t, kHeaderBytes> encodeHeader(MsgType type, uint32_t length);
Header decodeHeader(const uint8_t* bytes);
// Empty when `h` carries the right magic and version, type `expected` and
// exactly `length` payload bytes; otherwise what is wrong with it.
std::string headerProblem(const Header& h, MsgType expected, size_t length);

// Appends little-endian fields to a byte vector.
class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  void u16(uint16_t v);
  void u32(uint32_t v);
  void bytes(const void* data, size_t n);
  // 24 bytes: family code (4/6), port, 16 address bytes, IPv6 scope id.
  void address(const SocketAddress& a);

 private:
  std::vector<uint8_t>& out_;
};

// Reads little-endian fields from a bounded buffer; reading past the end
// throws InvalidArgument naming `what`.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, std::string what)
      : p_(data), left_(size), what_(std::move(what)) {}
  uint16_t u16();
  uint32_t u32();
  void bytes(void* out, size_t n);
  // Throws InvalidArgument when the family code is not IPv4/IPv6.
  SocketAddress address();
  size_t left() const { return left_; }

 private:
  const uint8_t* take(size_t n);
  const uint8_t* p_;
  size_t left_;
  std::string what_;
};

// Header + payload on a connected socket.
void sendMessage(Socket& s, MsgType type, const void* payload, size_t bytes, Deadline deadline,
                 const std::string& what);
// Best effort, short deadline: tells an authenticated peer why it is dropped.
void sendReject(Socket& s, tidalResult_t code, const std::string& text);
// Receives a header that must be `expected` with exactly `length` payload
// bytes (the payload is left in the socket). A Reject instead is read and
// thrown as PeerRejected(code, "<what>: <text>"); anything else throws
// RemoteError.
void recvHeader(Socket& s, MsgType expected, size_t length, Deadline deadline,
                const std::string& what);

}  // namespace tidal::wire
