/*
 * Tidal: collective communication for distributed training.
 *
 * C99 API shaped like NCCL's, so that porting code is a rename (nccl -> tidal).
 * Every function returns a tidalResult_t; tidalGetLastError(comm) returns a
 * human-readable explanation of the most recent failure on that communicator
 * (or, with comm == NULL, on the calling thread).
 */
#ifndef TIDAL_TIDAL_H_
#define TIDAL_TIDAL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The NCCL API level this header implements. Code ported from NCCL by renaming
 * (nccl -> tidal) compares TIDAL_VERSION_CODE with TIDAL_VERSION(2, x, y) and so
 * takes the paths it would take with NCCL 2.30. tidalGetVersion returns this
 * code too. Tidal's own release number is TIDAL_RELEASE_*, below. */
#define TIDAL_MAJOR 2
#define TIDAL_MINOR 30
#define TIDAL_PATCH 0
#define TIDAL_SUFFIX ""
/* NCCL's encoding: X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z from 2.9. */
#define TIDAL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
#define TIDAL_VERSION_CODE TIDAL_VERSION(TIDAL_MAJOR, TIDAL_MINOR, TIDAL_PATCH)

/* Tidal's own release (the library's soname version), independent of the API level. */
#define TIDAL_RELEASE_MAJOR 0
#define TIDAL_RELEASE_MINOR 2
#define TIDAL_RELEASE_PATCH 0
#define TIDAL_RELEASE_STRING "0.2.0"

#if defined(__GNUC__)
#define TIDAL_API __attribute__((visibility("default")))
#else
#define TIDAL_API
#endif

typedef struct tidalComm* tidalComm_t;

#define TIDAL_UNIQUE_ID_BYTES 128
/* Opaque; produced by tidalGetUniqueId on one rank and shipped to the others. */
typedef struct {
  char internal[TIDAL_UNIQUE_ID_BYTES];
} tidalUniqueId;

typedef enum {
  tidalSuccess = 0,
  tidalUnhandledCudaError = 1,
  tidalSystemError = 2,
  tidalInternalError = 3,
  tidalInvalidArgument = 4,
  tidalInvalidUsage = 5,
  tidalRemoteError = 6,
  tidalInProgress = 7,
  tidalTimeout = 8,
  tidalNumResults = 9
} tidalResult_t;

/* Same numbering as NCCL's ncclDataType_t. */
typedef enum {
  tidalInt8 = 0,
  tidalChar = 0,
  tidalUint8 = 1,
  tidalInt32 = 2,
  tidalInt = 2,
  tidalUint32 = 3,
  tidalInt64 = 4,
  tidalUint64 = 5,
  tidalFloat16 = 6,
  tidalHalf = 6,
  tidalFloat32 = 7,
  tidalFloat = 7,
  tidalFloat64 = 8,
  tidalDouble = 8,
  tidalBfloat16 = 9,
  tidalFloat8e4m3 = 10, /* OCP FP8 E4M3 (no infinities, max 448) */
  tidalFloat8e5m2 = 11, /* OCP FP8 E5M2 (IEEE-like, max 57344) */
  tidalNumTypes = 12
} tidalDataType_t;

/* Same numbering as NCCL's ncclRedOp_t. Values from tidalNumOps up to
 * tidalMaxRedOp are operators made by tidalRedOpCreatePreMulSum. */
typedef enum { tidalNumOps_dummy = 5 } tidalRedOp_dummy_t;
typedef enum {
  tidalSum = 0,
  tidalProd = 1,
  tidalMax = 2,
  tidalMin = 3,
  tidalAvg = 4,
  tidalNumOps = 5,
  tidalMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(tidalRedOp_dummy_t))
} tidalRedOp_t;

/* The NCCL API level implemented, TIDAL_VERSION_CODE of the library (not of
 * the headers the caller was built with): 23000 for 2.30.0. */
TIDAL_API tidalResult_t tidalGetVersion(int* version);

