// The sending direction of an ib connection.
//
// Small transfers (<= the eager size) go at once: written, inline when they
// fit in the work request, else through a registered bounce slot, into the
// receiver's eager ring, as long as the receiver has returned credits for
// ring slots. Large transfers wait for the receiver's clear-to-send (its
// CtsEntry arrives in our FIFO by RDMA write with immediate), are registered
// through the cache, and are written straight into the receiver's buffer,
// striped across the connection's QPs in 4 KiB-aligned pieces. A transfer is
// complete when every write it made has completed (the receiver's NIC
// acknowledged it): then its data is in the receiver's memory.
//
// Set-up finishes inside progress(): connectSend only sends the hello (so
// two ranks connecting to each other never wait on each other), and the
// reply is read when it comes; transfers posted before that wait in order.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transports/ib/ib_connection.h"
#include "transports/ib/ib_link.h"
#include "transports/ib/protocol.h"
#include "transports/transport.h"

namespace tidal::ib {

class IbSendConnection final : public IbConnection {
 public:
  // `socket` is connected to the peer's side channel; `peerPort` is the
  // peer's port of this rail. Sends the hello.
  IbSendConnection(std::shared_ptr<IbDevice> device, const TransportContext& ctx, int peer,
                   const PortAddress& peerPort, RailSlot rail, ConnectionGeometry geometry,
                   QpOptions options, Socket socket, Deadline deadline);
  ~IbSendConnection() override;

  void post(void* data, size_t bytes) override;
  bool progress() override;

 private:
  const IbLink& link() const override { return link_; }
  IbLink& link() override { return link_; }

  struct Transfer {
    uint64_t seq;
    char* data;
    size_t bytes;
    bool eager;
    size_t offset = 0;         // bytes whose writes are posted
    uint32_t outstanding = 0;  // writes posted, not yet completed
    bool issued = false;       // every write posted
    RegistrationCache::Entry* registration = nullptr;
  };

  bool finishSetup();
  bool pollCompletions();
  void onCompletion(const ibv_wc& wc);
  bool issue();
  bool issueEager(Transfer& t);
  bool issueLarge(Transfer& t);
  bool retire();
  void checkPeer(bool force);

  ConnectionGeometry geometry_;
  QpOptions options_;
  PortAddress peerPort_;
  ibv_mtu pathMtu_;
  Deadline setupDeadline_;
  // Memory the receiver writes (FIFO) and we copy small transfers through:
  // declared before link_ so that the link unpins them before they go.
  std::vector<CtsEntry> fifo_;
  std::vector<char> bounce_;
  IbLink link_;
  RegistrationCache::Entry* fifoReg_ = nullptr;
  RegistrationCache::Entry* bounceReg_ = nullptr;
  bool ready_ = false;
  uint64_t eagerRemote_ = 0;
  uint32_t eagerRkey_ = 0;
  size_t stripeBytes_ = 0;  // per-QP share of a striped transfer (0: no striping)

  std::deque<Transfer> queue_;  // queue_[i] is transfer completed_ + i
  size_t issueIndex_ = 0;       // first transfer not fully posted
  std::deque<CtsEntry> cts_;    // clear-to-sends received, in order, not yet used
  uint64_t ctsReceived_ = 0;
  uint64_t eagerIssued_ = 0, eagerWritesDone_ = 0, eagerCredited_ = 0;
};

}  // namespace tidal::ib
