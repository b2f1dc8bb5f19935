#include "transports/ib/queue_pair.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "core/error.h"
#include "core/params.h"

namespace tidal::ib {

namespace {

uint8_t boundedParam(const char* name, int64_t lo, int64_t hi, int rank) {
  const int64_t v = params::getInt(name);
  if (v < lo || v > hi) {
    fail(tidalInvalidArgument, "rank {}: {}={} is out of range {}..{}", rank, name, v, lo, hi);
  }
  return static_cast<uint8_t>(v);
}

uint32_t randomPsn() {
  uint32_t v = 0;
  if (::getrandom(&v, sizeof v, 0) != sizeof v) v = static_cast<uint32_t>(::time(nullptr));
  return v & 0xffffff;
}

}  // namespace

QpOptions qpOptionsFromParams(int rank) {
  QpOptions o;
  o.trafficClass = boundedParam("TIDAL_IB_TC", 0, 255, rank);
  o.serviceLevel = boundedParam("TIDAL_IB_SL", 0, 15, rank);
  o.timeout = boundedParam("TIDAL_IB_TIMEOUT", 1, 31, rank);
  o.retryCount = boundedParam("TIDAL_IB_RETRY_CNT", 0, 7, rank);
  return o;
}

const char* mtuName(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256:
      return "256";
    case IBV_MTU_512:
      return "512";
    case IBV_MTU_1024:
      return "1024";
    case IBV_MTU_2048:
      return "2048";
    case IBV_MTU_4096:
      return "4096";
  }
  return "?";
}

QueuePair::QueuePair(IbDevice& device, ibv_cq* cq, uint32_t sendDepth, uint32_t recvDepth,
                     uint32_t maxInline, const std::string& what)
    : device_(device), psn_(randomPsn()) {
  const VerbsApi& api = device.api();
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = sendDepth;
  init.cap.max_recv_wr = recvDepth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = maxInline;
  qp_ = api.createQp(device.pd(), &init);
  if (qp_ == nullptr && maxInline > 0) {
    // Some devices refuse inline data of that size: go without.
    init.cap.max_inline_data = 0;
    qp_ = api.createQp(device.pd(), &init);
  }
  if (qp_ == nullptr) {
    fail(tidalSystemError, "{}: ibv_create_qp ({} send, {} receive entries) on {} failed: {}", what,
         sendDepth, recvDepth, device.whereText(), errnoText(errno));
  }
  maxInline_ = init.cap.max_inline_data;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(device.port());
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (const int rc = api.modifyQp(
          qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0) {
    api.destroyQp(qp_);
    fail(tidalSystemError, "{}: moving QP to INIT on {} failed: {}", what, device.whereText(),
         errnoText(rc));
  }
}

QueuePair::~QueuePair() {
  if (qp_) device_.api().destroyQp(qp_);
}

void QueuePair::connect(const QpEndpoint& remote, const PortAddress& peer, ibv_mtu pathMtu,
                        const QpOptions& options, const std::string& what) {
  const VerbsApi& api = device_.api();
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = pathMtu;
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = 1;  // the GPUDirect flush reads one byte
  attr.min_rnr_timer = 1;       // 0.01 ms: receive entries are re-posted at once
  attr.ah_attr.port_num = static_cast<uint8_t>(device_.port());
  attr.ah_attr.sl = options.serviceLevel;
  if (device_.ethernet()) {
    // RoCE routes by GID: the GRH carries the addresses and the traffic
    // class (the DSCP that ECN marking and PFC priorities key on).
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, peer.gid.data(), 16);
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(device_.gid().index);
    attr.ah_attr.grh.hop_limit = 255;
    attr.ah_attr.grh.traffic_class = options.trafficClass;
  } else {
    attr.ah_attr.dlid = peer.lid;
  }
  int rc = api.modifyQp(qp_, &attr,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) {
    const std::string route =
        device_.ethernet() ? fmt::format("from {} to peer GID index {} ({})", device_.whereText(),
                                         peer.gidIndex, GidEntry{0, peer.gid, ""}.address())
                           : fmt::format("from {} to peer LID {}", device_.whereText(), peer.lid);
    fail(tidalSystemError,
         "{}: moving QP {} to RTR failed ({}) {}: the peer is not reachable with this GID; set "
         "TIDAL_IB_GID_INDEX (or TIDAL_IB_ADDR_FAMILY / TIDAL_IB_ADDR_RANGE) to a GID both ends "
         "can route, see docs/troubleshooting.md",
         what, qp_->qp_num, errnoText(rc), route);
  }
  std::memset(&attr, 0, sizeof attr);
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = psn_;
  attr.timeout = options.timeout;
  attr.retry_cnt = options.retryCount;
  attr.rnr_retry = 7;  // 7 = retry forever: a receiver without a posted entry is only slow
  attr.max_rd_atomic = 1;
  rc = api.modifyQp(qp_, &attr,
                    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                        IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) {
    fail(tidalSystemError, "{}: moving QP {} to RTS on {} failed: {}", what, qp_->qp_num,
         device_.whereText(), errnoText(rc));
  }
}

}  // namespace tidal::ib
