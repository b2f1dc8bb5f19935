// libnccl.so.2: NCCL 2.30's host API with NCCL's ABI, forwarding to libtidal.
//
// A program compiled against NCCL's nccl.h runs on Tidal through
// LD_LIBRARY_PATH alone. Enums are translated value by value (never assumed to
// coincide), configs field by field within the size the caller's struct
// declares, results back by value. Calls Tidal lacks return ncclInvalidUsage
// and ncclGetLastError names them.
#include <cstddef>
#include <cstring>
#include <string>

#include "nccl.h"
#include "nccl_device.h"
#include "tidal/tidal.h"

#define NCCL_SHIM_API extern "C" __attribute__((visibility("default")))

namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(tidalUniqueId),
              "NCCL's unique id is 128 bytes; Tidal's must fit it exactly");

// Set by a failure the shim itself detects (an unknown enum, a call Tidal
// lacks); cleared by every call so that ncclGetLastError otherwise reports
// libtidal's text.
thread_local std::string shimError;

tidalComm_t toTidal(ncclComm_t comm) { return reinterpret_cast<tidalComm_t>(comm); }

ncclResult_t toNccl(tidalResult_t r) {
  switch (r) {
    case tidalSuccess:
      return ncclSuccess;
    case tidalUnhandledCudaError:
      return ncclUnhandledCudaError;
    case tidalSystemError:
      return ncclSystemError;
    case tidalInternalError:
      return ncclInternalError;
    case tidalInvalidArgument:
      return ncclInvalidArgument;
    case tidalInvalidUsage:
      return ncclInvalidUsage;
    case tidalRemoteError:
      return ncclRemoteError;
    case tidalInProgress:
      return ncclInProgress;
    case tidalTimeout:
      return ncclTimeout;
    case tidalNumResults:
      break;
  }
  return ncclInternalError;
}

bool toTidal(ncclResult_t r, tidalResult_t* out) {
  switch (r) {
    case ncclSuccess:
      *out = tidalSuccess;
      return true;
    case ncclUnhandledCudaError:
      *out = tidalUnhandledCudaError;
      return true;
    case ncclSystemError:
      *out = tidalSystemError;
      return true;
    case ncclInternalError:
      *out = tidalInternalError;
      return true;
    case ncclInvalidArgument:
      *out = tidalInvalidArgument;
      return true;
    case ncclInvalidUsage:
      *out = tidalInvalidUsage;
      return true;
    case ncclRemoteError:
      *out = tidalRemoteError;
      return true;
    case ncclInProgress:
      *out = tidalInProgress;
      return true;
    case ncclTimeout:
      *out = tidalTimeout;
      return true;
    case ncclNumResults:
      break;
  }
  return false;
}

std::string rankText(ncclComm_t comm) {
  int rank = -1;
  if (comm == nullptr || tidalCommUserRank(toTidal(comm), &rank) != tidalSuccess) return "";
  return " on rank " + std::to_string(rank);
}

ncclResult_t fail(ncclResult_t r, const char* call, const std::string& what, ncclComm_t comm) {
  shimError = std::string(call) + ": " + what + rankText(comm);
  return r;
}

bool toTidal(ncclDataType_t t, tidalDataType_t* out) {
  switch (t) {
    case ncclInt8:
      *out = tidalInt8;
      return true;
    case ncclUint8:
      *out = tidalUint8;
      return true;
    case ncclInt32:
      *out = tidalInt32;
      return true;
    case ncclUint32:
      *out = tidalUint32;
      return true;
    case ncclInt64:
      *out = tidalInt64;
      return true;
    case ncclUint64:
      *out = tidalUint64;
      return true;
    case ncclFloat16:
      *out = tidalFloat16;
      return true;
    case ncclFloat32:
      *out = tidalFloat32;
      return true;
    case ncclFloat64:
      *out = tidalFloat64;
      return true;
    case ncclBfloat16:
      *out = tidalBfloat16;
      return true;
    case ncclFloat8e4m3:
      *out = tidalFloat8e4m3;
      return true;
    case ncclFloat8e5m2:
      *out = tidalFloat8e5m2;
      return true;
    case ncclNumTypes:
      break;
  }
  return false;
}