/* Creates a unique id (root address + 128-bit random secret). Call on one rank,
 * distribute to all others out of band, then call tidalCommInitRank everywhere.
 * The calling process becomes the rendezvous root and must call
 * tidalCommInitRank with rank 0. */
TIDAL_API tidalResult_t tidalGetUniqueId(tidalUniqueId* uniqueId);

/* Collective: all nranks ranks must call it with the same id. */
TIDAL_API tidalResult_t tidalCommInitRank(tidalComm_t* comm, int nranks, tidalUniqueId commId,
                                          int rank);

/* Creates ndev communicators in this process, ranks 0..ndev-1, each initialised
 * on its own thread. devlist names rank r's CUDA device (devlist[r]; entries may
 * repeat: ranks may share a GPU); NULL uses the calling thread's current device
 * where CUDA is available. Collectives on host buffers block, so call each
 * communicator from its own thread. */
TIDAL_API tidalResult_t tidalCommInitAll(tidalComm_t* comms, int ndev, const int* devlist);

/* Reads rank, size and rendezvous from the launcher's environment: torchrun
 * (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), TIDAL_COMM_ID=host:port with
 * TIDAL_RANK/TIDAL_NRANKS, Open MPI (OMPI_COMM_WORLD_*), MPICH (PMI_RANK,
 * PMI_SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS). Where the launcher gives no
 * address, the id is exchanged through PMIx. See docs/env.md. */
TIDAL_API tidalResult_t tidalCommInitFromEnv(tidalComm_t* comm);

/* Waits for outstanding work, then frees. */
TIDAL_API tidalResult_t tidalCommDestroy(tidalComm_t comm);
/* Stops outstanding work (it returns an error), closes connections, frees.
 * May be called from another thread while a collective is blocked. */
TIDAL_API tidalResult_t tidalCommAbort(tidalComm_t comm);

TIDAL_API tidalResult_t tidalCommCount(const tidalComm_t comm, int* count);
TIDAL_API tidalResult_t tidalCommUserRank(const tidalComm_t comm, int* rank);
/* tidalSuccess while healthy; the first error that broke the communicator otherwise. */
TIDAL_API tidalResult_t tidalCommGetAsyncError(tidalComm_t comm, tidalResult_t* asyncError);

TIDAL_API const char* tidalGetErrorString(tidalResult_t result);
/* Detailed text of the last failure on comm (or on this thread when comm is NULL).
 * The pointer stays valid until the next Tidal call on the same comm/thread. */
TIDAL_API const char* tidalGetLastError(tidalComm_t comm);

/*
 * Collectives. Argument order and in-place conventions follow NCCL:
 *  - AllReduce/Broadcast/Reduce: in place when sendbuff == recvbuff.
 *  - AllGather: in place when sendbuff == recvbuff + rank * sendcount * size.
 *  - ReduceScatter: in place when recvbuff == sendbuff + rank * recvcount * size.
 * Buffers are all host memory or all CUDA memory (device or managed) of the
 * communicator's device, the one current when it was created; a call that
 * mixes them returns tidalInvalidArgument naming the buffers.
 *  - Host memory: stream must be NULL; the call blocks until the result is
 *    complete in recvbuff.
 *  - CUDA memory: the collective is ordered on stream (a cudaStream_t; NULL is
 *    the legacy default stream) and the call returns at once: it reads its
 *    inputs after the work enqueued on stream before it, and work enqueued on
 *    stream after it sees its result. Failures surface through
 *    tidalCommGetAsyncError and the next call. Every rank must use CUDA
 *    buffers for a given collective if any does.
 */
TIDAL_API tidalResult_t tidalAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       tidalDataType_t datatype, tidalRedOp_t op, tidalComm_t comm,
                                       void* stream);
TIDAL_API tidalResult_t tidalAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       tidalDataType_t datatype, tidalComm_t comm, void* stream);
TIDAL_API tidalResult_t tidalReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           tidalDataType_t datatype, tidalRedOp_t op,
                                           tidalComm_t comm, void* stream);
