// The C API: argument validation, error capture, and nothing else.
//
// Every entry point validates its arguments and reports a bad one with
// tidalInvalidArgument and a message naming the argument, its value and the
// rank. Internal failures arrive as tidal::Error exceptions and are turned
// into a result code plus last-error text here; no exception crosses into C.
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher_env.h"
#include "comm/api_guard.h"
#include "comm/call_memory.h"
#include "comm/communicator.h"
#include "comm/group.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "cuda/cuda_support.h"
#include "tidal/tidal.h"

using namespace tidal;

extern "C" {

tidalResult_t tidalGetVersion(int* version) {
  return guarded(nullptr, [&] {
    if (!version) fail(tidalInvalidArgument, "tidalGetVersion: version is NULL");
    *version = TIDAL_VERSION_CODE;
  });
}

tidalResult_t tidalGetUniqueId(tidalUniqueId* uniqueId) {
  return guarded(nullptr, [&] {
    if (!uniqueId) fail(tidalInvalidArgument, "tidalGetUniqueId: uniqueId is NULL");
    UniqueId id;
    id.secret = randomSecret();
    id.root = startRoot(localInterfaceAddress(), id.secret);
    *uniqueId = encodeUniqueId(id);
  });
}

tidalResult_t tidalCommInitRank(tidalComm_t* comm, int nranks, tidalUniqueId commId, int rank) {
  return initCommunicator("tidalCommInitRank", comm, nranks, rank, commId, nullptr);
}

tidalResult_t tidalCommInitAll(tidalComm_t* comms, int ndev, const int* devlist) {
  return guarded(nullptr, [&] {
    if (!comms) fail(tidalInvalidArgument, "tidalCommInitAll: comms is NULL");
    if (ndev < 1) fail(tidalInvalidArgument, "tidalCommInitAll: ndev {} must be at least 1", ndev);
    if (devlist) {
      // Rank r's communicator uses CUDA device devlist[r] (set on its thread).
      if (!cuda::usable()) {
        fail(tidalInvalidUsage, "tidalCommInitAll: devlist given, but {}",
             cuda::unavailableReason());
      }
      for (int r = 0; r < ndev; ++r) {
        if (devlist[r] < 0 || devlist[r] >= cuda::deviceCount()) {
          fail(tidalInvalidArgument,
               "tidalCommInitAll: devlist[{}] = {} is not a CUDA device ({} device(s): 0..{})", r,
               devlist[r], cuda::deviceCount(), cuda::deviceCount() - 1);
        }
      }
    }
    tidalUniqueId id;
    if (tidalResult_t r = tidalGetUniqueId(&id); r != tidalSuccess) {
      fail(r, "tidalCommInitAll: {}", threadLastError);
    }
    std::vector<tidalResult_t> results(static_cast<size_t>(ndev), tidalSuccess);
    std::vector<std::string> errors(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    for (int r = 0; r < ndev; ++r) {
      threads.emplace_back([&, r] {
        if (devlist) {
          try {
            cuda::setCurrentDevice(devlist[r]);
          } catch (const Error& e) {
            results[r] = e.code();
            errors[r] = e.what();
            comms[r] = nullptr;
            return;
          }
        }
        results[r] = tidalCommInitRank(&comms[r], ndev, id, r);
        if (results[r] != tidalSuccess) errors[r] = threadLastError;
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < ndev; ++r) {
      if (results[r] == tidalSuccess) continue;
      for (int k = 0; k < ndev; ++k) {
        if (results[k] == tidalSuccess) tidalCommDestroy(comms[k]);
        comms[k] = nullptr;
      }
      fail(results[r], "tidalCommInitAll: {}", errors[r]);
    }
  });
}

tidalResult_t tidalCommInitFromEnv(tidalComm_t* comm) {
  return guarded(nullptr, [&] {
    if (!comm) fail(tidalInvalidArgument, "tidalCommInitFromEnv: comm is NULL");
    *comm = nullptr;
    const LaunchInfo launch = detectLaunch();
    const UniqueId id = agreeOnUniqueId(launch);
    TIDAL_INFO(Init, "rank {}/{} launched by {}", launch.rank, launch.nranks, launch.launcher);
    auto handle = std::make_unique<tidalComm>();
    handle->impl = Communicator::create(id, launch.rank, launch.nranks);
    *comm = handle.release();
  });
}

tidalResult_t tidalCommDestroy(tidalComm_t comm) {
  if (deleteIfNoCommunicator(comm)) return tidalSuccess;
  return guarded(nullptr, [&] {
    checkComm(comm, "tidalCommDestroy");
    comm->impl->waitForCallsToLeave();
    comm->impl->closeWhenAllDone();
    delete comm;
  });
}

tidalResult_t tidalCommAbort(tidalComm_t comm) {
  if (deleteIfNoCommunicator(comm)) return tidalSuccess;
  return guarded(nullptr, [&] {
    checkComm(comm, "tidalCommAbort");
    comm->impl->abort();
    comm->impl->waitForCallsToLeave();
    delete comm;
  });
}

tidalResult_t tidalCommCount(const tidalComm_t comm, int* count) {
  return guarded(comm, [&] {
    checkComm(comm, "tidalCommCount");
    if (!count) fail(tidalInvalidArgument, "{}: count is NULL", where(comm, "tidalCommCount"));
    *count = comm->impl->nranks();
  });
}

tidalResult_t tidalCommUserRank(const tidalComm_t comm, int* rank) {
  return guarded(comm, [&] {
    checkComm(comm, "tidalCommUserRank");
    if (!rank) fail(tidalInvalidArgument, "{}: rank is NULL", where(comm, "tidalCommUserRank"));
    *rank = comm->impl->rank();
  });
}

tidalResult_t tidalCommGetAsyncError(tidalComm_t comm, tidalResult_t* asyncError) {
  if (asyncError && asyncInitStatus(comm, asyncError)) return tidalSuccess;
  return guarded(comm, [&] {
    checkComm(comm, "tidalCommGetAsyncError");
    if (!asyncError) {
      fail(tidalInvalidArgument, "{}: asyncError is NULL", where(comm, "tidalCommGetAsyncError"));
    }
    *asyncError = comm->impl->asyncError();
  });
}

const char* tidalGetErrorString(tidalResult_t result) {
  switch (result) {
    case tidalSuccess:
      return "no error";
    case tidalUnhandledCudaError:
      return "unhandled CUDA error";
    case tidalSystemError:
      return "system error (a system call or allocation failed)";
    case tidalInternalError:
      return "internal error (a Tidal bug)";
    case tidalInvalidArgument:
      return "invalid argument";
    case tidalInvalidUsage:
      return "invalid usage";
    case tidalRemoteError:
      return "remote error (a peer failed, exited or disconnected)";
    case tidalInProgress:
      return "operation in progress";
    case tidalTimeout:
      return "timeout (no progress within TIDAL_TIMEOUT)";
    case tidalNumResults:
      break;
  }
  return "unknown result code";
}

const char* tidalGetLastError(tidalComm_t comm) {
  if (comm && comm->pending && settle(comm, false) && !comm->impl) {
    return comm->pending->error.c_str();
  }
  if (comm && comm->impl) return comm->impl->lastError();
  return threadLastError.c_str();
}

tidalResult_t tidalAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             tidalDataType_t datatype, tidalRedOp_t op, tidalComm_t comm,
                             void* stream) {
  constexpr const char* fn = "tidalAllReduce";
  // An invalid datatype stays on the plain path, whose checkType names it
  // before anything loads it.
  if (isPreMulSumOp(op) && isValidType(enumBits(datatype)))
    return preMulSumAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
  return groupGuarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    checkType(comm, fn, datatype);
    checkOp(comm, fn, op);
    const size_t bytes = checkBytes(comm, fn, "count", count, 1, datatype);
    checkBuffer(comm, fn, "sendbuff", sendbuff, bytes);
    checkBuffer(comm, fn, "recvbuff", recvbuff, bytes);
    checkOverlap(comm, fn, sendbuff, bytes, recvbuff, bytes, sendbuff == recvbuff);
    const CallMemory memory = checkMemory(
        comm, fn, stream, {{"sendbuff", sendbuff, bytes}, {"recvbuff", recvbuff, bytes}});
    group::runOrQueue(c, [=, &c] { c.allReduce(sendbuff, recvbuff, count, datatype, op, memory); });
  });
}

tidalResult_t tidalAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             tidalDataType_t datatype, tidalComm_t comm, void* stream) {
  constexpr const char* fn = "tidalAllGather";
  return groupGuarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    checkType(comm, fn, datatype);
    const size_t n = static_cast<size_t>(c.nranks());
    const size_t recvBytes = checkBytes(comm, fn, "sendcount", sendcount, n, datatype);
    const size_t sendBytes = recvBytes / n;
    checkBuffer(comm, fn, "sendbuff", sendbuff, sendBytes);
    checkBuffer(comm, fn, "recvbuff", recvbuff, recvBytes);
    const bool inPlace =
        sendbuff == static_cast<const char*>(recvbuff) + static_cast<size_t>(c.rank()) * sendBytes;
    checkOverlap(comm, fn, sendbuff, sendBytes, recvbuff, recvBytes, inPlace);
    const CallMemory memory = checkMemory(
        comm, fn, stream, {{"sendbuff", sendbuff, sendBytes}, {"recvbuff", recvbuff, recvBytes}});
    group::runOrQueue(c, [=, &c] { c.allGather(sendbuff, recvbuff, sendcount, datatype, memory); });
  });
}

