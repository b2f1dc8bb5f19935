/* A program written against NCCL's names and built against nccl.h, linked
 * with -lnccl, run on Tidal's drop-in. It forks NRANKS processes; rank 0
 * creates the unique id and hands it to the others through pipes. Every
 * collective's result is checked exactly; so are a group simulation, bad
 * input and the host side of the device API (nccl_device.h): properties that
 * say "no device API", device communicators refused. Exit status 0 only when every rank passed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <nccl_device.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NRANKS 4
#define COUNT 1000

static int failures = 0;

#define CHECK(cond, ...)                                                  \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                       \
      fprintf(stderr, "\n");                                              \
      ++failures;                                                         \
    }                                                                     \
  } while (0)

#define NCCL_OK(call)                                                                       \
  do {                                                                                      \
    ncclResult_t r_ = (call);                                                               \
    if (r_ != ncclSuccess) {                                                                \
      fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                                      \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

static int runRank(int rank, ncclUniqueId id) {
  ncclComm_t comm;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.commName = "dropin-test";
  CHECK(config.size == sizeof(ncclConfig_t) && config.magic == NCCL_API_MAGIC &&
            config.version == NCCL_VERSION_CODE,
        "NCCL_CONFIG_INITIALIZER header fields");
  NCCL_OK(ncclCommInitRankConfig(&comm, NRANKS, id, rank, &config));

  int n = 0, me = -1, version = 0;
  NCCL_OK(ncclCommCount(comm, &n));
  NCCL_OK(ncclCommUserRank(comm, &me));
  NCCL_OK(ncclGetVersion(&version));
  CHECK(n == NRANKS && me == rank, "count %d rank %d", n, me);
  CHECK(version == NCCL_VERSION(2, 30, 0), "version %d", version);

  /* AllReduce, float32 sum and int64 max. */
  float* f = malloc(sizeof(float) * COUNT);
  for (int i = 0; i < COUNT; ++i) f[i] = (float)(rank + 1) * (float)i;
  NCCL_OK(ncclAllReduce(f, f, COUNT, ncclFloat32, ncclSum, comm, NULL));
  for (int i = 0; i < COUNT; ++i)
    if (f[i] != (float)(NRANKS * (NRANKS + 1) / 2) * (float)i) {
      CHECK(0, "allreduce f[%d]=%g", i, f[i]);
      break;
    }
  long long l[3] = {rank, -rank, 1000 + rank}, lmax[3];
  NCCL_OK(ncclAllReduce(l, lmax, 3, ncclInt64, ncclMax, comm, NULL));
  CHECK(lmax[0] == NRANKS - 1 && lmax[1] == 0 && lmax[2] == 1000 + NRANKS - 1,
        "allreduce max %lld %lld %lld", lmax[0], lmax[1], lmax[2]);

  /* Broadcast from rank 2. */
  int b[COUNT];
  for (int i = 0; i < COUNT; ++i) b[i] = rank == 2 ? 7 * i + 3 : -1;
  NCCL_OK(ncclBroadcast(b, b, COUNT, ncclInt32, 2, comm, NULL));
  for (int i = 0; i < COUNT; ++i)
    if (b[i] != 7 * i + 3) {
      CHECK(0, "broadcast b[%d]=%d", i, b[i]);
      break;
    }

  /* AllGather: rank r contributes r*100 + i. */
  int mine[8], all[8 * NRANKS];
  for (int i = 0; i < 8; ++i) mine[i] = rank * 100 + i;
  NCCL_OK(ncclAllGather(mine, all, 8, ncclInt32, comm, NULL));
  for (int r = 0; r < NRANKS; ++r)
    for (int i = 0; i < 8; ++i)
      CHECK(all[r * 8 + i] == r * 100 + i, "allgather [%d][%d]=%d", r, i, all[r * 8 + i]);

  /* ReduceScatter: element j of the full vector is j + rank on each rank. */
  double full[4 * NRANKS], part[4];
  for (int j = 0; j < 4 * NRANKS; ++j) full[j] = j + rank;
  NCCL_OK(ncclReduceScatter(full, part, 4, ncclFloat64, ncclSum, comm, NULL));
  for (int i = 0; i < 4; ++i) {
    const int j = rank * 4 + i;
    CHECK(part[i] == NRANKS * j + NRANKS * (NRANKS - 1) / 2.0, "reducescatter [%d]=%g", i, part[i]);
  }

  /* Send/Recv around the ring in one group, both directions. */
  int toRight[16], toLeft[16], fromLeft[16], fromRight[16];
  for (int i = 0; i < 16; ++i) {
    toRight[i] = rank * 1000 + i;
    toLeft[i] = -(rank * 1000 + i);
  }
  const int right = (rank + 1) % NRANKS, left = (rank + NRANKS - 1) % NRANKS;
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclSend(toRight, 16, ncclInt32, right, comm, NULL));
  NCCL_OK(ncclSend(toLeft, 16, ncclInt32, left, comm, NULL));
  NCCL_OK(ncclRecv(fromLeft, 16, ncclInt32, left, comm, NULL));
  NCCL_OK(ncclRecv(fromRight, 16, ncclInt32, right, comm, NULL));
  NCCL_OK(ncclGroupEnd());
  for (int i = 0; i < 16; ++i) {
    CHECK(fromLeft[i] == left * 1000 + i, "recv from left [%d]=%d", i, fromLeft[i]);
    CHECK(fromRight[i] == -(right * 1000 + i), "recv from right [%d]=%d", i, fromRight[i]);
  }

  /* CommSplit by parity, key reverses the order; rank 3 opts out. */
  ncclComm_t sub = NULL;
  const int color = rank == 3 ? NCCL_SPLIT_NOCOLOR : rank % 2;
  NCCL_OK(ncclCommSplit(comm, color, -rank, &sub, NULL));
  if (rank == 3) {
    CHECK(sub == NULL, "NOCOLOR gave a communicator");
  } else {
    int subN = 0, subMe = -1, v = rank, sum = 0;
    NCCL_OK(ncclCommCount(sub, &subN));
    NCCL_OK(ncclCommUserRank(sub, &subMe));
    const int expectN = rank % 2 == 0 ? 2 : 1; /* evens {0,2}, odds {1} */
    CHECK(subN == expectN, "split size %d", subN);
    /* Evens order by key: rank 2 (key -2) before rank 0 (key 0). */
    CHECK(subMe == (rank == 0 ? 1 : 0), "split rank %d for rank %d", subMe, rank);
    NCCL_OK(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, sub, NULL));
    CHECK(sum == (rank % 2 == 0 ? 2 : 1), "split allreduce %d", sum);
    NCCL_OK(ncclCommDestroy(sub));
  }

  /* CommShrink: ranks 0-2 drop rank 3, which does not call it. */
  if (rank != 3) {
    ncclComm_t shrunk = NULL;
    int exclude = 3, n = 0, v = rank, sum = -1;
    NCCL_OK(ncclCommShrink(comm, &exclude, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT));
    NCCL_OK(ncclCommCount(shrunk, &n));
    CHECK(n == 3, "shrunk size %d", n);
    NCCL_OK(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, shrunk, NULL));
    CHECK(sum == 0 + 1 + 2, "shrunk allreduce %d", sum);
    NCCL_OK(ncclCommDestroy(shrunk));
  }

  /* GroupSimulateEnd: a prediction, nothing run (sums stays as it was), and
   * the communicator still in step afterwards; without a group, an error. */
  ncclResult_t r;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  {
    float ones[COUNT], sums[COUNT];
    for (int i = 0; i < COUNT; ++i) ones[i] = 1.0f, sums[i] = -7.0f;
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclAllReduce(ones, sums, COUNT, ncclFloat32, ncclSum, comm, NULL));
    NCCL_OK(ncclGroupSimulateEnd(&sim));
    CHECK(sim.estimatedTime > 0 && sim.estimatedTime < 1e6, "simulated time %g us",
          (double)sim.estimatedTime);
    CHECK(sums[0] == -7.0f && sums[COUNT - 1] == -7.0f, "a simulated AllReduce wrote %g",
          (double)sums[0]);
    NCCL_OK(ncclAllReduce(ones, sums, COUNT, ncclFloat32, ncclSum, comm, NULL));
    CHECK(sums[0] == NRANKS && sums[COUNT - 1] == NRANKS, "AllReduce after a simulation: %g",
          (double)sums[0]);
  }
  r = ncclGroupSimulateEnd(&sim);
  CHECK(r == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "no group is open"),
        "ncclGroupSimulateEnd outside a group: %d '%s'", (int)r, ncclGetLastError(NULL));

  /* Windows are checked handles, apart from buffer registrations. */
  ncclWindow_t win = NULL;
  NCCL_OK(ncclCommWindowRegister(comm, f, COUNT * sizeof(float), &win, NCCL_WIN_COLL_SYMMETRIC));
  CHECK(win != NULL, "ncclCommWindowRegister gave a NULL window");
  r = ncclCommDeregister(comm, win);
  CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "is a window"),
        "ncclCommDeregister(window): %d '%s'", (int)r, ncclGetLastError(comm));
  NCCL_OK(ncclCommWindowDeregister(comm, win));
  r = ncclCommWindowDeregister(comm, win);
  CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "tidalCommWindowDeregister") &&
            strstr(ncclGetLastError(comm), "not a registration of this communicator"),
        "ncclCommWindowDeregister twice: %d '%s'", (int)r, ncclGetLastError(comm));
  NCCL_OK(ncclCommWindowDeregister(comm, NULL));
  r = ncclCommWindowRegister(comm, f, sizeof(float), &win, 0x10);
  CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "winFlags 0x10") && win == NULL,
        "ncclCommWindowRegister(winFlags 0x10): %d '%s'", (int)r, ncclGetLastError(comm));
  r = ncclCommWindowRegister(comm, f, 0, &win, NCCL_WIN_DEFAULT);
  CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "size is 0"),
        "ncclCommWindowRegister(size 0): %d '%s'", (int)r, ncclGetLastError(comm));
  r = ncclCommWindowRegister(comm, f, sizeof(float), NULL, NCCL_WIN_DEFAULT);
  CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "win is NULL") &&
            strstr(ncclGetLastError(comm), "rank"),
        "ncclCommWindowRegister(win NULL): %d '%s'", (int)r, ncclGetLastError(comm));

  /* One-sided, as NCCL's ping-pong example: partners 0-1 and 2-3; the even
   * rank waits and then puts, the odd one puts and then waits. */
  {
    int slot[2] = {-1, -1};
    const int mine[2] = {rank, rank * 10};
    const int partner = rank ^ 1;
    ncclWindow_t w = NULL;
    void* user = NULL;
    ncclWaitSignalDesc_t d = {1, partner, 0, 0};
    NCCL_OK(ncclCommWindowRegister(comm, slot, sizeof slot, &w, NCCL_WIN_COLL_SYMMETRIC));
    NCCL_OK(ncclWinGetUserPtr(comm, w, &user));
    CHECK(user == (void*)slot, "ncclWinGetUserPtr gave %p, not %p", user, (void*)slot);
    if (rank % 2 == 0) NCCL_OK(ncclWaitSignal(1, &d, comm, NULL));
    NCCL_OK(ncclPutSignal(mine, 2, ncclInt32, partner, w, 0, 0, 0, 0, comm, NULL));
    if (rank % 2 == 1) NCCL_OK(ncclWaitSignal(1, &d, comm, NULL));
    CHECK(slot[0] == partner && slot[1] == partner * 10, "after the ping-pong: %d %d", slot[0],
          slot[1]);
    r = ncclSignal(partner, 3, 0, 0, comm, NULL);
    CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "sigIdx 3"),
          "ncclSignal(sigIdx 3): %d '%s'", (int)r, ncclGetLastError(comm));
    NCCL_OK(ncclCommWindowDeregister(comm, w));
  }

  /* Parameters: Tidal's settings by their names; NCCL's own are not there. */
  {
    ncclParamHandle_t h = NULL;
    int32_t chunk = 0;
    const char* text = NULL;
    int len = 0;
    NCCL_OK(ncclParamBind(&h, "TIDAL_CHUNK_SIZE"));
    NCCL_OK(ncclParamGetI32(h, &chunk));
    NCCL_OK(ncclParamGetParameter("TIDAL_CHUNK_SIZE", &text, &len));
    CHECK(chunk > 0 && text != NULL && atoi(text) == chunk && len == (int)strlen(text),
          "TIDAL_CHUNK_SIZE: %d as integer, '%s' (%d) as text", (int)chunk, text ? text : "", len);
    r = ncclParamBind(&h, "NCCL_IB_ROCE_VERSION_NUM");
    CHECK(r == ncclInvalidArgument, "ncclParamBind(NCCL_IB_ROCE_VERSION_NUM): %d", (int)r);
  }

  /* The device API's host side: properties say there is none, and a device
   * communicator is refused naming the call. */
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  props.rank = props.nRanks = props.nLsaTeams = props.nvmlDev = -7;
  props.deviceApiSupport = props.multimemSupport = props.hostRmaSupport = true;
  props.ginType = props.railedGinType = NCCL_GIN_TYPE_PROXY;
  int cuDev = -2;
  NCCL_OK(ncclCommCuDevice(comm, &cuDev));
  NCCL_OK(ncclCommQueryProperties(comm, &props));
  CHECK(props.rank == rank && props.nRanks == NRANKS && props.cudaDev == cuDev &&
            props.nvmlDev == -1 && props.nLsaTeams == NRANKS,
        "properties rank %d nRanks %d cudaDev %d (comm's %d) nvmlDev %d nLsaTeams %d", props.rank,
        props.nRanks, props.cudaDev, cuDev, props.nvmlDev, props.nLsaTeams);
  CHECK(!props.deviceApiSupport && !props.multimemSupport && !props.hostRmaSupport &&
            props.ginType == NCCL_GIN_TYPE_NONE && props.railedGinType == NCCL_GIN_TYPE_NONE,
        "properties claim device support: device %d multimem %d hostRma %d gin %d railed %d",
        (int)props.deviceApiSupport, (int)props.multimemSupport, (int)props.hostRmaSupport,
        (int)props.ginType, (int)props.railedGinType);
  /* An older, shorter struct: only the fields its size covers are written. */
  ncclCommProperties_t shortProps = NCCL_COMM_PROPERTIES_INITIALIZER;
  shortProps.size = offsetof(ncclCommProperties_t, cudaDev);
  shortProps.cudaDev = 1234;
  NCCL_OK(ncclCommQueryProperties(comm, &shortProps));
  CHECK(shortProps.nRanks == NRANKS && shortProps.cudaDev == 1234, "short properties %d %d",
        shortProps.nRanks, shortProps.cudaDev);
  r = ncclCommQueryProperties(comm, NULL);
  CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "ncclCommQueryProperties") &&
            strstr(ncclGetLastError(comm), "props is NULL") &&
            strstr(ncclGetLastError(comm), "rank"),
        "QueryProperties(NULL): %d '%s'", (int)r, ncclGetLastError(comm));
  ncclCommProperties_t badProps = NCCL_COMM_PROPERTIES_INITIALIZER;
  badProps.magic = 5;
  r = ncclCommQueryProperties(comm, &badProps);
  CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "props->magic is 5"),
        "QueryProperties(bad magic): %d '%s'", (int)r, ncclGetLastError(comm));
  badProps.magic = NCCL_API_MAGIC;
  badProps.size = 3;
  r = ncclCommQueryProperties(comm, &badProps);
  CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "props->size is 3"),
        "QueryProperties(bad size): %d '%s'", (int)r, ncclGetLastError(comm));
  r = ncclCommQueryProperties(NULL, &props);
  CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(NULL), "comm is NULL"),
        "QueryProperties(NULL comm): %d '%s'", (int)r, ncclGetLastError(NULL));

  ncclTeam_t world = ncclTeamWorld(comm), lsa = ncclTeamLsa(comm), rail = ncclTeamRail(comm);
  CHECK(world.nRanks == NRANKS && world.rank == rank && world.stride == 1, "world team %d %d %d",
        world.nRanks, world.rank, world.stride);
  CHECK(lsa.nRanks == 1 && lsa.rank == 0 && lsa.stride == 1, "lsa team %d %d %d", lsa.nRanks,
        lsa.rank, lsa.stride);
  CHECK(rail.nRanks == NRANKS && rail.rank == rank, "rail team %d %d", rail.nRanks, rail.rank);
  lsa = ncclTeamLsa(NULL);
  CHECK(lsa.nRanks == 0 && strstr(ncclGetLastError(NULL), "ncclTeamLsa: comm is NULL"),
        "ncclTeamLsa(NULL): %d '%s'", lsa.nRanks, ncclGetLastError(NULL));

  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  CHECK(reqs.size == sizeof reqs && reqs.magic == NCCL_API_MAGIC && reqs.ginContextCount == 4 &&
            reqs.ginTrafficClass == NCCL_CONFIG_UNDEF_INT && reqs.ginVaSignalsRequired,
        "NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER");
  reqs.lsaBarrierCount = 16;
  ncclDevComm_t devComm;
  memset(&devComm, 0x5a, sizeof devComm);
  r = ncclDevCommCreate(comm, &reqs, &devComm);
  /* A real NCCL (one may be installed system-wide) has a device API: this
   * proves the program runs on Tidal's libnccl.so.2. */
  CHECK(r == ncclInvalidUsage && strstr(ncclGetLastError(comm), "ncclDevCommCreate") &&
            strstr(ncclGetLastError(comm), "Tidal has no device API") &&
            strstr(ncclGetLastError(comm), "rank"),
        "ncclDevCommCreate: %d '%s'", (int)r, ncclGetLastError(comm));
  CHECK(devComm.rank == 0x5a5a5a5a, "ncclDevCommCreate wrote *outDevComm");
  r = ncclDevCommCreate(comm, NULL, &devComm);
  CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "reqs is NULL"),
        "ncclDevCommCreate(reqs NULL): %d '%s'", (int)r, ncclGetLastError(comm));
  r = ncclDevCommDestroy(comm, &devComm);
  CHECK(r == ncclInvalidUsage && strstr(ncclGetLastError(comm), "ncclDevCommDestroy") &&
            strstr(ncclGetLastError(comm), "no device API"),
        "ncclDevCommDestroy: %d '%s'", (int)r, ncclGetLastError(comm));

  /* A value outside NCCL's enum is refused, naming the argument and value. */
  r = ncclAllReduce(f, f, 1, (ncclDataType_t)42, ncclSum, comm, NULL);
  CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "datatype 42"),
        "bad datatype: %d '%s'", (int)r, ncclGetLastError(comm));
  CHECK(strcmp(ncclGetErrorString(ncclSuccess), "") != 0, "empty error string");

  free(f);
  NCCL_OK(ncclCommDestroy(comm));
  if (failures == 0) printf("rank %d: all checks passed\n", rank);
  return failures == 0 ? 0 : 1;
}