TIDAL_API tidalResult_t tidalBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                       tidalDataType_t datatype, int root, tidalComm_t comm,
                                       void* stream);
TIDAL_API tidalResult_t tidalReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    tidalDataType_t datatype, tidalRedOp_t op, int root,
                                    tidalComm_t comm, void* stream);
TIDAL_API tidalResult_t tidalBarrier(tidalComm_t comm, void* stream);
/* Legacy in-place broadcast: tidalBroadcast(buff, buff, ...). */
TIDAL_API tidalResult_t tidalBcast(void* buff, size_t count, tidalDataType_t datatype, int root,
                                   tidalComm_t comm, void* stream);

/*
 * Point-to-point, personalised exchanges, groups and split (NCCL 2.28/2.30
 * names and arguments). Host buffers with stream NULL (device buffers are
 * refused with tidalInvalidUsage for these calls for now; see docs/api.md).
 */

/* Block p of sendbuff (count elements) goes to rank p; block q of recvbuff
 * comes from rank q. In place when sendbuff == recvbuff. */
TIDAL_API tidalResult_t tidalAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                      tidalDataType_t datatype, tidalComm_t comm, void* stream);
/* Uneven AllToAll (not in NCCL; what torch's all_to_all_single with split
 * sizes needs): rank p receives sendcounts[p] elements from
 * sendbuff + sdispls[p] elements into its recvbuff + rdispls[me]. Counts and
 * displacements are in elements, one per rank. A rank whose recvcounts[q]
 * is smaller than what rank q sends it fails naming both counts. */
TIDAL_API tidalResult_t tidalAllToAllv(const void* sendbuff, const size_t* sendcounts,
                                       const size_t* sdispls, void* recvbuff,
                                       const size_t* recvcounts, const size_t* rdispls,
                                       tidalDataType_t datatype, tidalComm_t comm, void* stream);
/* Gather count elements from every rank into root's recvbuff (rank r's at
 * recvbuff + r * count); in place at the root when
 * sendbuff == recvbuff + root * count. recvbuff matters only at the root. */
TIDAL_API tidalResult_t tidalGather(const void* sendbuff, void* recvbuff, size_t count,
                                    tidalDataType_t datatype, int root, tidalComm_t comm,
                                    void* stream);
/* Scatter root's sendbuff + r * count (count elements) to rank r's recvbuff;
 * in place at the root when recvbuff == sendbuff + root * count. */
TIDAL_API tidalResult_t tidalScatter(const void* sendbuff, void* recvbuff, size_t count,
                                     tidalDataType_t datatype, int root, tidalComm_t comm,
                                     void* stream);

/* Send count elements to peer / receive up to count elements from peer. The
 * k-th Send from A to B matches B's k-th Recv from A. Outside a group each
 * call blocks until done; inside tidalGroupStart/End they are only recorded
 * and run together at the outermost tidalGroupEnd, so any pattern (every rank
 * to every rank, a rank to itself) completes. A message longer than the
 * receive's count is an error (tidalInvalidUsage naming both counts), never a
 * truncation; a shorter one is received as it is. */
TIDAL_API tidalResult_t tidalSend(const void* sendbuff, size_t count, tidalDataType_t datatype,
                                  int peer, tidalComm_t comm, void* stream);
TIDAL_API tidalResult_t tidalRecv(void* recvbuff, size_t count, tidalDataType_t datatype, int peer,
                                  tidalComm_t comm, void* stream);

/* Groups nest; they may span communicators. Errors of calls inside a group
 * are returned by tidalGroupEnd too (and then nothing in the group runs). */
TIDAL_API tidalResult_t tidalGroupStart(void);
TIDAL_API tidalResult_t tidalGroupEnd(void);

/*
 * Configuration, versions, memory, custom reduction ops (NCCL 2.30).
 * docs/api.md describes each call and where Tidal differs from NCCL.
 */

