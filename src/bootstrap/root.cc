// The rendezvous root: a background thread that collects one hello from every
// rank of a job and answers each with the table of bootstrap addresses.
//
// The root never trusts a connection before it presented the secret, never
// waits on one connection while others are pending (HelloAcceptor), and
// lives at most TIDAL_TIMEOUT seconds. Authenticated ranks it cannot accept
// (out-of-range or duplicate rank, disagreeing nranks) get a Reject saying
// why, so they fail at once with a clear message instead of timing out, and
// the root keeps waiting for the right rank.
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "core/log.h"
#include "net/hello_acceptor.h"
#include "net/wire.h"

namespace tidal {

namespace {

// Hello body after the secret: rank, nranks, listen address.
constexpr size_t kHelloBodyBytes = 4 + 4 + wire::kAddressBytes;

std::string listRanks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) {
    out += (i ? "," : "") + std::to_string(ranks[i]);
  }
  if (ranks.size() > 16) out += fmt::format(",... ({} in all)", ranks.size());
  return out;
}

class RootServer {
 public:
  RootServer(Socket listener, const Secret& secret, std::string name, int64_t timeoutSeconds)
      : listener_(std::move(listener)),
        secret_(secret),
        name_(std::move(name)),
        timeoutSeconds_(timeoutSeconds),
        deadline_(Clock::now() + std::chrono::seconds(timeoutSeconds)) {}

  void run() {
    try {
      if (collectHellos()) sendTables();
    } catch (const std::exception& e) {
      // Nothing may escape a detached thread; the ranks see their sockets
      // close and report it.
      TIDAL_WARN(Boot, "{}: {}", name_, e.what());
    }
  }

 private:
  // Returns false when the deadline passed first.
  bool collectHellos() {
    HelloAcceptor acceptor(listener_, wire::MsgType::Hello, sizeof(Secret) + kHelloBodyBytes,
                           secret_, name_, log::Subsys::Boot);
    acceptor.explainRefusals();
    while (nranks_ < 0 || joined_ < nranks_) {
      auto hello = acceptor.next(deadline_);
      if (!hello) {
        giveUp();
        return false;
      }
      wire::Reader r(hello->body.data(), hello->body.size(), name_ + ": hello");
      const auto rank = static_cast<int32_t>(r.u32());
      const auto nranks = static_cast<int32_t>(r.u32());
      SocketAddress addr;
      std::string problem;
      try {
        addr = r.address();
      } catch (const Error& e) {
        problem = e.what();
      }
      if (problem.empty()) problem = admissionProblem(rank, nranks, addr);
      if (!problem.empty()) {
        acceptor.warnDropped(hello->peer, fmt::format("rank {}: {}", rank, problem));
        wire::sendReject(hello->socket, tidalInvalidArgument,
                         fmt::format("{} refused rank {} of {}: {}", name_, rank, nranks, problem));
        continue;
      }
      if (nranks_ < 0) {
        nranks_ = nranks;
        ranks_.resize(static_cast<size_t>(nranks));
        addresses_.resize(static_cast<size_t>(nranks));
      }
      TIDAL_TRACE(Boot, "{}: rank {} of {} joined from {} (listens on {})", name_, rank, nranks,
                  hello->peer, addr.toString());
      ranks_[static_cast<size_t>(rank)] = std::move(hello->socket);
      addresses_[static_cast<size_t>(rank)] = addr;
      ++joined_;
    }
    return true;
  }