// The built-in operators map by name; values from ncclRedOpCreatePreMulSum
// are Tidal's own handles (returned to the caller unchanged) and pass through.
bool toTidal(ncclRedOp_t op, tidalRedOp_t* out) {
  switch (op) {
    case ncclSum:
      *out = tidalSum;
      return true;
    case ncclProd:
      *out = tidalProd;
      return true;
    case ncclMax:
      *out = tidalMax;
      return true;
    case ncclMin:
      *out = tidalMin;
      return true;
    case ncclAvg:
      *out = tidalAvg;
      return true;
    default:
      break;
  }
  if (static_cast<int>(op) >= static_cast<int>(ncclNumOps)) {
    *out = static_cast<tidalRedOp_t>(static_cast<int>(tidalNumOps) +
                                     (static_cast<int>(op) - static_cast<int>(ncclNumOps)));
    return true;
  }
  return false;
}

ncclRedOp_t toNccl(tidalRedOp_t op) {
  return static_cast<ncclRedOp_t>(static_cast<int>(ncclNumOps) +
                                  (static_cast<int>(op) - static_cast<int>(tidalNumOps)));
}

#define SHIM_TYPE(call, nccl_type, tidal_var, comm)                         \
  tidalDataType_t tidal_var;                                                \
  if (!toTidal(nccl_type, &tidal_var))                                      \
    return fail(ncclInvalidArgument, call,                                  \
                "datatype " + std::to_string(static_cast<int>(nccl_type)) + \
                    " is not an NCCL "                                      \
                    "ncclDataType_t",                                       \
                comm);

#define SHIM_OP(call, nccl_op, tidal_var, comm)                                                    \
  tidalRedOp_t tidal_var;                                                                          \
  if (!toTidal(nccl_op, &tidal_var))                                                               \
    return fail(ncclInvalidArgument, call,                                                         \
                "op " + std::to_string(static_cast<int>(nccl_op)) + " is not an NCCL ncclRedOp_t", \
                comm);

// Copies the fields the caller's struct has (config->size says how many) into
// a Tidal config that starts from Tidal's defaults.
ncclResult_t toTidal(const char* call, const ncclConfig_t* in, tidalConfig_t* out,
                     ncclComm_t comm) {
  *out = tidalConfig_t TIDAL_CONFIG_INITIALIZER;
  if (in == nullptr) return ncclSuccess;
  if (in->magic != NCCL_API_MAGIC)
    return fail(ncclInvalidArgument, call,
                "config->magic is " + std::to_string(in->magic) +
                    ", not NCCL_API_MAGIC: initialise it with NCCL_CONFIG_INITIALIZER",
                comm);
  if (in->size < offsetof(ncclConfig_t, blocking) || in->size > sizeof(ncclConfig_t))
    return fail(ncclInvalidArgument, call,
                "config->size is " + std::to_string(in->size) + ", not a known ncclConfig_t size",
                comm);
  const size_t size = in->size;
#define SHIM_FIELD(f) \
  if (offsetof(ncclConfig_t, f) + sizeof(in->f) <= size) out->f = in->f;
  SHIM_FIELD(blocking)
  SHIM_FIELD(cgaClusterSize)
  SHIM_FIELD(minCTAs)
  SHIM_FIELD(maxCTAs)
  SHIM_FIELD(netName)
  SHIM_FIELD(splitShare)
  SHIM_FIELD(trafficClass)
  SHIM_FIELD(commName)
  SHIM_FIELD(collnetEnable)
  SHIM_FIELD(CTAPolicy)
  SHIM_FIELD(shrinkShare)
  SHIM_FIELD(nvlsCTAs)
  SHIM_FIELD(nChannelsPerNetPeer)
  SHIM_FIELD(nvlinkCentricSched)
  SHIM_FIELD(graphUsageMode)
  SHIM_FIELD(numRmaCtx)
  SHIM_FIELD(maxP2pPeers)
  SHIM_FIELD(graphStreamOrdering)
  SHIM_FIELD(launchOrderImplicit)
  SHIM_FIELD(numRmaSig)
  SHIM_FIELD(rmaEagerInit)
  SHIM_FIELD(hostCftMode)
  SHIM_FIELD(nvlsHostMode)
#undef SHIM_FIELD
  return ncclSuccess;
}