#define TIDAL_CONFIG_UNDEF_INT (-2147483647 - 1) /* INT_MIN */
#define TIDAL_CONFIG_UNDEF_PTR NULL
#define TIDAL_API_MAGIC 0xcafebeefu

/* NCCL 2.30's ncclConfig_t, field for field. Tidal honours blocking and
 * commName; every other field is accepted and ignored (docs/api.md). */
typedef struct tidalConfig_v23000 {
  /* Set by TIDAL_CONFIG_INITIALIZER; do not change. */
  size_t size;
  unsigned int magic;
  unsigned int version;
  /* 1 (default): init blocks. 0: init returns tidalInProgress and completes on
   * a background thread; poll tidalCommGetAsyncError. */
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  /* Shown in every log line and error text of the communicator. */
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
  int launchOrderImplicit;
  int numRmaSig;
  int rmaEagerInit;
  int hostCftMode;
  int nvlsHostMode;
} tidalConfig_t;

#define TIDAL_CONFIG_INITIALIZER                                                        \
  {                                                                                     \
    sizeof(tidalConfig_t), TIDAL_API_MAGIC, TIDAL_VERSION_CODE, TIDAL_CONFIG_UNDEF_INT, \
        TIDAL_CONFIG_UNDEF_INT, TIDAL_CONFIG_UNDEF_INT, TIDAL_CONFIG_UNDEF_INT,         \
        TIDAL_CONFIG_UNDEF_PTR, TIDAL_CONFIG_UNDEF_INT, TIDAL_CONFIG_UNDEF_INT,         \
        TIDAL_CONFIG_UNDEF_PTR, TIDAL_CONFIG_UNDEF_INT, TIDAL_CONFIG_UNDEF_INT,         \
        TIDAL_CONFIG_UNDEF_INT, TIDAL_CONFIG_UNDEF_INT, TIDAL_CONFIG_UNDEF_INT,         \
        TIDAL_CONFIG_UNDEF_INT, TIDAL_CONFIG_UNDEF_INT, TIDAL_CONFIG_UNDEF_INT,         \
        TIDAL_CONFIG_UNDEF_INT, TIDAL_CONFIG_UNDEF_INT, TIDAL_CONFIG_UNDEF_INT,         \
        TIDAL_CONFIG_UNDEF_INT, TIDAL_CONFIG_UNDEF_INT, TIDAL_CONFIG_UNDEF_INT,         \
        TIDAL_CONFIG_UNDEF_INT                                                          \
  }

/* tidalGroupSimulateEnd ends a group as tidalGroupEnd does, but runs nothing:
 * at the outermost level, simInfo->estimatedTime receives how long the group
 * would take on this rank, in microseconds (NCCL's unit), as Tidal's tuner
 * predicts it: every call's schedule, built for every rank as it would run,
 * timed over the tuner's link model (docs/api.md; TIDAL_TUNER_FILE sets
 * the links); communicators of one group overlap, so the longest counts. A
 * Send/Recv group or AllToAllv is timed as if each peer did just the other
 * side of this rank's part. Nothing is sent, no call is counted, and the
 * group's calls are dropped. At an inner level it only closes that level and
 * leaves estimatedTime as it was. A NULL simInfo, or one whose size or magic
 * is not TIDAL_SIM_INFO_INITIALIZER's, is refused (tidalInvalidArgument) and
 * the group stays open. */
#define TIDAL_UNDEF_FLOAT (-1.0f)
typedef struct tidalSimInfo_v22200 {
  /* Set by TIDAL_SIM_INFO_INITIALIZER; do not change. */
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime; /* out: microseconds */
} tidalSimInfo_t;
#define TIDAL_SIM_INFO_INITIALIZER \
  { sizeof(tidalSimInfo_t), TIDAL_API_MAGIC, TIDAL_VERSION_CODE, TIDAL_UNDEF_FLOAT }
