// A communicator's links to its peers: which transport serves each pair, and
// the connections, opened eagerly for the peers every collective uses and on
// first use for any other.
//
// At init every rank listens on every transport and publishes, in one
// bootstrap allGather, its host identity and one handle per transport
// (exchange()). After that any rank can open a send connection to any peer
// without a central step, because a connect completes in the peer's listen
// backlog (tcp, shm) or side channel (ib) without the peer's help. The engine
// asks for a missing connection when a schedule first names a peer (it is
// the engine's LinkOpener), and it asks for all of a schedule's send
// connections before any of its receive connections: since every rank does
// the same, and only accepts block, two ranks that need each other at the
// same moment never wait on each other.
//
// Which transport serves a pair: each candidate, in priority order, says
// whether it can connect the two (shm: same host and not disabled; ib: both
// ranks offer it; tcp: always); TIDAL_NET forces one for every pair.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "engine/engine.h"
#include "transports/transport.h"

namespace tidal {

class Links final : public LinkOpener {
 public:
  // `placement` (may be null) reaches every transport (TransportContext).
  Links(int rank, int nranks, Bootstrap& bootstrap, Engine& engine,
        std::shared_ptr<const topo::Placement> placement = nullptr);
  ~Links() override;

  // Collective: listens on every transport and exchanges the records.
  void exchange();
  // Host identity of every rank (after exchange()).
  const std::vector<std::string>& hostOfRank() const { return hostOfRank_; }
  // Opens the given connections now: all sends, then all receives.
  void connect(const std::set<int>& sendPeers, const std::set<int>& recvPeers);

  Connection& openSend(int peer, const char* what) override;
  Connection& openRecv(int peer, const char* what) override;

  // The host connections, for the device path's staging adapters.
  const std::map<int, std::unique_ptr<Connection>>& sendConnections() const { return sendTo_; }
  const std::map<int, std::unique_ptr<Connection>>& recvConnections() const { return recvFrom_; }

  // Closes every connection so that peers fail at once (after a failure).
  void abortConnections();
  // Stops blocking accepts and connects (tidalCommAbort).
  void abortTransports();
  // What the transports must keep open until every rank has destroyed the
  // communicator (Transport::keepOpenUntilAllDone); empty for none.
  std::vector<std::shared_ptr<KeptOpen>> keepOpenUntilAllDone();

 private:
  struct Record;
  std::string chooseTransport(int peer) const;
  ConnectHandle handleOf(int peer, const std::string& transport) const;

  int rank_;
  int nranks_;
  Bootstrap& bootstrap_;
  Engine& engine_;
  std::shared_ptr<const topo::Placement> placement_;
  std::string forcedNet_;
  bool shmDisabled_ = false;
  std::vector<std::string> transportOrder_;
  std::map<std::string, std::unique_ptr<Transport>> transports_;
  std::vector<Record> records_;
  std::vector<std::string> hostOfRank_;
  // Guards the maps' shape: connections open on the calling thread while
  // abort() may close them from another.
  mutable std::mutex mutex_;
  std::map<int, std::unique_ptr<Connection>> sendTo_;
  std::map<int, std::unique_ptr<Connection>> recvFrom_;
};

}  // namespace tidal