  std::string admissionProblem(int32_t rank, int32_t nranks, const SocketAddress& addr) const {
    if (nranks < 1 || nranks > wire::kMaxRanks) {
      return fmt::format("nranks {} is not in 1..{}", nranks, wire::kMaxRanks);
    }
    if (nranks_ >= 0 && nranks != nranks_) {
      return fmt::format("it says nranks={} but the ranks before it said {}", nranks, nranks_);
    }
    if (rank < 0 || rank >= nranks) return fmt::format("rank is out of range 0..{}", nranks - 1);
    if (nranks_ >= 0 && ranks_[static_cast<size_t>(rank)].valid()) {
      return fmt::format("rank {} already joined from {}", rank,
                         ranks_[static_cast<size_t>(rank)].peerAddress().toString());
    }
    if (addr.port() == 0 || addr.isWildcard()) {
      return fmt::format("its listen address {} cannot be connected to", addr.toString());
    }
    return {};
  }

  void giveUp() {
    std::string text;
    if (nranks_ < 0) {
      text = fmt::format("timed out after {} s: no rank joined", timeoutSeconds_);
    } else {
      std::vector<int> missing;
      for (int r = 0; r < nranks_; ++r) {
        if (!ranks_[static_cast<size_t>(r)].valid()) missing.push_back(r);
      }
      text = fmt::format("timed out after {} s with {} of {} ranks joined (missing rank {})",
                         timeoutSeconds_, joined_, nranks_, listRanks(missing));
    }
    TIDAL_WARN(Boot, "{}: {}", name_, text);
    for (auto& s : ranks_) {
      if (s.valid()) wire::sendReject(s, tidalTimeout, text);
    }
  }

  void sendTables() {
    std::vector<uint8_t> table;
    wire::Writer w(table);
    for (const auto& a : addresses_) w.address(a);
    // Each rank reads its table right after its hello, so these sends only
    // wait for a rank that died in between; bound that by the deadline.
    const Deadline deadline = std::max(deadline_, Clock::now() + std::chrono::seconds(5));
    for (int r = 0; r < nranks_; ++r) {
      try {
        wire::sendMessage(ranks_[static_cast<size_t>(r)], wire::MsgType::AddressTable, table.data(),
                          table.size(), deadline,
                          fmt::format("{}: sending the address table to rank {}", name_, r));
      } catch (const Error& e) {
        TIDAL_WARN(Boot, "{}", e.what());
      }
    }
    TIDAL_INFO(Boot, "{}: all {} ranks joined", name_, nranks_);
  }

  Socket listener_;
  Secret secret_;
  std::string name_;
  int64_t timeoutSeconds_;
  Deadline deadline_;
  int nranks_ = -1;
  int joined_ = 0;
  std::vector<Socket> ranks_;
  std::vector<SocketAddress> addresses_;
};

}  // namespace

namespace {

void serveInBackground(Socket listener, const Secret& secret, const std::string& name) {
  // Detached: the caller keeps only an address, and the thread ends by itself
  // once it sent the table or at its deadline. It owns all it uses.
  std::thread([server = RootServer(std::move(listener), secret, name, timeoutSeconds())]() mutable {
    server.run();
  }).detach();
}

}  // namespace

SocketAddress startRoot(const SocketAddress& listenAddr, const Secret& secret) {
  Socket listener = Socket::listenOn(listenAddr);
  const SocketAddress bound = listener.localAddress();
  SocketAddress advertised = bound;
  if (bound.isWildcard()) {
    // Listening on every interface: tell the ranks the one they should use.
    advertised = localInterfaceAddress();
    if (advertised.family() != bound.family() && bound.family() == AF_INET) {
      advertised = SocketAddress::loopback(AF_INET, 0);
    }
    advertised.setPort(bound.port());
  }
  TIDAL_INFO(Boot, "bootstrap root listening on {} (ranks connect to {})", bound.toString(),
             advertised.toString());
  serveInBackground(std::move(listener), secret, "bootstrap root " + bound.toString());
  return advertised;
}

void startRootOn(Socket listener, const SocketAddress& advertised, const Secret& secret) {
  TIDAL_INFO(Boot, "bootstrap root on the listener at {}", advertised.toString());
  serveInBackground(std::move(listener), secret, "bootstrap root " + advertised.toString());
}

}  // namespace tidal