TIDAL_API tidalResult_t tidalGroupSimulateEnd(tidalSimInfo_t* simInfo);

/* tidalCommInitRank with a configuration (NULL: the defaults). With
 * config->blocking == 0 it returns tidalInProgress with *comm set at once;
 * tidalCommGetAsyncError(*comm) reports tidalInProgress until init has
 * finished, then tidalSuccess or the init error. */
TIDAL_API tidalResult_t tidalCommInitRankConfig(tidalComm_t* comm, int nranks, tidalUniqueId commId,
                                                int rank, tidalConfig_t* config);
/* NCCL's several-id init. Every rank passes the same nId >= 1 ids in the same
 * order; Tidal accepts them all and rendezvous through commIds[0] alone. */
TIDAL_API tidalResult_t tidalCommInitRankScalable(tidalComm_t* newcomm, int nranks, int myrank,
                                                  int nId, tidalUniqueId* commIds,
                                                  tidalConfig_t* config);

#define TIDAL_SPLIT_NOCOLOR (-1)
/* Collective over comm: ranks with the same color >= 0 form *newcomm,
 * ranked by (key, rank in comm); color TIDAL_SPLIT_NOCOLOR gives NULL.
 * config may be NULL (the parent's settings). Declared after tidalConfig_t. */
TIDAL_API tidalResult_t tidalCommSplit(tidalComm_t comm, int color, int key, tidalComm_t* newcomm,
                                       tidalConfig_t* config);
/* Finishes every operation issued on comm and synchronises with the other
 * ranks (collective: every rank calls it). Afterwards only the query calls and
 * tidalCommDestroy / tidalCommAbort are valid. */
TIDAL_API tidalResult_t tidalCommFinalize(tidalComm_t comm);
/* The CUDA device the communicator was created on; -1 when it has none. */
TIDAL_API tidalResult_t tidalCommCuDevice(const tidalComm_t comm, int* device);

/* Device memory for communication buffers (cudaMalloc underneath); needs CUDA. */
TIDAL_API tidalResult_t tidalMemAlloc(void** ptr, size_t size);
TIDAL_API tidalResult_t tidalMemFree(void* ptr);
/* Registers [buff, buff + size) with comm and returns a handle to deregister it
 * with. Tidal keeps a checked registry; collectives do not yet use it. */
TIDAL_API tidalResult_t tidalCommRegister(const tidalComm_t comm, void* buff, size_t size,
                                          void** handle);
TIDAL_API tidalResult_t tidalCommDeregister(const tidalComm_t comm, void* handle);
/* NCCL 2.27's windows: [buff, buff + size) registered with comm under winFlags
 * (TIDAL_WIN_*). Collective, as NCCL's: every rank registers its windows
 * together and in the same order (each with its own buffer and size), and
 * deregisters each together. A window is the target of tidalPutSignal; it is
 * a checked handle, kept apart from tidalCommRegister's (each deregister call
 * refuses the other's handles); collectives do not use it. */
typedef struct tidalWindow* tidalWindow_t;
#define TIDAL_WIN_DEFAULT 0x00
#define TIDAL_WIN_COLL_SYMMETRIC 0x01
#define TIDAL_WIN_STRICT_ORDERING 0x02
TIDAL_API tidalResult_t tidalCommWindowRegister(tidalComm_t comm, void* buff, size_t size,
                                                tidalWindow_t* win, int winFlags);
/* win NULL is accepted (nothing to deregister), as NCCL does. */
TIDAL_API tidalResult_t tidalCommWindowDeregister(tidalComm_t comm, tidalWindow_t win);
/* buff as given to tidalCommWindowRegister for win on this rank. */
TIDAL_API tidalResult_t tidalWinGetUserPtr(tidalComm_t comm, tidalWindow_t win, void** outUserPtr);