tidalUniqueId toTidal(const ncclUniqueId& id) {
  tidalUniqueId out;
  std::memcpy(&out, &id, sizeof(out));
  return out;
}

ncclResult_t done(tidalResult_t r) { return toNccl(r); }

}  // namespace

NCCL_SHIM_API ncclResult_t ncclGetVersion(int* version) {
  shimError.clear();
  return done(tidalGetVersion(version));
}

NCCL_SHIM_API ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  shimError.clear();
  return done(tidalGetUniqueId(reinterpret_cast<tidalUniqueId*>(uniqueId)));
}

NCCL_SHIM_API const char* ncclGetErrorString(ncclResult_t result) {
  tidalResult_t r;
  if (!toTidal(result, &r)) return "unknown ncclResult_t value";
  return tidalGetErrorString(r);
}

NCCL_SHIM_API const char* ncclGetLastError(ncclComm_t comm) {
  if (!shimError.empty()) return shimError.c_str();
  return tidalGetLastError(toTidal(comm));
}

NCCL_SHIM_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  shimError.clear();
  if (asyncError == nullptr)
    return fail(ncclInvalidArgument, "ncclCommGetAsyncError", "asyncError is NULL", comm);
  tidalResult_t e = tidalSuccess;
  tidalResult_t r = tidalCommGetAsyncError(toTidal(comm), &e);
  *asyncError = toNccl(e);
  return done(r);
}

NCCL_SHIM_API ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                            int rank) {
  shimError.clear();
  return done(
      tidalCommInitRank(reinterpret_cast<tidalComm_t*>(comm), nranks, toTidal(commId), rank));
}

NCCL_SHIM_API ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                                  int rank, ncclConfig_t* config) {
  shimError.clear();
  tidalConfig_t tc;
  if (ncclResult_t r = toTidal("ncclCommInitRankConfig", config, &tc, nullptr); r != ncclSuccess)
    return r;
  return done(tidalCommInitRankConfig(reinterpret_cast<tidalComm_t*>(comm), nranks, toTidal(commId),
                                      rank, config ? &tc : nullptr));
}

NCCL_SHIM_API ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank,
                                                    int nId, ncclUniqueId* commIds,
                                                    ncclConfig_t* config) {
  shimError.clear();
  tidalConfig_t tc;
  if (ncclResult_t r = toTidal("ncclCommInitRankScalable", config, &tc, nullptr); r != ncclSuccess)
    return r;
  return done(tidalCommInitRankScalable(reinterpret_cast<tidalComm_t*>(newcomm), nranks, myrank,
                                        nId, reinterpret_cast<tidalUniqueId*>(commIds),
                                        config ? &tc : nullptr));
}

NCCL_SHIM_API ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  shimError.clear();
  return done(tidalCommInitAll(reinterpret_cast<tidalComm_t*>(comms), ndev, devlist));
}

NCCL_SHIM_API ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  shimError.clear();
  return done(tidalCommFinalize(toTidal(comm)));
}

NCCL_SHIM_API ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  shimError.clear();
  return done(tidalCommDestroy(toTidal(comm)));
}

NCCL_SHIM_API ncclResult_t ncclCommAbort(ncclComm_t comm) {
  shimError.clear();
  return done(tidalCommAbort(toTidal(comm)));
}

NCCL_SHIM_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                         ncclConfig_t* config) {
  shimError.clear();
  tidalConfig_t tc;
  if (ncclResult_t r = toTidal("ncclCommSplit", config, &tc, comm); r != ncclSuccess) return r;
  const int tidalColor = color == NCCL_SPLIT_NOCOLOR ? TIDAL_SPLIT_NOCOLOR : color;
  return done(tidalCommSplit(toTidal(comm), tidalColor, key,
                             reinterpret_cast<tidalComm_t*>(newcomm), config ? &tc : nullptr));
}

