// Accepts connections on a listener and reads one fixed-size hello from each,
// serving every pending connection from one poll() loop.
//
// This is what keeps a rendezvous alive in a hostile or noisy network: a
// stranger that connects and stays silent, trickles bytes, sends garbage, an
// oversize length or the wrong secret only ever holds its own slot, for at
// most kHelloReadLimit, while real ranks are served around it. Buffers are
// fixed (header + the expected hello), so nothing a peer says is allocated.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"
#include "core/socket.h"

namespace tidal {

// How long one connection may take to deliver its complete hello. Real ranks
// send it right after connecting, so this only bounds what strangers cost.
inline constexpr std::chrono::seconds kHelloReadLimit{10};
// Connections held open at once while waiting for hellos; beyond this, new
// ones are closed at once (a flood must not exhaust file descriptors).
inline constexpr size_t kMaxPendingHellos = 1024;

struct AcceptedHello {
  Socket socket;       // blocking mode, TCP_NODELAY
  SocketAddress peer;  // for logs
  // The hello payload after the secret (which was already checked).
  std::vector<uint8_t> body;
};

class HelloAcceptor {
 public:
  // `listener` must outlive this. Hellos are of `type` and carry exactly
  // `payloadBytes` bytes, the first 16 of which are the job secret. `who`
  // names the listener in logs ("bootstrap root 10.0.0.1:4000").
  HelloAcceptor(Socket& listener, wire::MsgType type, size_t payloadBytes, const Secret& secret,
                std::string who);

  // The next connection that presented a well-formed hello with the right
  // secret, or nullopt once `deadline` passes. Everything else is logged as
  // a WARN naming the peer address, and closed.
  std::optional<AcceptedHello> next(Deadline deadline);

  // WARN about a connection the caller refuses after reading its hello
  // (throttled like the acceptor's own warnings).
  void warnDropped(const SocketAddress& peer, const std::string& reason);

 private:
  struct Pending {
    Socket socket;
    SocketAddress peer;
    std::vector<uint8_t> buffer;  // header + payload, fixed size
    size_t filled = 0;
    Deadline giveUp;
  };

  void acceptNew();
  // Reads what is available; returns true when `p` holds a complete,
  // authenticated hello; drops it (sets socket invalid) when it misbehaves.
  bool readFrom(Pending& p);
  void drop(Pending& p, const std::string& reason);

  Socket& listener_;
  wire::MsgType type_;
  size_t payloadBytes_;
  Secret secret_;
  std::string who_;
  std::vector<Pending> pending_;
  size_t warnings_ = 0;
};

}  // namespace tidal