tidalResult_t tidalReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 tidalDataType_t datatype, tidalRedOp_t op, tidalComm_t comm,
                                 void* stream) {
  constexpr const char* fn = "tidalReduceScatter";
  // An invalid datatype stays on the plain path, whose checkType names it
  // before anything loads it.
  if (isPreMulSumOp(op) && isValidType(enumBits(datatype)))
    return preMulSumReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
  return groupGuarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    checkType(comm, fn, datatype);
    checkOp(comm, fn, op);
    const size_t n = static_cast<size_t>(c.nranks());
    const size_t sendBytes = checkBytes(comm, fn, "recvcount", recvcount, n, datatype);
    const size_t recvBytes = sendBytes / n;
    checkBuffer(comm, fn, "sendbuff", sendbuff, sendBytes);
    checkBuffer(comm, fn, "recvbuff", recvbuff, recvBytes);
    const bool inPlace =
        recvbuff == static_cast<const char*>(sendbuff) + static_cast<size_t>(c.rank()) * recvBytes;
    checkOverlap(comm, fn, sendbuff, sendBytes, recvbuff, recvBytes, inPlace);
    const CallMemory memory = checkMemory(
        comm, fn, stream, {{"sendbuff", sendbuff, sendBytes}, {"recvbuff", recvbuff, recvBytes}});
    group::runOrQueue(
        c, [=, &c] { c.reduceScatter(sendbuff, recvbuff, recvcount, datatype, op, memory); });
  });
}