NCCL_SHIM_API ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList,
                                          int excludeRanksCount, ncclComm_t* newcomm,
                                          ncclConfig_t* config, int shrinkFlags) {
  shimError.clear();
  tidalConfig_t tc;
  if (ncclResult_t r = toTidal("ncclCommShrink", config, &tc, comm); r != ncclSuccess) return r;
  // NCCL_SHRINK_* and TIDAL_SHRINK_* have the same values (checked below).
  return done(tidalCommShrink(toTidal(comm), excludeRanksList, excludeRanksCount,
                              reinterpret_cast<tidalComm_t*>(newcomm), config ? &tc : nullptr,
                              shrinkFlags));
}

NCCL_SHIM_API ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  shimError.clear();
  return done(tidalCommRevoke(toTidal(comm), revokeFlags));
}

NCCL_SHIM_API ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  shimError.clear();
  return done(tidalCommGetUniqueId(toTidal(comm), reinterpret_cast<tidalUniqueId*>(uniqueId)));
}

NCCL_SHIM_API ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId,
                                        int rank, ncclComm_t* newcomm, ncclConfig_t* config) {
  shimError.clear();
  tidalConfig_t tc;
  if (ncclResult_t r = toTidal("ncclCommGrow", config, &tc, comm); r != ncclSuccess) return r;
  return done(tidalCommGrow(toTidal(comm), nRanks, reinterpret_cast<const tidalUniqueId*>(uniqueId),
                            rank, reinterpret_cast<tidalComm_t*>(newcomm), config ? &tc : nullptr));
}

NCCL_SHIM_API ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  shimError.clear();
  return done(tidalCommSuspend(toTidal(comm), flags));
}

NCCL_SHIM_API ncclResult_t ncclCommResume(ncclComm_t comm) {
  shimError.clear();
  return done(tidalCommResume(toTidal(comm)));
}

NCCL_SHIM_API ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat,
                                            uint64_t* value) {
  shimError.clear();
  // Same numbering (checked below); passed as an int so no invalid enum is formed.
  tidalCommMemStat_t ts;
  static_assert(sizeof ts == sizeof stat);
  std::memcpy(&ts, &stat, sizeof ts);
  return done(tidalCommMemStats(toTidal(comm), ts, value));
}

static_assert(NCCL_SHRINK_ABORT == TIDAL_SHRINK_ABORT &&
              NCCL_SHRINK_DEFAULT == TIDAL_SHRINK_DEFAULT);
static_assert(NCCL_SUSPEND_MEM == TIDAL_SUSPEND_MEM && NCCL_REVOKE_DEFAULT == TIDAL_REVOKE_DEFAULT);
static_assert(static_cast<int>(ncclStatGpuMemTotal) == static_cast<int>(tidalStatGpuMemTotal) &&
              static_cast<int>(ncclStatGpuMemPersist) == static_cast<int>(tidalStatGpuMemPersist) &&
              static_cast<int>(ncclStatGpuMemSuspended) ==
                  static_cast<int>(tidalStatGpuMemSuspended) &&
              static_cast<int>(ncclStatGpuMemSuspend) == static_cast<int>(tidalStatGpuMemSuspend));

NCCL_SHIM_API ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  shimError.clear();
  return done(tidalCommCount(toTidal(comm), count));
}

NCCL_SHIM_API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  shimError.clear();
  return done(tidalCommCuDevice(toTidal(comm), device));
}

NCCL_SHIM_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  shimError.clear();
  return done(tidalCommUserRank(toTidal(comm), rank));
}

NCCL_SHIM_API ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  shimError.clear();
  return done(tidalMemAlloc(ptr, size));
}

NCCL_SHIM_API ncclResult_t ncclMemFree(void* ptr) {
  shimError.clear();
  return done(tidalMemFree(ptr));
}

NCCL_SHIM_API ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size,
                                            void** handle) {
  shimError.clear();
  return done(tidalCommRegister(toTidal(comm), buff, size, handle));
}

