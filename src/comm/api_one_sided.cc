// The C API of the one-sided calls (tidalPutSignal, tidalSignal,
// tidalWaitSignal) and tidalWinGetUserPtr: argument validation (argument,
// value, rank); the work is OneSided's (one_sided.h).
//
// Inside a group, a put or a signal is made when it is called (NCCL only
// promises that it is complete at tidalGroupEnd), and a wait is kept for
// tidalGroupEnd, after the group's collectives: so a group that waits for
// signals before it sends its own, as in a barrier written either way
// round, cannot wait for itself.
#include <string>
#include <vector>

#include "comm/api_guard.h"
#include "comm/group.h"

using namespace tidal;

namespace {

void checkPeerRank(tidalComm_t comm, const char* fn, const char* argName, int peer) {
  const int n = comm->impl->nranks();
  if (peer < 0 || peer >= n) {
    fail(tidalInvalidArgument, "{}: {} {} is out of range for {} ranks (valid: 0..{})",
         where(comm, fn), argName, peer, n, n - 1);
  }
}

// sigIdx, ctx and flags: NCCL 2.29 takes only 0 for each.
// `prefix` names where they are ("signalDescs[2]." or "").
void checkReserved(tidalComm_t comm, const char* fn, const std::string& prefix, int sigIdx, int ctx,
                   unsigned int flags) {
  if (sigIdx != 0) {
    fail(tidalInvalidArgument, "{}: {}sigIdx {} is not supported (only 0, as NCCL 2.29)",
         where(comm, fn), prefix, sigIdx);
  }
  if (ctx != 0) {
    fail(tidalInvalidArgument, "{}: {}ctx {} is not supported (only 0, as NCCL 2.29)",
         where(comm, fn), prefix, ctx);
  }
  if (flags != 0) {
    fail(tidalInvalidArgument, "{}: flags {:#x} is not supported (only 0, as NCCL 2.29)",
         where(comm, fn), flags);
  }
}

void checkNoStream(tidalComm_t comm, const char* fn, void* stream) {
  if (stream != nullptr) {
    fail(tidalInvalidUsage,
         "{}: stream {} given; one-sided calls run on the host and complete before they return: "
         "pass NULL",
         where(comm, fn), stream);
  }
}

}  // namespace

extern "C" {

tidalResult_t tidalWinGetUserPtr(tidalComm_t comm, tidalWindow_t win, void** outUserPtr) {
  constexpr const char* fn = "tidalWinGetUserPtr";
  return guarded(comm, [&] {
    checkComm(comm, fn);
    if (!outUserPtr) fail(tidalInvalidArgument, "{}: outUserPtr is NULL", where(comm, fn));
    *outUserPtr = nullptr;
    const auto r = comm->registrations.find(win);
    if (!r || !r->window) {
      fail(tidalInvalidArgument, "{}: win {} is not a window of this communicator", where(comm, fn),
           static_cast<void*>(win));
    }
    *outUserPtr = r->pointer;
  });
}

tidalResult_t tidalPutSignal(const void* localbuff, size_t count, tidalDataType_t datatype,
                             int peer, tidalWindow_t peerWin, size_t peerWinOffset, int sigIdx,
                             int ctx, unsigned int flags, tidalComm_t comm, void* stream) {
  constexpr const char* fn = "tidalPutSignal";
  return groupGuarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    checkType(comm, fn, datatype);
    checkPeerRank(comm, fn, "peer", peer);
    checkReserved(comm, fn, "", sigIdx, ctx, flags);
    const size_t bytes = checkBytes(comm, fn, "count", count, 1, datatype);
    checkBuffer(comm, fn, "localbuff", localbuff, bytes);
    if (!peerWin) fail(tidalInvalidArgument, "{}: peerWin is NULL", where(comm, fn));
    const auto r = comm->registrations.find(peerWin);
    if (!r || !r->window) {
      fail(tidalInvalidArgument, "{}: peerWin {} is not a window of this communicator",
           where(comm, fn), static_cast<void*>(peerWin));
    }
    checkNoStream(comm, fn, stream);
    if (bytes > 0 && cuda::usable() && cuda::classify(localbuff).kind == MemoryKind::Cuda) {
      fail(tidalInvalidUsage,
           "{}: localbuff {} is CUDA device memory; one-sided calls move host "
           "memory only",
           where(comm, fn), localbuff);
    }
    c.putSignal(localbuff, bytes, peer, *r->spans, peerWinOffset);
  });
}

tidalResult_t tidalSignal(int peer, int sigIdx, int ctx, unsigned int flags, tidalComm_t comm,
                          void* stream) {
  constexpr const char* fn = "tidalSignal";
  return groupGuarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    checkPeerRank(comm, fn, "peer", peer);
    checkReserved(comm, fn, "", sigIdx, ctx, flags);
    checkNoStream(comm, fn, stream);
    c.signal(peer);
  });
}

tidalResult_t tidalWaitSignal(int nDesc, tidalWaitSignalDesc_t* signalDescs, tidalComm_t comm,
                              void* stream) {
  constexpr const char* fn = "tidalWaitSignal";
  return groupGuarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    if (nDesc <= 0)
      fail(tidalInvalidArgument, "{}: nDesc {} is not positive", where(comm, fn), nDesc);
    if (!signalDescs) {
      fail(tidalInvalidArgument, "{}: signalDescs is NULL (nDesc {})", where(comm, fn), nDesc);
    }
    std::vector<OneSided::Wait> waits;
    for (int i = 0; i < nDesc; ++i) {
      const tidalWaitSignalDesc_t& d = signalDescs[i];
      if (d.opCnt <= 0) {
        fail(tidalInvalidArgument, "{}: signalDescs[{}].opCnt {} is not positive", where(comm, fn),
             i, d.opCnt);
      }
      const std::string prefix = "signalDescs[" + std::to_string(i) + "].";
      checkPeerRank(comm, fn, (prefix + "peer").c_str(), d.peer);
      checkReserved(comm, fn, prefix, d.sigIdx, d.ctx, 0);
      waits.push_back({d.peer, static_cast<uint64_t>(d.opCnt)});
    }
    checkNoStream(comm, fn, stream);
    group::runOrQueue(c, [waits, &c] { c.waitSignal(waits); });
  });
}

}  // extern "C"
