// Accepts connections on a listener and reads one fixed-size hello from each,
// serving every pending connection from one poll() loop. It is the one door
// into a Tidal process: the bootstrap root and ring and every transport (tcp,
// shm, ib, cuda_ipc) accept through it, so the same rules hold everywhere: a
// hello is a wire.h message whose payload starts with the job secret, and a
// connection has kHelloReadLimit to deliver it.
//
// This is what keeps a rendezvous alive in a hostile or noisy network: a
// stranger that connects and stays silent, trickles bytes, sends garbage, an
// oversize length or the wrong secret only ever holds its own slot, for at
// most kHelloReadLimit, while real ranks are served around it; and a flood
// of such strangers is bounded (kMaxPendingHellos) by evicting them, not by
// refusing newcomers. Buffers are
// fixed (header + the expected hello), so nothing a peer says is allocated.
//
// The listener may be any stream socket: TCP, whose peers are named in logs
// by their address, or unix-domain (shm), named by the pid and uid the kernel
// vouches for (SO_PEERCRED). The acceptor reads exactly the hello's bytes and
// nothing after them, so what follows (shm's descriptors) is the caller's.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/secret.h"
#include "core/socket.h"
#include "net/wire.h"

namespace tidal {

namespace log {
enum class Subsys : unsigned;
}

// How long one connection may take to deliver its complete hello. Real ranks
// send it right after connecting, so this only bounds what strangers cost.
inline constexpr std::chrono::seconds kHelloReadLimit{10};
// Connections held open at once while waiting for hellos, in all and from
// one source address. At either bound a new connection is not refused:
// the least promising pending one makes room (silent before talking, then
// the oldest), so a flood of idle or slow connections costs at most this
// many descriptors and never keeps a real rank out, whose hello is read the
// moment it is accepted.
inline constexpr size_t kMaxPendingHellos = 1024;
inline constexpr size_t kMaxPendingPerSource = 256;

struct AcceptedHello {
  Socket socket;     // blocking mode; TCP_NODELAY on TCP
  std::string peer;  // for logs: "10.0.0.2:41234", or "pid 812 uid 1000" on a unix socket
  // The hello payload after the secret (which was already checked).
  std::vector<uint8_t> body;
  // When this connection's kHelloReadLimit ends: anything the caller still
  // reads as part of the hello (shm's descriptors) must have come by then.
  Deadline readLimit;
};

class HelloAcceptor {
 public:
  // `listener` (non-blocking, listening) must outlive this. Hellos are of
  // `type` and carry exactly `payloadBytes` bytes, the first 16 of which are
  // the job secret. `who` names the listener in logs ("rank 3 tcp listener
  // 10.0.0.1:4000"); warnings go to the `subsys` log subsystem.
  HelloAcceptor(Socket& listener, wire::MsgType type, size_t payloadBytes, const Secret& secret,
                std::string who, log::Subsys subsys);

  // Answer a Tidal peer's wrong secret or protocol version with a Reject
  // naming it before the close (the bootstrap root: a refused rank waits for an
  // answer and would otherwise read the close as a dead root). Transports
  // leave it off: their peers read the close itself as the refusal.
  void explainRefusals() { explainRefusals_ = true; }

  // The next connection that presented a well-formed hello with the right
  // secret, or nullopt once `deadline` passes. Everything else is logged as
  // a WARN naming the peer, and closed. A listener that was shut down
  // (abort) is a RemoteError.
  std::optional<AcceptedHello> next(Deadline deadline);

  // A transport's acceptRecv: serves hellos, handing each to `file` (which
  // keeps it, or refuses it with warnDropped), until `arrived()` holds.
  // Connections whose hello is still incomplete stay pending for the next
  // call. `aborted` is the transport's flag, set by its abort() before it
  // shuts the listener down; the wait checks it at least every 100 ms. Throws
  // RemoteError once aborted and Timeout at `deadline`, both naming
  // `waitingFor` ("rank 3 to connect").
  void serveUntil(const std::function<bool()>& arrived,
                  const std::function<void(AcceptedHello&)>& file, Deadline deadline,
                  const std::atomic<bool>& aborted, const std::string& waitingFor);

  // WARN about a connection the caller refuses after reading its hello
  // (throttled like the acceptor's own warnings).
  void warnDropped(const std::string& peer, const std::string& reason);

 private:
  struct Pending {
    Socket socket;
    std::string peer;
    std::string source;           // the peer's address without its port ("" for unix)
    std::vector<uint8_t> buffer;  // header + payload, fixed size
    size_t filled = 0;
    Deadline giveUp;
  };

  void acceptNew();
  // Closes the least promising pending connection (of `source` when given)
  // to make room for a new one.
  void evictOne(const std::string* source, const std::string& reason);
  AcceptedHello take(Pending& p);
  // Reads what is available; returns true when `p` holds a complete,
  // authenticated hello; drops it (sets socket invalid) when it misbehaves.
  bool readFrom(Pending& p);
  void drop(Pending& p, const std::string& reason);
  // drop() for a peer that sent a bad header or secret: logged, then told
  // why (rejectText, when not empty) with an orderly close.
  void refuse(Pending& p, const std::string& reason, const std::string& rejectText);

  Socket& listener_;
  wire::MsgType type_;
  size_t payloadBytes_;
  Secret secret_;
  std::string who_;
  log::Subsys subsys_;
  bool explainRefusals_ = false;
  std::vector<Pending> pending_;
  // Complete hellos read at accept time, handed out by next() first.
  std::vector<AcceptedHello> ready_;
  size_t warnings_ = 0;
};

}  // namespace tidal
