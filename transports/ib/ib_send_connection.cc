#include "transports/ib/ib_send_connection.h"

#include <arpa/inet.h>
#include <poll.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "net/wire.h"

namespace tidal::ib {

namespace {

// Below this a large transfer goes whole on one QP: striping small ones
// only adds work requests.
constexpr size_t kStripeMinBytes = 64 * 1024;
constexpr size_t kStripeAlign = 4096;
constexpr size_t kMaxWriteBytes = size_t{1} << 30;

IbLink::Depths senderDepths(const ConnectionGeometry& g) {
  return {2 * kFifoDepth + g.eagerSlots + 8, 2 * kFifoDepth + 8, kFifoDepth + 8, 1};
}

}  // namespace

IbSendConnection::IbSendConnection(std::shared_ptr<IbDevice> device, const TransportContext& ctx,
                                   int peer, const PortAddress& peerPort, RailSlot rail,
                                   ConnectionGeometry geometry, QpOptions options, Socket socket,
                                   Deadline deadline)
    : IbConnection(peer),
      geometry_(geometry),
      options_(options),
      peerPort_(peerPort),
      pathMtu_(std::min(device->activeMtu(), peerPort.mtu)),
      setupDeadline_(deadline),
      fifo_(kFifoDepth),
      bounce_(size_t{geometry.eagerSlots} * std::max<uint32_t>(geometry.eagerBytes, 1)),
      link_(device,
            fmt::format("rank {}: ib connection to rank {}{}", ctx.rank, peer,
                        railText(rail, *device)),
            geometry.nqps, senderDepths(geometry)) {
  fifoReg_ = link_.pinOwned(fifo_.data(), fifo_.size() * sizeof(CtsEntry));
  bounceReg_ = link_.pinOwned(bounce_.data(), bounce_.size());
  Hello hello;
  hello.fromRank = ctx.rank;
  hello.toRank = peer;
  hello.rail = rail;
  hello.geometry = geometry;
  hello.port = link_.localAddress();
  hello.fifoAddr = reinterpret_cast<uintptr_t>(fifo_.data());
  hello.fifoRkey = fifoReg_->mr->rkey;
  hello.qps = link_.endpoints();
  const auto payload = encodeHello(ctx.secret, hello);
  wire::sendMessage(socket, wire::MsgType::IbHello, payload.data(), payload.size(), deadline,
                    fmt::format("{}: hello", link_.who()));
  link_.setSocket(std::move(socket));
  describeAs(pathText(*device, pathMtu_), geometryText(geometry));
}

IbSendConnection::~IbSendConnection() {
  link_.drainSends();
  for (auto& t : queue_) {
    if (t.registration) link_.device().cache().release(t.registration);
    link_.device().transferFinished();
  }
}

void IbSendConnection::post(void* data, size_t bytes) {
  const bool eager = bytes > 0 && bytes <= geometry_.eagerBytes;
  queue_.push_back(Transfer{posted_++, static_cast<char*>(data), bytes, eager});
  link_.device().transferStarted();
}

bool IbSendConnection::finishSetup() {
  pollfd p{link_.socket().fd(), POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) {
    if (Clock::now() > setupDeadline_) {
      fail(tidalTimeout,
           "{}: timed out after TIDAL_TIMEOUT={} s waiting for rank {} to accept the connection "
           "(it never reached its connection set-up, or is stuck)",
           link_.who(), timeoutSeconds(), peer_);
    }
    return false;
  }
  // The receiver sends its reply in one message: once it is readable the
  // rest follows at once, so a short bounded wait reads it whole.
  const std::string what = fmt::format("{}: reply", link_.who());
  const Deadline soon = Clock::now() + std::chrono::seconds(10);
  wire::recvHeader(link_.socket(), wire::MsgType::IbReply, kReplyBytes, soon, what);
  std::vector<uint8_t> bytes(kReplyBytes);
  link_.socket().recvAll(bytes.data(), bytes.size(), soon, what);
  const Reply reply = decodeReply(bytes, geometry_.nqps);
  link_.connect(reply.qps, reply.port, pathMtu_, options_);
  eagerRemote_ = reply.eagerAddr;
  eagerRkey_ = reply.eagerRkey;
  const char ready = 1;
  link_.socket().sendAll(&ready, 1, soon, fmt::format("{}: ready", link_.who()));
  ready_ = true;
  TIDAL_TRACE(Net, "{}: set up ({} QPs, path MTU {})", link_.who(), geometry_.nqps,
              mtuName(pathMtu_));
  return true;
}

void IbSendConnection::checkPeer(bool force) {
  std::string why;
  if (force ? link_.peerGone(why) : link_.peerGoneThrottled(why)) {
    link_.lost(description_, why, bytesMoved_, posted_, completed_);
  }
}

void IbSendConnection::onCompletion(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) {
    link_.checkHealth();
    checkPeer(true);  // a dead peer explains most failures best
    fail(tidalRemoteError,
         "{}: {} after {} bytes; the path to rank {} is broken (TIDAL_IB_TIMEOUT={}, "
         "TIDAL_IB_RETRY_CNT={})",
         link_.who(), link_.completionError(wc), bytesMoved_, peer_, options_.timeout,
         options_.retryCount);
  }
  const size_t qp = wrQp(wc.wr_id);
  switch (wrKind(wc.wr_id)) {
    case WrKind::Recv: {
      const uint32_t imm = ntohl(wc.imm_data);
      if (immKind(imm) == ImmKind::Cts) {
        const uint64_t index = widen(ctsReceived_, immValue(imm));
        if (index != ctsReceived_) {
          fail(tidalInternalError, "{}: clear-to-send {} arrived, expected {}", link_.who(), index,
               ctsReceived_);
        }
        cts_.push_back(fifo_[index % kFifoDepth]);
        ++ctsReceived_;
      } else if (immKind(imm) == ImmKind::Credit) {
        eagerCredited_ = std::max(eagerCredited_, widen(eagerCredited_, immValue(imm)));
      } else {
        fail(tidalInternalError, "{}: unexpected immediate {:#x} from the receiver", link_.who(),
             imm);
      }
      link_.repostRecv(qp);
      break;
    }
    case WrKind::Data:
    case WrKind::Eager: {
      link_.sendDone(qp);
      if (wrKind(wc.wr_id) == WrKind::Eager) ++eagerWritesDone_;
      const uint64_t seq = wrValue(wc.wr_id);
      if (seq < completed_ || seq - completed_ >= queue_.size()) {
        fail(tidalInternalError, "{}: completion for unknown transfer {}", link_.who(), seq);
      }
      --queue_[seq - completed_].outstanding;
      break;
    }
    default:
      fail(tidalInternalError, "{}: unexpected completion id {:#x}", link_.who(), wc.wr_id);
  }
}

