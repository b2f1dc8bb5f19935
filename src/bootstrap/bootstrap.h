// Rendezvous and out-of-band collectives.
//
// A root (a thread started by startRoot) accepts one hello from every rank,
// checks the secret, the protocol version and that all agree on nranks, and
// sends every rank the table of bootstrap listen addresses. The ranks then
// form a bootstrap ring (each connects to rank+1, presenting the secret and
// its rank) over which allGather, broadcast and barrier run; the root thread
// exits once the table is sent.
//
// Wire format (net/wire.h): every message is a fixed header {magic, version,
// type, length} followed by at most kMaxMessageBytes of payload; anything
// else (a stranger, a wrong secret, garbage, an oversize length) is logged as
// a WARN and the socket closed. Every wait is bounded by TIDAL_TIMEOUT (read
// at creation; each operation, and each ring step, gets that long) and by
// abort().
//
// Why a ring and not the root's star: the root is a short-lived thread of one
// process, and a ring spreads the traffic evenly. The ring allGather moves
// data in both directions at once (send to rank+1 while receiving from
// rank-1, multiplexed with poll), so payloads larger than the socket buffers
// cannot deadlock the way "everyone sends, then everyone receives" would.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/unique_id.h"
#include "core/socket.h"
#include "net/notice.h"
#include "net/wire.h"

namespace tidal {

inline constexpr size_t kMaxMessageBytes = 64u << 20;

// Starts the rendezvous root listening on `listenAddr` (port 0 = any) in a
// background thread that serves exactly one job of the given id and exits
// when it has sent the address table, or at its deadline (TIDAL_TIMEOUT from
// now). Returns the address the ranks must connect to (with the actual port;
// a wildcard listenAddr is replaced by localInterfaceAddress()).
SocketAddress startRoot(const SocketAddress& listenAddr, const Secret& secret);
// The same root served on a socket that already listens (a duplicate of a
// rank's bootstrap listener, for tidalCommShrink); ranks connect to `advertised`.
void startRootOn(Socket listener, const SocketAddress& advertised, const Secret& secret);

class Bootstrap {
  struct Key {};  // lets make_unique call the constructor, nobody else

 public:
  // Connects to the root, presents the secret, receives the address table and
  // wires up the ring. Throws Timeout / RemoteError / InvalidArgument.
  // The rank listens on loopback when the root is on loopback (a one-host
  // job), else on localInterfaceAddress().
  static std::unique_ptr<Bootstrap> create(const UniqueId& id, int rank, int nranks);
  explicit Bootstrap(Key) {}
  ~Bootstrap();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const Secret& secret() const { return secret_; }
  // Every rank's bootstrap listen address (for logs and error messages, and
  // the survivors' rendezvous of tidalCommShrink).
  const std::vector<SocketAddress>& peers() const { return peers_; }
  // A duplicate of this rank's listening socket, which stays open for the
  // communicator's life so that its address (peers()[rank]) can host a later
  // rendezvous that needs no message to announce it (tidalCommShrink).
  Socket duplicateListener() const;

  // all[r * bytes .. (r + 1) * bytes) receives rank r's `mine`. Every rank
  // passes the same `bytes` (at most kMaxMessageBytes); `mine` may point at
  // its own slot of `all`.
  void allGather(const void* mine, void* all, size_t bytes);
  // `data` of rank `root` reaches every rank; bytes <= kMaxMessageBytes - 4.
  void broadcast(void* data, size_t bytes, int root);
  void barrier();

  // Why a call failed, told to rank+1 and heard from rank-1 (net/notice.h).
  // tell() is best effort: a rank+1 that is gone is no error. hear() waits
  // at most `grace` for rank-1's notice; none when rank-1 is gone, stays
  // silent that long, or the ring is aborted or broken. Both run with the
  // communicator's call lock held, as every ring operation does. Ring
  // operations skip notices left unread (a split after tidalCommRevoke).
  void tell(const wire::Notice& notice);
  std::optional<wire::Notice> hear(std::chrono::milliseconds grace);
  // Whether rank-1's notice is the next message on the ring, without reading
  // it or waiting (a peek): for a stalled call to learn it cannot end well.
  bool noticeWaiting() const;

  // Unblocks any waiter (it throws RemoteError "... aborted", as the engine
  // does on tidalCommAbort); later calls throw too. Safe from another thread.
  void abort();

 private:
  void connectRing(Socket& listener, Deadline deadline);
  void ringPass(int type, const void* out, void* in, size_t bytes, const char* op);
  // Runs one collective: refuses to start on an aborted or broken ring, and
  // turns any failure into an error naming this rank and `op`; after a
  // failure the ring's byte streams are out of step, so it stays broken.
  template <typename F>
  void guarded(const char* op, F&& body);
  // The body of a notice whose header `h` was just read from rank-1.
  wire::Notice readNotice(const wire::Header& h, Deadline deadline, const std::string& what);
  [[noreturn]] void failAborted(const char* op) const;
  std::string peerName(int r) const;

  int rank_ = 0;
  int nranks_ = 0;
  Secret secret_{};
  int64_t timeoutSeconds_ = 0;
  std::vector<SocketAddress> peers_;
  Socket listener_;  // kept open after the ring is made (duplicateListener)
  Socket next_;      // to rank + 1
  Socket prev_;      // from rank - 1
  std::atomic<bool> aborted_{false};
  std::string brokenBy_;  // first error, once the ring is unusable
};

}  // namespace tidal
