// The C API of point-to-point calls, personalised exchanges, groups and
// split: argument validation (argument, value, rank) and nothing else; the
// work is the communicator's (communicator.h) and the group's (group.h).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "comm/api_guard.h"
#include "comm/group.h"

using namespace tidal;

namespace {

void checkPeer(tidalComm_t comm, const char* fn, int peer) {
  const int n = comm->impl->nranks();
  if (peer < 0 || peer >= n) {
    fail(tidalInvalidArgument, "{}: peer {} is out of range for {} ranks (valid: 0..{})",
         where(comm, fn), peer, n, n - 1);
  }
}

// Largest element index + 1 an AllToAllv layout touches in one buffer,
// checked for overflow; the names are the arguments' ("sendcounts", "sdispls").
size_t extentOf(tidalComm_t comm, const char* fn, const char* countsName, const char* displsName,
                const size_t* counts, const size_t* displs, size_t n, tidalDataType_t type) {
  size_t extent = 0;
  for (size_t p = 0; p < n; ++p) {
    if (counts[p] == 0) continue;
    if (displs[p] > SIZE_MAX - counts[p]) {
      fail(tidalInvalidArgument, "{}: {}[{}] = {} plus {}[{}] = {} overflows", where(comm, fn),
           displsName, p, displs[p], countsName, p, counts[p]);
    }
    extent = std::max(extent, displs[p] + counts[p]);
  }
  checkBytes(comm, fn, countsName, extent, 1, type);
  return extent;
}

}  // namespace

extern "C" {

tidalResult_t tidalBcast(void* buff, size_t count, tidalDataType_t datatype, int root,
                         tidalComm_t comm, void* stream) {
  return tidalBroadcast(buff, buff, count, datatype, root, comm, stream);
}

tidalResult_t tidalAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                            tidalDataType_t datatype, tidalComm_t comm, void* stream) {
  constexpr const char* fn = "tidalAlltoAll";
  return groupGuarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    checkType(comm, fn, datatype);
    const size_t bytes =
        checkBytes(comm, fn, "count", count, static_cast<size_t>(c.nranks()), datatype);
    checkBuffer(comm, fn, "sendbuff", sendbuff, bytes);
    checkBuffer(comm, fn, "recvbuff", recvbuff, bytes);
    checkOverlap(comm, fn, sendbuff, bytes, recvbuff, bytes, sendbuff == recvbuff);
    const CallMemory memory = checkMemory(
        comm, fn, stream, {{"sendbuff", sendbuff, bytes}, {"recvbuff", recvbuff, bytes}});
    group::runOrQueue(c, [=, &c] { c.allToAll(sendbuff, recvbuff, count, datatype, memory); });
  });
}

tidalResult_t tidalAllToAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                             void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                             tidalDataType_t datatype, tidalComm_t comm, void* stream) {
  constexpr const char* fn = "tidalAllToAllv";
  return groupGuarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    checkType(comm, fn, datatype);
    for (auto [name, array] :
         {std::pair{"sendcounts", sendcounts}, std::pair{"sdispls", sdispls},
          std::pair{"recvcounts", recvcounts}, std::pair{"rdispls", rdispls}}) {
      if (!array) fail(tidalInvalidArgument, "{}: {} is NULL", where(comm, fn), name);
    }
    const auto n = static_cast<size_t>(c.nranks());
    const size_t ts = typeSize(datatype);
    const size_t sendBytes =
        extentOf(comm, fn, "sendcounts", "sdispls", sendcounts, sdispls, n, datatype) * ts;
    const size_t recvBytes =
        extentOf(comm, fn, "recvcounts", "rdispls", recvcounts, rdispls, n, datatype) * ts;
    checkBuffer(comm, fn, "sendbuff", sendbuff, sendBytes);
    checkBuffer(comm, fn, "recvbuff", recvbuff, recvBytes);
    checkOverlap(comm, fn, sendbuff, sendBytes, recvbuff, recvBytes, false);
    const CallMemory memory = checkMemory(
        comm, fn, stream, {{"sendbuff", sendbuff, sendBytes}, {"recvbuff", recvbuff, recvBytes}});
    coll::AllToAllvLayout layout{{sendcounts, sendcounts + n},
                                 {sdispls, sdispls + n},
                                 {recvcounts, recvcounts + n},
                                 {rdispls, rdispls + n}};
    group::runOrQueue(c, [=, &c, layout = std::move(layout)] {
      c.allToAllv(sendbuff, recvbuff, layout, datatype, memory);
    });
  });
}

}  // extern "C"

namespace {

// Gather and Scatter share their checks: at the root one buffer holds n
// blocks (recvbuff for Gather, sendbuff for Scatter), elsewhere only the
// rank's own block matters; in place, the root's block sits inside the big one.
tidalResult_t rootedExchange(const char* fn, bool gather, const void* sendbuff, void* recvbuff,
                             size_t count, tidalDataType_t datatype, int root, tidalComm_t comm,
                             void* stream) {
  return groupGuarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    checkType(comm, fn, datatype);
    checkRoot(comm, fn, root);
    const size_t all =
        checkBytes(comm, fn, "count", count, static_cast<size_t>(c.nranks()), datatype);
    const size_t mine = all / static_cast<size_t>(c.nranks());
    const bool isRoot = c.rank() == root;
    const size_t sendBytes = gather ? mine : (isRoot ? all : 0);
    const size_t recvBytes = gather ? (isRoot ? all : 0) : mine;
    checkBuffer(comm, fn, "sendbuff", sendbuff, sendBytes);
    checkBuffer(comm, fn, "recvbuff", recvbuff, recvBytes);
    const auto* big = static_cast<const char*>(gather ? recvbuff : sendbuff);
    const void* small = gather ? sendbuff : recvbuff;
    const bool inPlace = isRoot && small == big + static_cast<size_t>(root) * mine;
    checkOverlap(comm, fn, sendbuff, sendBytes, recvbuff, recvBytes, inPlace);
    const CallMemory memory = checkMemory(
        comm, fn, stream, {{"sendbuff", sendbuff, sendBytes}, {"recvbuff", recvbuff, recvBytes}});
    group::runOrQueue(c, [=, &c] {
      if (gather) {
        c.gather(sendbuff, recvbuff, count, datatype, root, memory);
      } else {
        c.scatter(sendbuff, recvbuff, count, datatype, root, memory);
      }
    });
  });
}

}  // namespace