int main(void) {
  int pipes[NRANKS][2];
  for (int r = 1; r < NRANKS; ++r)
    if (pipe(pipes[r]) != 0) return 2;
  Dl_info info;
  if (dladdr((void*)ncclAllReduce, &info) != 0 && info.dli_fname != NULL)
    printf("ncclAllReduce comes from %s\n", info.dli_fname);
  fflush(stdout);
  pid_t pids[NRANKS];
  for (int rank = 0; rank < NRANKS; ++rank) {
    pids[rank] = fork();
    if (pids[rank] < 0) return 2;
    if (pids[rank] == 0) {
      ncclUniqueId id;
      if (rank == 0) {
        if (ncclGetUniqueId(&id) != ncclSuccess) _exit(3);
        for (int r = 1; r < NRANKS; ++r)
          if (write(pipes[r][1], &id, sizeof id) != (ssize_t)sizeof id) _exit(3);
      } else if (read(pipes[rank][0], &id, sizeof id) != (ssize_t)sizeof id) {
        _exit(3);
      }
      alarm(120); /* a hang is a failure, never a stuck CI */
      const int rc = runRank(rank, id);
      fflush(stdout);
      _exit(rc);
    }
  }
  int bad = 0;
  for (int rank = 0; rank < NRANKS; ++rank) {
    int status = 0;
    waitpid(pids[rank], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d ended with status 0x%x\n", rank, status);
      bad = 1;
    }
  }
  if (sizeof(ncclUniqueId) != 128) bad = 1;
  printf(bad ? "FAILED\n" : "PASSED\n");
  return bad;
}