NCCL_SHIM_API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  shimError.clear();
  return done(tidalCommDeregister(toTidal(comm), handle));
}

// Windows are Tidal's checked handles (no symmetric memory); the flags have
// the same values (checked here).
static_assert(NCCL_WIN_DEFAULT == TIDAL_WIN_DEFAULT &&
              NCCL_WIN_COLL_SYMMETRIC == TIDAL_WIN_COLL_SYMMETRIC &&
              NCCL_WIN_STRICT_ORDERING == TIDAL_WIN_STRICT_ORDERING);

NCCL_SHIM_API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size,
                                                  ncclWindow_t* win, int winFlags) {
  shimError.clear();
  return done(tidalCommWindowRegister(toTidal(comm), buff, size,
                                      reinterpret_cast<tidalWindow_t*>(win), winFlags));
}

NCCL_SHIM_API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  shimError.clear();
  return done(tidalCommWindowDeregister(toTidal(comm), reinterpret_cast<tidalWindow_t>(win)));
}

NCCL_SHIM_API ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  shimError.clear();
  return done(tidalWinGetUserPtr(toTidal(comm), reinterpret_cast<tidalWindow_t>(win), outUserPtr));
}

// The descriptors have the same fields in the same order (checked here).
static_assert(sizeof(ncclWaitSignalDesc_t) == sizeof(tidalWaitSignalDesc_t) &&
              offsetof(ncclWaitSignalDesc_t, opCnt) == offsetof(tidalWaitSignalDesc_t, opCnt) &&
              offsetof(ncclWaitSignalDesc_t, peer) == offsetof(tidalWaitSignalDesc_t, peer) &&
              offsetof(ncclWaitSignalDesc_t, sigIdx) == offsetof(tidalWaitSignalDesc_t, sigIdx) &&
              offsetof(ncclWaitSignalDesc_t, ctx) == offsetof(tidalWaitSignalDesc_t, ctx));

NCCL_SHIM_API ncclResult_t ncclPutSignal(const void* localbuff, size_t count,
                                         ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                                         size_t peerWinOffset, int sigIdx, int ctx,
                                         unsigned int flags, ncclComm_t comm, void* stream) {
  shimError.clear();
  SHIM_TYPE("ncclPutSignal", datatype, t, comm)
  return done(tidalPutSignal(localbuff, count, t, peer, reinterpret_cast<tidalWindow_t>(peerWin),
                             peerWinOffset, sigIdx, ctx, flags, toTidal(comm), stream));
}

NCCL_SHIM_API ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags,
                                      ncclComm_t comm, void* stream) {
  shimError.clear();
  return done(tidalSignal(peer, sigIdx, ctx, flags, toTidal(comm), stream));
}

NCCL_SHIM_API ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs,
                                          ncclComm_t comm, void* stream) {
  shimError.clear();
  return done(tidalWaitSignal(nDesc, reinterpret_cast<tidalWaitSignalDesc_t*>(signalDescs),
                              toTidal(comm), stream));
}

// Parameters: keys pass through unchanged, so a program reads Tidal's
// settings by their TIDAL_* names.
static tidalParamHandle_t toTidal(ncclParamHandle_t h) {
  return reinterpret_cast<tidalParamHandle_t>(h);
}

NCCL_SHIM_API ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key) {
  shimError.clear();
  return done(tidalParamBind(reinterpret_cast<tidalParamHandle_t*>(out), key));
}

#define SHIM_PARAM_GETTER(suffix, ctype)                                             \
  NCCL_SHIM_API ncclResult_t ncclParamGet##suffix(ncclParamHandle_t h, ctype* out) { \
    shimError.clear();                                                               \
    return done(tidalParamGet##suffix(toTidal(h), out));                             \
  }
SHIM_PARAM_GETTER(I8, int8_t)
SHIM_PARAM_GETTER(I16, int16_t)
SHIM_PARAM_GETTER(I32, int32_t)
SHIM_PARAM_GETTER(I64, int64_t)
SHIM_PARAM_GETTER(U8, uint8_t)
SHIM_PARAM_GETTER(U16, uint16_t)
SHIM_PARAM_GETTER(U32, uint32_t)
SHIM_PARAM_GETTER(U64, uint64_t)
SHIM_PARAM_GETTER(Str, const char*)
#undef SHIM_PARAM_GETTER