/*
 * One-sided calls (NCCL 2.29), between ranks of one host, on host memory.
 * docs/api.md, "One-sided calls". tidalPutSignal writes count elements from
 * localbuff into peer's part of peerWin at byte offset peerWinOffset, then
 * signals peer; peer does not take part. tidalSignal signals without data.
 * tidalWaitSignal waits for opCnt more signals from each descriptor's peer
 * (beyond those earlier waits took); once it returns, the data of the puts
 * that sent them is in place. sigIdx, ctx and flags must be 0 (as NCCL 2.29);
 * stream must be NULL (host memory, the call completes before it returns).
 */
TIDAL_API tidalResult_t tidalPutSignal(const void* localbuff, size_t count,
                                       tidalDataType_t datatype, int peer, tidalWindow_t peerWin,
                                       size_t peerWinOffset, int sigIdx, int ctx,
                                       unsigned int flags, tidalComm_t comm, void* stream);
TIDAL_API tidalResult_t tidalSignal(int peer, int sigIdx, int ctx, unsigned int flags,
                                    tidalComm_t comm, void* stream);
typedef struct {
  int opCnt;  /* signals to wait for, > 0 */
  int peer;   /* from this rank */
  int sigIdx; /* 0 */
  int ctx;    /* 0 */
} tidalWaitSignalDesc_t;
TIDAL_API tidalResult_t tidalWaitSignal(int nDesc, tidalWaitSignalDesc_t* signalDescs,
                                        tidalComm_t comm, void* stream);

/*
 * Parameters (NCCL 2.30's parameter API): the TIDAL_* settings of docs/env.md
 * as this process reads them now (the environment, then TIDAL_CONF_FILE, then
 * the default). Keys are the settings' names ("TIDAL_TIMEOUT"). Returned
 * strings and tables belong to Tidal and stay valid until the same call is
 * made again on the same thread. docs/api.md, "Parameters".
 */
typedef struct tidalParamHandle* tidalParamHandle_t;
TIDAL_API tidalResult_t tidalParamBind(tidalParamHandle_t* out, const char* key);
TIDAL_API tidalResult_t tidalParamGetI8(tidalParamHandle_t h, int8_t* out);
TIDAL_API tidalResult_t tidalParamGetI16(tidalParamHandle_t h, int16_t* out);
TIDAL_API tidalResult_t tidalParamGetI32(tidalParamHandle_t h, int32_t* out);
TIDAL_API tidalResult_t tidalParamGetI64(tidalParamHandle_t h, int64_t* out);
TIDAL_API tidalResult_t tidalParamGetU8(tidalParamHandle_t h, uint8_t* out);
TIDAL_API tidalResult_t tidalParamGetU16(tidalParamHandle_t h, uint16_t* out);
TIDAL_API tidalResult_t tidalParamGetU32(tidalParamHandle_t h, uint32_t* out);
TIDAL_API tidalResult_t tidalParamGetU64(tidalParamHandle_t h, uint64_t* out);
TIDAL_API tidalResult_t tidalParamGetStr(tidalParamHandle_t h, const char** out);
/* Raw bytes: an integer setting as int64_t, a boolean as one byte (0 or 1),
 * a string with its terminating NUL. maxLen too small: tidalInvalidArgument
 * with *len the size needed. */
TIDAL_API tidalResult_t tidalParamGet(tidalParamHandle_t h, void* out, int maxLen, int* len);
TIDAL_API tidalResult_t tidalParamGetParameter(const char* key, const char** value, int* valueLen);
TIDAL_API tidalResult_t tidalParamGetAllParameterKeys(const char*** table, int* tableLen);
/* Prints every setting, its value and where the value came from, to stdout. */
TIDAL_API void tidalParamDumpAll(void);

/*
 * Fault tolerance and elasticity (NCCL 2.27-2.30). docs/api.md, "Revoke,
 * shrink, grow, suspend".
 */
