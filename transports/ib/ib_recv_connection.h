// The receiving direction of an ib connection.
//
// For each large transfer posted, the receiver registers the buffer (through
// the cache) and advertises it with a clear-to-send written into the
// sender's FIFO; the sender's writes land in it directly and each carries
// the transfer's sequence number, so completions are matched to transfers
// and counted by bytes. Small transfers arrive unasked in the eager ring and
// are copied out when their receive is posted (or at once, if it already
// was); consumed ring slots are returned to the sender as credits, half a
// ring at a time. Transfers complete in post order.
//
// Nothing is sent to the sender before its "ready" byte has arrived on the
// side channel: until then its QPs may not be able to receive.
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

class IbRecvConnection final : public IbConnection {
 public:
  // Builds the receive side for `hello` (already vetted), connects the QPs
  // and sends the reply on `socket`.
  IbRecvConnection(std::shared_ptr<IbDevice> device, int selfRank, const Hello& hello,
                   QpOptions options, Socket socket, Deadline deadline);
  ~IbRecvConnection() override;

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
    uint64_t eagerIndex = 0;
    bool advertised = false;
    size_t arrived = 0;
    bool done = false;
    RegistrationCache::Entry* registration = nullptr;
  };

  bool readReady();
  bool pollCompletions();
  void onCompletion(const ibv_wc& wc);
  bool advertise();
  bool copyEager();
  bool returnCredits();
  bool retire();
  [[noreturn]] void lost(const std::string& why) const;

  ConnectionGeometry geometry_;
  QpOptions options_;
  uint64_t fifoRemote_;
  uint32_t fifoRkey_;
  // The eager ring the sender writes into, and the source of clear-to-sends
  // when they cannot go inline; before link_ so that it unpins them first.
  std::vector<char> ring_;
  std::vector<CtsEntry> ctsSource_;
  IbLink link_;
  RegistrationCache::Entry* ringReg_ = nullptr;
  RegistrationCache::Entry* ctsReg_ = nullptr;
  bool ready_ = false;

  std::deque<Transfer> queue_;  // queue_[i] is transfer completed_ + i
  size_t advertiseIndex_ = 0;   // first transfer not yet considered for a CTS
  uint64_t ctsSent_ = 0, ctsRetired_ = 0;
  uint64_t eagerPosted_ = 0, eagerArrived_ = 0, eagerConsumed_ = 0, eagerCredited_ = 0;
  std::vector<uint32_t> eagerLength_;  // bytes that arrived in each ring slot
};

}  // namespace tidal::ib
