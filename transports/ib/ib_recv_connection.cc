#include "transports/ib/ib_recv_connection.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "net/wire.h"

namespace tidal::ib {

namespace {

IbLink::Depths receiverDepths(const ConnectionGeometry& g) {
  return {kFifoDepth + 16, 1, 2 * kFifoDepth + g.eagerSlots + 8, 2 * kFifoDepth + 8};
}

}  // namespace

IbRecvConnection::IbRecvConnection(std::shared_ptr<IbDevice> device, int selfRank,
                                   const Hello& hello, QpOptions options, Socket socket,
                                   Deadline deadline)
    : IbConnection(hello.fromRank),
      geometry_(hello.geometry),
      options_(options),
      fifoRemote_(hello.fifoAddr),
      fifoRkey_(hello.fifoRkey),
      ring_(size_t{hello.geometry.eagerSlots} * std::max<uint32_t>(hello.geometry.eagerBytes, 1)),
      ctsSource_(kFifoDepth),
      link_(device,
            fmt::format("rank {}: ib connection from rank {}{}", selfRank, hello.fromRank,
                        railText(hello.rail, *device)),
            hello.geometry.nqps, receiverDepths(hello.geometry)),
      eagerLength_(hello.geometry.eagerSlots, 0) {
  ringReg_ = link_.pinOwned(ring_.data(), ring_.size());
  ctsReg_ = link_.pinOwned(ctsSource_.data(), ctsSource_.size() * sizeof(CtsEntry));
  const ibv_mtu pathMtu = std::min(device->activeMtu(), hello.port.mtu);
  link_.connect(hello.qps, hello.port, pathMtu, options_);
  Reply reply;
  reply.port = link_.localAddress();
  reply.eagerAddr = reinterpret_cast<uintptr_t>(ring_.data());
  reply.eagerRkey = ringReg_->mr->rkey;
  reply.qps = link_.endpoints();
  const auto payload = encodeReply(reply);
  wire::sendMessage(socket, wire::MsgType::IbReply, payload.data(), payload.size(), deadline,
                    fmt::format("{}: reply", link_.who()));
  link_.setSocket(std::move(socket));
  describeAs(pathText(*device, pathMtu), geometryText(geometry_));
}

IbRecvConnection::~IbRecvConnection() {
  link_.drainSends();
  for (auto& t : queue_) {
    if (t.registration) link_.device().cache().release(t.registration);
    link_.device().transferFinished();
  }
}

void IbRecvConnection::post(void* data, size_t bytes) {
  Transfer t{posted_++, static_cast<char*>(data), bytes,
             bytes > 0 && bytes <= geometry_.eagerBytes};
  if (t.eager) t.eagerIndex = eagerPosted_++;
  queue_.push_back(t);
  link_.device().transferStarted();
}

void IbRecvConnection::lost(const std::string& why) const {
  link_.lost(description_, why, bytesMoved_, posted_, completed_);
}

bool IbRecvConnection::readReady() {
  char byte = 0;
  size_t n = 0;
  try {
    n = link_.socket().recvSome(&byte, 1, link_.who());
  } catch (const Error&) {
    lost("the peer closed the set-up channel before its QPs were ready");
  }
  if (n == 0) return false;
  if (byte != 1) lost("the peer sent a bad ready byte");
  ready_ = true;
  return true;
}

void IbRecvConnection::onCompletion(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) {
    link_.checkHealth();
    std::string why;
    if (ready_ && link_.peerGone(why)) lost(why);
    fail(tidalRemoteError, "{}: {} after {} bytes; the path to rank {} is broken", link_.who(),
         link_.completionError(wc), bytesMoved_, peer_);
  }
  const size_t qp = wrQp(wc.wr_id);
  switch (wrKind(wc.wr_id)) {
    case WrKind::Recv: {
      const uint32_t imm = ntohl(wc.imm_data);
      if (immKind(imm) == ImmKind::Data) {
        const uint64_t seq = widen(completed_, immValue(imm));
        const uint64_t i = seq - completed_;
        if (i >= queue_.size() || !queue_[i].advertised ||
            queue_[i].arrived + wc.byte_len > queue_[i].bytes) {
          fail(tidalInternalError, "{}: {} bytes for transfer {} that did not ask for them",
               link_.who(), wc.byte_len, seq);
        }
        queue_[i].arrived += wc.byte_len;
      } else if (immKind(imm) == ImmKind::Eager) {
        const uint64_t index = widen(eagerArrived_, immValue(imm));
        if (index != eagerArrived_) {
          fail(tidalInternalError, "{}: eager message {} arrived, expected {}", link_.who(), index,
               eagerArrived_);
        }
        eagerLength_[index % geometry_.eagerSlots] = wc.byte_len;
        ++eagerArrived_;
      } else {
        fail(tidalInternalError, "{}: unexpected immediate {:#x} from the sender", link_.who(),
             imm);
      }
      link_.repostRecv(qp);
      break;
    }
    case WrKind::Cts:
    case WrKind::Credit:
      link_.sendDone(qp);
      break;
    default:
      fail(tidalInternalError, "{}: unexpected completion id {:#x}", link_.who(), wc.wr_id);
  }
}