bool IbSendConnection::pollCompletions() {
  return link_.pollEach([this](const ibv_wc& wc) { onCompletion(wc); });
}

bool IbSendConnection::issueEager(Transfer& t) {
  if (eagerIssued_ >= eagerCredited_ + geometry_.eagerSlots) return false;    // no credit
  if (eagerIssued_ - eagerWritesDone_ >= geometry_.eagerSlots) return false;  // bounce busy
  if (!link_.sendSpace(0)) return false;
  const size_t slot = eagerIssued_ % geometry_.eagerSlots;
  const bool inlineData = t.bytes <= link_.maxInline();
  const void* source = t.data;
  uint32_t lkey = 0;
  if (!inlineData) {
    char* bounce = bounce_.data() + slot * geometry_.eagerBytes;
    std::memcpy(bounce, t.data, t.bytes);
    source = bounce;
    lkey = bounceReg_->mr->lkey;
  }
  link_.postWrite(0, makeWrId(WrKind::Eager, 0, t.seq), source, lkey, t.bytes,
                  eagerRemote_ + slot * geometry_.eagerBytes, eagerRkey_,
                  makeImm(ImmKind::Eager, eagerIssued_), inlineData);
  ++eagerIssued_;
  t.outstanding = 1;
  t.offset = t.bytes;
  return true;
}

bool IbSendConnection::issueLarge(Transfer& t) {
  if (t.registration == nullptr) {
    if (cts_.empty()) return false;
    const CtsEntry& c = cts_.front();
    if (c.seq != t.seq) {
      fail(tidalInternalError, "{}: clear-to-send for transfer {} while transfer {} is next",
           link_.who(), c.seq, t.seq);
    }
    if (c.bytes != t.bytes) {
      fail(tidalInvalidUsage,
           "{}: transfer {} is {} bytes here but rank {} posted {} bytes for it: the ranks "
           "called different collectives, counts or types",
           link_.who(), t.seq, t.bytes, peer_, c.bytes);
    }
    t.registration = link_.device().cache().acquire(t.data, t.bytes);
  }
  const CtsEntry& c = cts_.front();
  const size_t nqps = link_.qpCount();
  size_t share = 0;
  if (nqps > 1 && t.bytes >= kStripeMinBytes) {
    share = (t.bytes + nqps - 1) / nqps;
    share = (share + kStripeAlign - 1) / kStripeAlign * kStripeAlign;
  }
  const size_t maxWrite = std::min<size_t>(link_.device().maxMessageBytes(), kMaxWriteBytes);
  while (t.offset < t.bytes) {
    const size_t qp = share ? std::min(t.offset / share, nqps - 1) : t.seq % nqps;
    const size_t stripeEnd = share ? std::min((qp + 1) * share, t.bytes) : t.bytes;
    const size_t len = std::min(stripeEnd - t.offset, maxWrite);
    if (!link_.sendSpace(qp)) return false;
    link_.postWrite(qp, makeWrId(WrKind::Data, qp, t.seq), t.data + t.offset,
                    t.registration->mr->lkey, len, c.addr + t.offset, c.rkey,
                    makeImm(ImmKind::Data, t.seq), false);
    t.offset += len;
    ++t.outstanding;
  }
  cts_.pop_front();
  return true;
}

bool IbSendConnection::issue() {
  bool any = false;
  while (ready_ && issueIndex_ < queue_.size()) {
    Transfer& t = queue_[issueIndex_];
    const size_t before = t.offset;
    const bool done = t.bytes == 0 || (t.eager ? issueEager(t) : issueLarge(t));
    any |= t.offset != before;
    if (!done) break;
    t.issued = true;
    ++issueIndex_;
    any = true;
  }
  return any;
}

bool IbSendConnection::retire() {
  bool any = false;
  while (!queue_.empty() && queue_.front().issued && queue_.front().outstanding == 0) {
    Transfer& t = queue_.front();
    if (t.registration) link_.device().cache().release(t.registration);
    link_.device().transferFinished();
    bytesMoved_ += t.bytes;
    queue_.pop_front();
    --issueIndex_;
    ++completed_;
    any = true;
  }
  return any;
}

bool IbSendConnection::progress() {
  link_.checkHealth();
  link_.consumeEvents();
  bool moved = false;
  if (!ready_) {
    if (!finishSetup()) return false;
    moved = true;
  }
  moved |= pollCompletions();
  moved |= issue();
  moved |= retire();
  if (!moved && completed_ < posted_) {
    // About to let the engine sleep: arm, then look once more.
    if (link_.arm() && pollCompletions()) {
      issue();
      retire();
      return true;
    }
    checkPeer(false);
  }
  return moved;
}

}  // namespace tidal::ib