NCCL_SHIM_API ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  shimError.clear();
  return done(tidalParamGet(toTidal(h), out, maxLen, len));
}

NCCL_SHIM_API ncclResult_t ncclParamGetParameter(const char* key, const char** value,
                                                 int* valueLen) {
  shimError.clear();
  return done(tidalParamGetParameter(key, value, valueLen));
}

NCCL_SHIM_API ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  shimError.clear();
  return done(tidalParamGetAllParameterKeys(table, tableLen));
}

NCCL_SHIM_API void ncclParamDumpAll(void) { tidalParamDumpAll(); }

NCCL_SHIM_API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar,
                                                    ncclDataType_t datatype,
                                                    ncclScalarResidence_t residence,
                                                    ncclComm_t comm) {
  shimError.clear();
  const char* call = "ncclRedOpCreatePreMulSum";
  if (op == nullptr) return fail(ncclInvalidArgument, call, "op is NULL", comm);
  SHIM_TYPE(call, datatype, t, comm)
  tidalScalarResidence_t res;
  switch (residence) {
    case ncclScalarDevice:
      res = tidalScalarDevice;
      break;
    case ncclScalarHostImmediate:
      res = tidalScalarHostImmediate;
      break;
    default:
      return fail(ncclInvalidArgument, call,
                  "residence " + std::to_string(static_cast<int>(residence)) +
                      " is not an ncclScalarResidence_t",
                  comm);
  }
  tidalRedOp_t created;
  tidalResult_t r = tidalRedOpCreatePreMulSum(&created, scalar, t, res, toTidal(comm));
  if (r == tidalSuccess) *op = toNccl(created);
  return done(r);
}

NCCL_SHIM_API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  shimError.clear();
  SHIM_OP("ncclRedOpDestroy", op, o, comm)
  return done(tidalRedOpDestroy(o, toTidal(comm)));
}

NCCL_SHIM_API ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                      ncclDataType_t datatype, ncclRedOp_t op, int root,
                                      ncclComm_t comm, void* stream) {
  shimError.clear();
  SHIM_TYPE("ncclReduce", datatype, t, comm)
  SHIM_OP("ncclReduce", op, o, comm)
  return done(tidalReduce(sendbuff, recvbuff, count, t, o, root, toTidal(comm), stream));
}

NCCL_SHIM_API ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                     ncclComm_t comm, void* stream) {
  shimError.clear();
  SHIM_TYPE("ncclBcast", datatype, t, comm)
  return done(tidalBcast(buff, count, t, root, toTidal(comm), stream));
}

NCCL_SHIM_API ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                         ncclDataType_t datatype, int root, ncclComm_t comm,
                                         void* stream) {
  shimError.clear();
  SHIM_TYPE("ncclBroadcast", datatype, t, comm)
  return done(tidalBroadcast(sendbuff, recvbuff, count, t, root, toTidal(comm), stream));
}

NCCL_SHIM_API ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                         void* stream) {
  shimError.clear();
  SHIM_TYPE("ncclAllReduce", datatype, t, comm)
  SHIM_OP("ncclAllReduce", op, o, comm)
  return done(tidalAllReduce(sendbuff, recvbuff, count, t, o, toTidal(comm), stream));
}

NCCL_SHIM_API ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                             ncclDataType_t datatype, ncclRedOp_t op,
                                             ncclComm_t comm, void* stream) {
  shimError.clear();
  SHIM_TYPE("ncclReduceScatter", datatype, t, comm)
  SHIM_OP("ncclReduceScatter", op, o, comm)
  return done(tidalReduceScatter(sendbuff, recvbuff, recvcount, t, o, toTidal(comm), stream));
}