bool IbRecvConnection::pollCompletions() {
  return link_.pollEach([this](const ibv_wc& wc) { onCompletion(wc); });
}

bool IbRecvConnection::advertise() {
  bool any = false;
  while (ready_ && advertiseIndex_ < queue_.size()) {
    Transfer& t = queue_[advertiseIndex_];
    if (t.bytes == 0 || t.eager) {
      ++advertiseIndex_;
      continue;
    }
    if (ctsSent_ - ctsRetired_ >= kFifoDepth || !link_.sendSpace(0)) break;
    t.registration = link_.device().cache().acquire(t.data, t.bytes);
    const size_t slot = ctsSent_ % kFifoDepth;
    ctsSource_[slot] =
        CtsEntry{t.seq, reinterpret_cast<uintptr_t>(t.data), t.bytes, t.registration->mr->rkey, 0};
    const bool inlineData = sizeof(CtsEntry) <= link_.maxInline();
    link_.postWrite(0, makeWrId(WrKind::Cts, 0, ctsSent_), &ctsSource_[slot],
                    inlineData ? 0 : ctsReg_->mr->lkey, sizeof(CtsEntry),
                    fifoRemote_ + slot * sizeof(CtsEntry), fifoRkey_,
                    makeImm(ImmKind::Cts, ctsSent_), inlineData);
    ++ctsSent_;
    t.advertised = true;
    ++advertiseIndex_;
    any = true;
  }
  return any;
}

bool IbRecvConnection::copyEager() {
  bool any = false;
  for (auto& t : queue_) {
    if (!t.eager || t.done) continue;
    if (t.eagerIndex >= eagerArrived_) break;  // eager transfers arrive in post order
    const size_t slot = t.eagerIndex % geometry_.eagerSlots;
    if (eagerLength_[slot] != t.bytes) {
      fail(tidalInvalidUsage,
           "{}: transfer {} is {} bytes here but rank {} sent {} bytes for it: the ranks called "
           "different collectives, counts or types",
           link_.who(), t.seq, t.bytes, peer_, eagerLength_[slot]);
    }
    std::memcpy(t.data, ring_.data() + slot * geometry_.eagerBytes, t.bytes);
    t.done = true;
    ++eagerConsumed_;
    any = true;
  }
  return any;
}

bool IbRecvConnection::returnCredits() {
  const uint64_t batch = std::max<uint64_t>(1, geometry_.eagerSlots / 2);
  if (!ready_ || eagerConsumed_ - eagerCredited_ < batch || !link_.sendSpace(0)) return false;
  link_.postWrite(0, makeWrId(WrKind::Credit, 0, eagerConsumed_), nullptr, 0, 0, fifoRemote_,
                  fifoRkey_, makeImm(ImmKind::Credit, eagerConsumed_), false);
  eagerCredited_ = eagerConsumed_;
  return true;
}

bool IbRecvConnection::retire() {
  bool any = false;
  while (!queue_.empty()) {
    Transfer& t = queue_.front();
    const bool done = t.bytes == 0 || (t.eager ? t.done : t.advertised && t.arrived == t.bytes);
    if (!done) break;
    if (t.registration) {
      link_.device().flushWrites(*t.registration, t.data);
      link_.device().cache().release(t.registration);
    }
    if (t.advertised) ++ctsRetired_;
    link_.device().transferFinished();
    bytesMoved_ += t.bytes;
    queue_.pop_front();
    if (advertiseIndex_ > 0) --advertiseIndex_;
    ++completed_;
    any = true;
  }
  return any;
}

bool IbRecvConnection::progress() {
  link_.checkHealth();
  link_.consumeEvents();
  bool moved = !ready_ && readReady();
  moved |= pollCompletions();
  moved |= copyEager();
  moved |= advertise();
  moved |= returnCredits();
  moved |= retire();
  if (!moved && completed_ < posted_) {
    if (link_.arm() && pollCompletions()) {
      copyEager();
      advertise();
      returnCredits();
      retire();
      return true;
    }
    std::string why;
    if (ready_ && link_.peerGoneThrottled(why)) lost(why);
  }
  return moved;
}

}  // namespace tidal::ib