tidalResult_t tidalBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                             tidalDataType_t datatype, int root, tidalComm_t comm, void* stream) {
  constexpr const char* fn = "tidalBroadcast";
  return groupGuarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    checkType(comm, fn, datatype);
    checkRoot(comm, fn, root);
    const size_t bytes = checkBytes(comm, fn, "count", count, 1, datatype);
    // sendbuff matters only at the root.
    if (c.rank() == root) checkBuffer(comm, fn, "sendbuff", sendbuff, bytes);
    checkBuffer(comm, fn, "recvbuff", recvbuff, bytes);
    if (c.rank() == root) {
      checkOverlap(comm, fn, sendbuff, bytes, recvbuff, bytes, sendbuff == recvbuff);
    }
    const size_t rootBytes = c.rank() == root ? bytes : 0;
    const CallMemory memory = checkMemory(
        comm, fn, stream, {{"sendbuff", sendbuff, rootBytes}, {"recvbuff", recvbuff, bytes}});
    group::runOrQueue(c,
                      [=, &c] { c.broadcast(sendbuff, recvbuff, count, datatype, root, memory); });
  });
}

tidalResult_t tidalReduce(const void* sendbuff, void* recvbuff, size_t count,
                          tidalDataType_t datatype, tidalRedOp_t op, int root, tidalComm_t comm,
                          void* stream) {
  constexpr const char* fn = "tidalReduce";
  // An invalid datatype stays on the plain path, whose checkType names it
  // before anything loads it.
  if (isPreMulSumOp(op) && isValidType(enumBits(datatype)))
    return preMulSumReduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
  return groupGuarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    checkType(comm, fn, datatype);
    checkOp(comm, fn, op);
    checkRoot(comm, fn, root);
    const size_t bytes = checkBytes(comm, fn, "count", count, 1, datatype);
    checkBuffer(comm, fn, "sendbuff", sendbuff, bytes);
    // recvbuff matters only at the root.
    if (c.rank() == root) {
      checkBuffer(comm, fn, "recvbuff", recvbuff, bytes);
      checkOverlap(comm, fn, sendbuff, bytes, recvbuff, bytes, sendbuff == recvbuff);
    }
    const size_t rootBytes = c.rank() == root ? bytes : 0;
    const CallMemory memory = checkMemory(
        comm, fn, stream, {{"sendbuff", sendbuff, bytes}, {"recvbuff", recvbuff, rootBytes}});
    group::runOrQueue(c,
                      [=, &c] { c.reduce(sendbuff, recvbuff, count, datatype, op, root, memory); });
  });
}

tidalResult_t tidalBarrier(tidalComm_t comm, void* stream) {
  constexpr const char* fn = "tidalBarrier";
  return groupGuarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    const CallMemory memory = checkMemory(comm, fn, stream, {});
    group::runOrQueue(c, [=, &c] { c.barrier(memory); });
  });
}

}  // extern "C"