extern "C" {

tidalResult_t tidalGather(const void* sendbuff, void* recvbuff, size_t count,
                          tidalDataType_t datatype, int root, tidalComm_t comm, void* stream) {
  return rootedExchange("tidalGather", true, sendbuff, recvbuff, count, datatype, root, comm,
                        stream);
}

tidalResult_t tidalScatter(const void* sendbuff, void* recvbuff, size_t count,
                           tidalDataType_t datatype, int root, tidalComm_t comm, void* stream) {
  return rootedExchange("tidalScatter", false, sendbuff, recvbuff, count, datatype, root, comm,
                        stream);
}

tidalResult_t tidalSend(const void* sendbuff, size_t count, tidalDataType_t datatype, int peer,
                        tidalComm_t comm, void* stream) {
  constexpr const char* fn = "tidalSend";
  return groupGuarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    checkType(comm, fn, datatype);
    checkPeer(comm, fn, peer);
    const size_t bytes = checkBytes(comm, fn, "count", count, 1, datatype);
    checkBuffer(comm, fn, "sendbuff", sendbuff, bytes);
    const CallMemory memory = checkMemory(comm, fn, stream, {{"sendbuff", sendbuff, bytes}});
    group::pointToPoint(
        c, {coll::P2pOp::Kind::Send, peer, const_cast<void*>(sendbuff), bytes, datatype}, memory);
  });
}

tidalResult_t tidalRecv(void* recvbuff, size_t count, tidalDataType_t datatype, int peer,
                        tidalComm_t comm, void* stream) {
  constexpr const char* fn = "tidalRecv";
  return groupGuarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    checkType(comm, fn, datatype);
    checkPeer(comm, fn, peer);
    const size_t bytes = checkBytes(comm, fn, "count", count, 1, datatype);
    checkBuffer(comm, fn, "recvbuff", recvbuff, bytes);
    const CallMemory memory = checkMemory(comm, fn, stream, {{"recvbuff", recvbuff, bytes}});
    group::pointToPoint(c, {coll::P2pOp::Kind::Recv, peer, recvbuff, bytes, datatype}, memory);
  });
}

tidalResult_t tidalGroupStart(void) {
  return guarded(nullptr, [] { group::start(); });
}

tidalResult_t tidalGroupEnd(void) {
  return guarded(nullptr, [] { group::end(); });
}

tidalResult_t tidalGroupSimulateEnd(tidalSimInfo_t* simInfo) {
  constexpr const char* fn = "tidalGroupSimulateEnd";
  return guarded(nullptr, [&] {
    if (!simInfo) {
      fail(tidalInvalidArgument,
           "{}: simInfo is NULL; pass a tidalSimInfo_t set to TIDAL_SIM_INFO_INITIALIZER (an "
           "open group stays open)",
           fn);
    }
    if (simInfo->size != sizeof(tidalSimInfo_t) || simInfo->magic != TIDAL_API_MAGIC) {
      fail(tidalInvalidArgument,
           "{}: simInfo has size {} and magic {:#x}, where TIDAL_SIM_INFO_INITIALIZER sets {} "
           "and {:#x}; initialize it with TIDAL_SIM_INFO_INITIALIZER (an open group stays open)",
           fn, simInfo->size, simInfo->magic, sizeof(tidalSimInfo_t), TIDAL_API_MAGIC);
    }
    if (const std::optional<double> micros = group::simulateEnd()) {
      simInfo->estimatedTime = static_cast<float>(*micros);
    }
  });
}

tidalResult_t tidalCommSplit(tidalComm_t comm, int color, int key, tidalComm_t* newcomm,
                             tidalConfig_t* config) {
  constexpr const char* fn = "tidalCommSplit";
  return guarded(comm, [&] {
    Communicator& c = checkComm(comm, fn);
    if (!newcomm) fail(tidalInvalidArgument, "{}: newcomm is NULL", where(comm, fn));
    *newcomm = nullptr;
    if (color < 0 && color != TIDAL_SPLIT_NOCOLOR) {
      fail(tidalInvalidArgument,
           "{}: color {} is negative; use a color >= 0, or TIDAL_SPLIT_NOCOLOR ({}) to take part "
           "without joining",
           where(comm, fn), color, TIDAL_SPLIT_NOCOLOR);
    }
    if (group::active()) {
      fail(tidalInvalidUsage, "{}: called inside a tidalGroupStart/End group; split outside it",
           where(comm, fn));
    }
    // commName is honoured; the split itself always completes before it returns.
    const InitOptions options = readConfig(config, fn, c.rank());
    std::unique_ptr<Communicator> made = c.split(color, key);
    if (!made) return;
    auto handle = std::make_unique<tidalComm>();
    handle->name = options.name;
    if (!options.name.empty()) handle->prefix = fmt::format("comm '{}' ", options.name);
    handle->impl = std::move(made);
    *newcomm = handle.release();
  });
}

}  // extern "C"