#define TIDAL_REVOKE_DEFAULT 0x00
/* Local: calls in flight on comm fail now (on other threads too), the peers'
 * calls fail through the closed connections, and every later call except
 * tidalCommSplit, tidalCommShrink, tidalCommDestroy and tidalCommAbort is
 * refused naming the revoke. Returns once comm is quiescent;
 * tidalCommGetAsyncError then reports tidalSuccess. revokeFlags must be 0. */
TIDAL_API tidalResult_t tidalCommRevoke(tidalComm_t comm, int revokeFlags);

#define TIDAL_SHRINK_DEFAULT 0x00 /* comm must have no call in flight */
#define TIDAL_SHRINK_ABORT 0x01   /* stop comm's calls in flight first */
/* Called by every rank of comm that is not in excludeRanksList (the same
 * list everywhere); the excluded ranks do not call it and may be dead. The
 * survivors form *newcomm, ranked in their order in comm. Works on a
 * communicator broken by a failed peer or revoked. config may be NULL. */
TIDAL_API tidalResult_t tidalCommShrink(tidalComm_t comm, int* excludeRanksList,
                                        int excludeRanksCount, tidalComm_t* newcomm,
                                        tidalConfig_t* config, int shrinkFlags);

/* An id for tidalCommGrow, made by one member of comm (its process runs the
 * rendezvous, for TIDAL_TIMEOUT seconds). One unconsumed id at a time. */
TIDAL_API tidalResult_t tidalCommGetUniqueId(tidalComm_t comm, tidalUniqueId* uniqueId);
/* Collective over the members of comm and the new ranks: members pass comm,
 * rank -1 and the id where they made it (NULL elsewhere); new ranks pass
 * comm NULL, the id, and their rank (the members keep theirs, 0..n-1; new
 * ranks take n..nRanks-1). nRanks is the new size, larger than comm's. */
TIDAL_API tidalResult_t tidalCommGrow(tidalComm_t comm, int nRanks, const tidalUniqueId* uniqueId,
                                      int rank, tidalComm_t* newcomm, tidalConfig_t* config);

#define TIDAL_SUSPEND_MEM 0x01 /* also free the device memory Tidal can regrow */
/* Local. While suspended, every call but Resume, the queries, MemStats,
 * Destroy and Abort is refused. With TIDAL_SUSPEND_MEM the device path's
 * scratch is freed (connection rings and staging, which peers share, stay). */
TIDAL_API tidalResult_t tidalCommSuspend(tidalComm_t comm, int flags);
TIDAL_API tidalResult_t tidalCommResume(tidalComm_t comm);

typedef enum {
  tidalStatGpuMemSuspend = 0,   /* device bytes tidalCommSuspend(TIDAL_SUSPEND_MEM) frees */
  tidalStatGpuMemSuspended = 1, /* 1 while suspended, else 0 */
  tidalStatGpuMemPersist = 2,   /* device bytes kept while suspended */
  tidalStatGpuMemTotal = 3      /* all device bytes the communicator holds */
} tidalCommMemStat_t;
TIDAL_API tidalResult_t tidalCommMemStats(tidalComm_t comm, tidalCommMemStat_t stat,
                                          uint64_t* value);

typedef enum {
  /* The scalar is in device memory, read by every collective that uses the op. */
  tidalScalarDevice = 0,
  /* The scalar is in host memory, read once before tidalRedOpCreatePreMulSum returns. */
  tidalScalarHostImmediate = 1
} tidalScalarResidence_t;

/* An operator that multiplies each rank's input by *scalar (of type datatype)
 * and sums the products. Valid only with comm and datatype, in AllReduce,
 * Reduce and ReduceScatter, until tidalRedOpDestroy. */
TIDAL_API tidalResult_t tidalRedOpCreatePreMulSum(tidalRedOp_t* op, void* scalar,
                                                  tidalDataType_t datatype,
                                                  tidalScalarResidence_t residence,
                                                  tidalComm_t comm);
TIDAL_API tidalResult_t tidalRedOpDestroy(tidalRedOp_t op, tidalComm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* TIDAL_TIDAL_H_ */
