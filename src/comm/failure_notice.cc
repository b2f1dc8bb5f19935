// Every rank learns why a call failed, not only the ranks that saw it
// happen (net/notice.h has the protocol, docs/troubleshooting.md what users
// see).
//
// When ranks disagree about a call, the ranks that compare call signatures
// name the mismatch; the rest of the communicator only sees connections
// close as those ranks break off. So a failing call on host buffers ends
// here, on every rank, and each rank sends one notice to rank+1 on the
// bootstrap ring:
//   - a rank that found the fault itself (tidalInvalidUsage out of a run:
//     mismatched signatures, a truncating receive, calls out of step) tells
//     it before it closes its connections, so the notice is on its way before
//     the neighbours see the close;
//   - any other rank first closes its connections (the ranks it was talking
//     to fail now, not at their timeout), then waits up to kHearGrace for
//     rank-1's notice, passes on what it heard (or None) and fails with the
//     finding's text and code when there is one.
// A rank whose rank-1 is silent (stopped, killed without its socket
// closing, or not inside a call) fails with its own error after kHearGrace:
// the notice is an explanation, never something a rank waits for long.
//
// A rank whose call is still waiting also looks for rank-1's notice once the
// wait has stalled (the engine asks FailureNotices): closing connections
// does not reach every waiting peer (over libfabric a receive for a closed
// endpoint just stays pending), and without this such a rank would hear only
// at TIDAL_TIMEOUT. It then fails, hears the notice here and passes it on.
#include <algorithm>

#include "bootstrap/bootstrap.h"
#include "comm/communicator.h"
#include "core/log.h"

namespace tidal {

namespace {
// How long a failed call waits for rank-1's notice (capped by TIDAL_TIMEOUT).
constexpr std::chrono::milliseconds kHearGrace{2000};

// rank-1's notices, as the engine's stalled waits ask for them.
class RingNotices final : public FailureNotices {
 public:
  explicit RingNotices(const Bootstrap& bootstrap) : bootstrap_(bootstrap) {}
  int toldBy() override {
    if (!bootstrap_.noticeWaiting()) return -1;
    return (bootstrap_.rank() + bootstrap_.nranks() - 1) % bootstrap_.nranks();
  }

 private:
  const Bootstrap& bootstrap_;
};
}  // namespace

void Communicator::listenForFailureNotices() {
  if (nranks_ == 1) return;
  ringNotices_ = std::make_unique<RingNotices>(*bootstrap_);
  engine_->setFailureNotices(ringNotices_.get());
}

Error Communicator::shareFailure(const Error& e, const char* what) {
  // Broken already (tidalCommAbort, tidalCommRevoke, a shrink that aborted
  // the call, a failure on the device path): this call failed because of
  // that, which is this rank's own doing or already shared.
  if (broken_.load() != tidalSuccess || !bootstrap_ || nranks_ == 1) {
    breakWith(e);
    return e;
  }
  if (e.code() == tidalInvalidUsage) {
    bootstrap_->tell({wire::Notice::Kind::Finding, rank_, e.code(), e.what()});
    breakWith(e);
    return e;
  }
  closeConnections();
  const auto grace = std::min<std::chrono::milliseconds>(kHearGrace, engine_->options().timeout);
  const std::optional<wire::Notice> heard = bootstrap_->hear(grace);
  const bool explained = heard && heard->kind != wire::Notice::Kind::None;
  // A finding is passed on until it reaches the rank that sent it; otherwise
  // rank+1 is told there is nothing to wait for.
  const bool passOn = explained && (rank_ + 1) % nranks_ != heard->origin;
  bootstrap_->tell(passOn ? *heard : wire::Notice{wire::Notice::Kind::None, -1, e.code(), {}});
  if (!explained) {
    breakWith(e);
    return e;
  }
  TIDAL_TRACE(Coll, "rank {}: {} failed ({}); rank {} says why: {}", rank_, what, e.what(),
              heard->origin, heard->text);
  const Error told =
      heard->kind == wire::Notice::Kind::Finding
          ? Error(heard->code, fmt::format("rank {}: {} failed: rank {} found that the "
                                           "ranks' calls disagree and broke off: {}",
                                           rank_, what, heard->origin, heard->text))
          : Error(e.code(), fmt::format("rank {}: {} failed: {}", rank_, what, heard->text));
  breakWith(told);
  return told;
}

}  // namespace tidal