NCCL_SHIM_API ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                         ncclDataType_t datatype, ncclComm_t comm, void* stream) {
  shimError.clear();
  SHIM_TYPE("ncclAllGather", datatype, t, comm)
  return done(tidalAllGather(sendbuff, recvbuff, sendcount, t, toTidal(comm), stream));
}

NCCL_SHIM_API ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                        ncclDataType_t datatype, ncclComm_t comm, void* stream) {
  shimError.clear();
  SHIM_TYPE("ncclAlltoAll", datatype, t, comm)
  return done(tidalAlltoAll(sendbuff, recvbuff, count, t, toTidal(comm), stream));
}

NCCL_SHIM_API ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                      ncclDataType_t datatype, int root, ncclComm_t comm,
                                      void* stream) {
  shimError.clear();
  SHIM_TYPE("ncclGather", datatype, t, comm)
  return done(tidalGather(sendbuff, recvbuff, count, t, root, toTidal(comm), stream));
}

NCCL_SHIM_API ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                       ncclDataType_t datatype, int root, ncclComm_t comm,
                                       void* stream) {
  shimError.clear();
  SHIM_TYPE("ncclScatter", datatype, t, comm)
  return done(tidalScatter(sendbuff, recvbuff, count, t, root, toTidal(comm), stream));
}

NCCL_SHIM_API ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                    int peer, ncclComm_t comm, void* stream) {
  shimError.clear();
  SHIM_TYPE("ncclSend", datatype, t, comm)
  return done(tidalSend(sendbuff, count, t, peer, toTidal(comm), stream));
}

NCCL_SHIM_API ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                    ncclComm_t comm, void* stream) {
  shimError.clear();
  SHIM_TYPE("ncclRecv", datatype, t, comm)
  return done(tidalRecv(recvbuff, count, t, peer, toTidal(comm), stream));
}

NCCL_SHIM_API ncclResult_t ncclGroupStart(void) {
  shimError.clear();
  return done(tidalGroupStart());
}

NCCL_SHIM_API ncclResult_t ncclGroupEnd(void) {
  shimError.clear();
  return done(tidalGroupEnd());
}

static_assert(sizeof(ncclSimInfo_t) == sizeof(tidalSimInfo_t) && NCCL_API_MAGIC == TIDAL_API_MAGIC,
              "ncclSimInfo_t and tidalSimInfo_t have the same fields");

NCCL_SHIM_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  shimError.clear();
  if (simInfo == nullptr) return done(tidalGroupSimulateEnd(nullptr));
  tidalSimInfo_t info{simInfo->size, simInfo->magic, simInfo->version, simInfo->estimatedTime};
  const tidalResult_t r = tidalGroupSimulateEnd(&info);
  simInfo->estimatedTime = info.estimatedTime;
  return done(r);
}

// The device API's host side (nccl_device.h). Tidal has no device-initiated
// communication: the queries say so, device communicators are refused.
namespace {

// A Tidal failure reported under the NCCL call's name.
ncclResult_t failFromTidal(tidalResult_t r, const char* call, ncclComm_t comm) {
  shimError = std::string(call) + ": " + tidalGetLastError(toTidal(comm));
  return toNccl(r);
}

// Rank and size of comm, or the failure naming `call`.
ncclResult_t rankAndSize(const char* call, ncclComm_t comm, int* rank, int* nRanks) {
  if (comm == nullptr) return fail(ncclInvalidArgument, call, "comm is NULL", nullptr);
  if (tidalResult_t r = tidalCommUserRank(toTidal(comm), rank); r != tidalSuccess)
    return failFromTidal(r, call, comm);
  if (tidalResult_t r = tidalCommCount(toTidal(comm), nRanks); r != tidalSuccess)
    return failFromTidal(r, call, comm);
  return ncclSuccess;
}

// ncclDevCommCreate / Destroy once their own arguments passed: a bad comm is
// named as such, a good one is refused with `why`.
ncclResult_t refuseDeviceApi(const char* call, ncclComm_t comm, const char* why) {
  int rank = 0, nRanks = 0;
  if (ncclResult_t r = rankAndSize(call, comm, &rank, &nRanks); r != ncclSuccess) return r;
  return fail(ncclInvalidUsage, call, why, comm);
}

ncclTeam_t team(const char* call, ncclComm_t comm, bool lsa) {
  shimError.clear();
  int rank = 0, nRanks = 0;
  if (rankAndSize(call, comm, &rank, &nRanks) != ncclSuccess) return ncclTeam_t{0, 0, 0};
  // Every rank is its own load/store-accessible team; the world (and so the
  // rail, the ranks at the same LSA index) is every rank.
  return lsa ? ncclTeam_t{1, 0, 1} : ncclTeam_t{nRanks, rank, 1};
}

}  // namespace

