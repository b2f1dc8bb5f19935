// A reliable-connected queue pair and its state changes (RESET -> INIT ->
// RTR -> RTS), with the path and retry settings from TIDAL_IB_*.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "transports/ib/ib_device.h"

namespace tidal::ib {

// What the far end of a QP needs to address it.
struct QpEndpoint {
  uint32_t qpn = 0;
  uint32_t psn = 0;
};

// What the far end of a connection needs to route to this port.
struct PortAddress {
  uint16_t lid = 0;
  std::array<uint8_t, 16> gid{};
  uint32_t gidIndex = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  bool ethernet = false;
};

struct QpOptions {
  uint8_t trafficClass = 0;  // TIDAL_IB_TC
  uint8_t serviceLevel = 0;  // TIDAL_IB_SL
  uint8_t timeout = 18;      // TIDAL_IB_TIMEOUT: 4.096 us * 2^timeout per try
  uint8_t retryCount = 7;    // TIDAL_IB_RETRY_CNT
};

// Reads and range-checks TIDAL_IB_TC / _SL / _TIMEOUT / _RETRY_CNT.
QpOptions qpOptionsFromParams(int rank);

const char* mtuName(ibv_mtu mtu);  // "1024"

class QueuePair {
 public:
  // Creates the QP on `cq` (send and receive) and moves it to INIT.
  // `maxInline` is what we would like; maxInline() says what we got.
  QueuePair(IbDevice& device, ibv_cq* cq, uint32_t sendDepth, uint32_t recvDepth,
            uint32_t maxInline, const std::string& what);
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  ibv_qp* get() const { return qp_; }
  QpEndpoint endpoint() const { return {qp_->qp_num, psn_}; }
  uint32_t maxInline() const { return maxInline_; }

  // INIT -> RTR -> RTS towards `remote` on the port at `peer`. Throws with
  // the device, port, GID index and address and both ends named in `what`.
  void connect(const QpEndpoint& remote, const PortAddress& peer, ibv_mtu pathMtu,
               const QpOptions& options, const std::string& what);

 private:
  IbDevice& device_;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_;
  uint32_t maxInline_ = 0;
};

}  // namespace tidal::ib