NCCL_SHIM_API ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props) {
  shimError.clear();
  const char* call = "ncclCommQueryProperties";
  if (props == nullptr) return fail(ncclInvalidArgument, call, "props is NULL", comm);
  if (props->magic != NCCL_API_MAGIC)
    return fail(ncclInvalidArgument, call,
                "props->magic is " + std::to_string(props->magic) +
                    ", not NCCL_API_MAGIC: initialise it with NCCL_COMM_PROPERTIES_INITIALIZER",
                comm);
  if (props->size < offsetof(ncclCommProperties_t, rank) + sizeof(props->rank) ||
      props->size > sizeof(ncclCommProperties_t))
    return fail(
        ncclInvalidArgument, call,
        "props->size is " + std::to_string(props->size) + ", not a known ncclCommProperties_t size",
        comm);
  int rank = 0, nRanks = 0, cudaDev = -1;
  if (ncclResult_t r = rankAndSize(call, comm, &rank, &nRanks); r != ncclSuccess) return r;
  if (tidalResult_t r = tidalCommCuDevice(toTidal(comm), &cudaDev); r != tidalSuccess)
    return failFromTidal(r, call, comm);
  const size_t size = props->size;
#define SHIM_PROP(f, v) \
  if (offsetof(ncclCommProperties_t, f) + sizeof(props->f) <= size) props->f = v;
  SHIM_PROP(rank, rank)
  SHIM_PROP(nRanks, nRanks)
  SHIM_PROP(cudaDev, cudaDev)
  SHIM_PROP(nvmlDev, -1)  // Tidal does not use NVML
  SHIM_PROP(deviceApiSupport, false)
  SHIM_PROP(multimemSupport, false)
  SHIM_PROP(ginType, NCCL_GIN_TYPE_NONE)
  SHIM_PROP(nLsaTeams, nRanks)  // each rank is its own LSA team
  SHIM_PROP(hostRmaSupport, false)
  SHIM_PROP(railedGinType, NCCL_GIN_TYPE_NONE)
#undef SHIM_PROP
  return ncclSuccess;
}

NCCL_SHIM_API ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                             ncclDevComm_t* outDevComm) {
  shimError.clear();
  const char* call = "ncclDevCommCreate";
  if (reqs == nullptr) return fail(ncclInvalidArgument, call, "reqs is NULL", comm);
  if (outDevComm == nullptr) return fail(ncclInvalidArgument, call, "outDevComm is NULL", comm);
  return refuseDeviceApi(call, comm,
                         "Tidal has no device API (no device-initiated communication): "
                         "ncclCommQueryProperties reports deviceApiSupport = 0 (docs/nccl.md)");
}

NCCL_SHIM_API ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm) {
  shimError.clear();
  const char* call = "ncclDevCommDestroy";
  if (devComm == nullptr) return fail(ncclInvalidArgument, call, "devComm is NULL", comm);
  return refuseDeviceApi(call, comm,
                         "Tidal has no device API, so no device communicator exists to destroy "
                         "(ncclDevCommCreate always fails; docs/nccl.md)");
}

NCCL_SHIM_API ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
  return team("ncclTeamWorld", comm, false);
}

NCCL_SHIM_API ncclTeam_t ncclTeamLsa(ncclComm_t comm) { return team("ncclTeamLsa", comm, true); }

NCCL_SHIM_API ncclTeam_t ncclTeamRail(ncclComm_t comm) { return team("ncclTeamRail", comm, false); }
