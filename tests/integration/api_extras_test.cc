// The NCCL 2.30 calls beyond the core API: configs (blocking, commName),
// scalable init, finalize, CuDevice, PreMulSum operators, device memory,
// buffer registration, and the init check that schedule settings agree.
// Bad input must be named (argument, value, rank); good input must work.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "job_fork.h"
#include "tidal/tidal.h"

namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;
using tidal::test::ForkedJob;

std::string threadError() { return tidalGetLastError(nullptr); }

// A one-rank communicator created through tidalCommInitRankConfig.
tidalResult_t initOne(tidalComm_t* comm, tidalConfig_t* config) {
  tidalUniqueId id;
  if (tidalResult_t r = tidalGetUniqueId(&id); r != tidalSuccess) return r;
  return tidalCommInitRankConfig(comm, 1, id, 0, config);
}

// Runs body(rank) on one thread per rank of an n-rank job made by InitAll.
void onEveryRank(int n, const std::function<void(tidalComm_t, int)>& body) {
  std::vector<tidalComm_t> comms(static_cast<size_t>(n));
  ASSERT_EQ(tidalCommInitAll(comms.data(), n, nullptr), tidalSuccess) << threadError();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { body(comms[r], r); });
  for (auto& t : threads) t.join();
  for (auto c : comms) EXPECT_EQ(tidalCommDestroy(c), tidalSuccess);
}

// Polls tidalCommGetAsyncError until it is no longer tidalInProgress (30 s at most).
tidalResult_t waitForInit(tidalComm_t comm) {
  tidalResult_t state = tidalInProgress;
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (tidalCommGetAsyncError(comm, &state) != tidalSuccess) return tidalInternalError;
    if (state != tidalInProgress) return state;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return tidalInProgress;
}

TEST(Config, InitializerMirrorsNcclLayout) {
  tidalConfig_t c = TIDAL_CONFIG_INITIALIZER;
  EXPECT_EQ(c.size, sizeof(tidalConfig_t));
  EXPECT_EQ(c.magic, TIDAL_API_MAGIC);
  EXPECT_EQ(c.version, static_cast<unsigned>(TIDAL_VERSION_CODE));
  EXPECT_EQ(c.blocking, TIDAL_CONFIG_UNDEF_INT);
  EXPECT_EQ(c.netName, nullptr);
  EXPECT_EQ(c.commName, nullptr);
  EXPECT_EQ(c.nvlsHostMode, TIDAL_CONFIG_UNDEF_INT);
  // NCCL's order: the pointer fields sit where NCCL has them.
  EXPECT_LT(offsetof(tidalConfig_t, maxCTAs), offsetof(tidalConfig_t, netName));
  EXPECT_LT(offsetof(tidalConfig_t, trafficClass), offsetof(tidalConfig_t, commName));
  EXPECT_LT(offsetof(tidalConfig_t, commName), offsetof(tidalConfig_t, collnetEnable));
}

TEST(Config, BadConfigsAreNamed) {
  struct Case {
    std::function<void(tidalConfig_t&)> spoil;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {[](tidalConfig_t& c) { c.magic = 0x1234; }, {"config->magic 0x1234", "rank 0"}},
      {[](tidalConfig_t& c) { c.size = 3; }, {"config->size 3", "rank 0"}},
      {[](tidalConfig_t& c) { c.version = 99999; }, {"config->version 99999", "rank 0"}},
      {[](tidalConfig_t& c) { c.blocking = 2; }, {"config->blocking 2", "rank 0"}},
  };
  for (const Case& k : cases) {
    tidalConfig_t c = TIDAL_CONFIG_INITIALIZER;
    k.spoil(c);
    tidalComm_t comm = reinterpret_cast<tidalComm_t>(1);
    EXPECT_EQ(initOne(&comm, &c), tidalInvalidArgument);
    EXPECT_EQ(comm, nullptr);
    for (const auto& w : k.words) EXPECT_THAT(threadError(), HasSubstr(w));
    EXPECT_THAT(threadError(), HasSubstr("tidalCommInitRankConfig"));
  }
}

TEST(Config, NullConfigAndBlockingOneInitAtOnce) {
  for (int blocking : {1, TIDAL_CONFIG_UNDEF_INT}) {
    tidalConfig_t c = TIDAL_CONFIG_INITIALIZER;
    c.blocking = blocking;
    c.maxCTAs = 7;  // ignored, but accepted
    tidalComm_t comm = nullptr;
    ASSERT_EQ(initOne(&comm, &c), tidalSuccess) << threadError();
    int n = 0;
    EXPECT_EQ(tidalCommCount(comm, &n), tidalSuccess);
    EXPECT_EQ(n, 1);
    EXPECT_EQ(tidalCommDestroy(comm), tidalSuccess);
  }
  tidalComm_t comm = nullptr;
  ASSERT_EQ(initOne(&comm, nullptr), tidalSuccess) << threadError();
  EXPECT_EQ(tidalCommDestroy(comm), tidalSuccess);
}

TEST(Config, CommNameIsInErrorTexts) {
  tidalConfig_t c = TIDAL_CONFIG_INITIALIZER;
  c.commName = "trainer-dp";
  tidalComm_t comm = nullptr;
  ASSERT_EQ(initOne(&comm, &c), tidalSuccess) << threadError();
  float x = 0;
  EXPECT_EQ(tidalAllReduce(nullptr, &x, 1, tidalFloat32, tidalSum, comm, nullptr),
            tidalInvalidArgument);
  EXPECT_THAT(std::string(tidalGetLastError(comm)),
              HasSubstr("comm 'trainer-dp' rank 0: tidalAllReduce: sendbuff is NULL"));
  EXPECT_EQ(tidalCommDestroy(comm), tidalSuccess);
}

// Half of CommNameIsInLogLines: skipped unless that test starts it.
TEST(Config, CommNameLoggingSide) {
  if (std::getenv("TIDAL_TEST_LOGGING_SIDE") == nullptr)
    GTEST_SKIP() << "run by CommNameIsInLogLines";
  tidalConfig_t c = TIDAL_CONFIG_INITIALIZER;
  c.commName = "logged";
  tidalComm_t comm = nullptr;
  ASSERT_EQ(initOne(&comm, &c), tidalSuccess);
  float x = 0;
  // A failure logs at WARN from inside the call.
  EXPECT_EQ(tidalAllReduce(nullptr, &x, 1, tidalFloat32, tidalSum, comm, nullptr),
            tidalInvalidArgument);
  EXPECT_EQ(tidalCommDestroy(comm), tidalSuccess);
}

TEST(Config, CommNameIsInLogLines) {
  char path[] = "/tmp/tidal_commname_log_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  // The logger is configured once per process, so the logging side runs in a
  // fresh process: this binary, running only CommNameLoggingSide.
  ForkedJob job(1,
                [](int) {
                  ::execl("/proc/self/exe", "fault_test",
                          "--gtest_filter=Config.CommNameLoggingSide", static_cast<char*>(nullptr));
                  return 127;
                },
                {{"TIDAL_DEBUG", "INFO"},
                 {"TIDAL_DEBUG_SUBSYS", "INIT"},
                 {"TIDAL_DEBUG_FILE", path},
                 {"TIDAL_TEST_LOGGING_SIDE", "1"}});
  const auto status = job.wait(seconds(60));
  ASSERT_TRUE(WIFEXITED(status[0]) && WEXITSTATUS(status[0]) == 0) << status[0];
  std::ifstream in(path);
  std::string line;
  int ready = 0, warned = 0;
  while (std::getline(in, line)) {
    if (line.find("communicator ready") != std::string::npos) {
      ++ready;
      EXPECT_THAT(line, HasSubstr("comm 'logged' [INIT]"));
    }
    if (line.find("sendbuff is NULL") != std::string::npos) {
      ++warned;
      EXPECT_THAT(line, HasSubstr("comm 'logged' "));
    }
  }
  EXPECT_EQ(ready, 1);
  EXPECT_GE(warned, 1);
  ::unlink(path);
}

TEST(Config, NonBlockingInitCompletesInTheBackground) {
  // One thread starts both ranks: possible only because neither call blocks.
  tidalUniqueId id;
  ASSERT_EQ(tidalGetUniqueId(&id), tidalSuccess);
  tidalConfig_t c = TIDAL_CONFIG_INITIALIZER;
  c.blocking = 0;
  tidalComm_t comms[2] = {nullptr, nullptr};
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(tidalCommInitRankConfig(&comms[r], 2, id, r, &c), tidalInProgress) << threadError();
    ASSERT_NE(comms[r], nullptr);
  }
  for (auto comm : comms) EXPECT_EQ(waitForInit(comm), tidalSuccess);
  std::vector<std::thread> threads;
  std::vector<tidalResult_t> results(2, tidalInternalError);
  std::vector<std::vector<int32_t>> data = {std::vector<int32_t>(100, 3),
                                            std::vector<int32_t>(100, 4)};
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      // Collectives on a non-blocking communicator complete before they return.
      results[r] = tidalAllReduce(data[r].data(), data[r].data(), 100, tidalInt32, tidalSum,
                                  comms[r], nullptr);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r], tidalSuccess);
    EXPECT_EQ(data[r][99], 7);
    EXPECT_EQ(tidalCommDestroy(comms[r]), tidalSuccess);
  }
}

TEST(Config, NonBlockingInitFailureIsTheAsyncError) {
  // Rank 1 never comes: rank 0's init times out in the background.
  ::setenv("TIDAL_TIMEOUT", "1", 1);
  tidalUniqueId id;
  ASSERT_EQ(tidalGetUniqueId(&id), tidalSuccess);
  tidalConfig_t c = TIDAL_CONFIG_INITIALIZER;
  c.blocking = 0;
  c.commName = "lonely";
  tidalComm_t comm = nullptr;
  ASSERT_EQ(tidalCommInitRankConfig(&comm, 2, id, 0, &c), tidalInProgress);
  tidalResult_t state = tidalSuccess;
  EXPECT_EQ(tidalCommGetAsyncError(comm, &state), tidalSuccess);
  const tidalResult_t final = waitForInit(comm);
  ::unsetenv("TIDAL_TIMEOUT");
  EXPECT_NE(final, tidalSuccess);
  EXPECT_NE(final, tidalInProgress);
  EXPECT_THAT(std::string(tidalGetLastError(comm)), HasSubstr("comm 'lonely'"));
  int n = 0;
  EXPECT_EQ(tidalCommCount(comm, &n), final);
  EXPECT_EQ(tidalCommDestroy(comm), tidalSuccess);
}

TEST(Scalable, ChecksItsIdsAndUsesTheFirst) {
  tidalUniqueId ids[2];
  ASSERT_EQ(tidalGetUniqueId(&ids[0]), tidalSuccess);
  ASSERT_EQ(tidalGetUniqueId(&ids[1]), tidalSuccess);
  tidalComm_t comm = nullptr;
  EXPECT_EQ(tidalCommInitRankScalable(&comm, 1, 0, 0, ids, nullptr), tidalInvalidArgument);
  EXPECT_THAT(threadError(), HasSubstr("nId 0"));
  EXPECT_THAT(threadError(), HasSubstr("rank 0"));
  EXPECT_EQ(tidalCommInitRankScalable(&comm, 1, 0, 2, ids, nullptr), tidalInvalidArgument);
  EXPECT_THAT(threadError(), HasSubstr("nId 2"));
  EXPECT_EQ(tidalCommInitRankScalable(&comm, 1, 0, 1, nullptr, nullptr), tidalInvalidArgument);
  EXPECT_THAT(threadError(), HasSubstr("commIds is NULL"));
  // Two ranks, two ids, each rank on its own thread.
  tidalComm_t comms[2] = {nullptr, nullptr};
  std::vector<std::thread> threads;
  tidalResult_t results[2] = {tidalInternalError, tidalInternalError};
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back(
        [&, r] { results[r] = tidalCommInitRankScalable(&comms[r], 2, r, 2, ids, nullptr); });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(results[r], tidalSuccess);
    int rank = -1;
    EXPECT_EQ(tidalCommUserRank(comms[r], &rank), tidalSuccess);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(tidalCommDestroy(comms[r]), tidalSuccess);
  }
}

TEST(Finalize, OnlyDestroyAndQueriesFollow) {
  tidalComm_t comm = nullptr;
  ASSERT_EQ(initOne(&comm, nullptr), tidalSuccess);
  EXPECT_EQ(tidalCommFinalize(comm), tidalSuccess) << tidalGetLastError(comm);
  float x = 1, y = 0;
  EXPECT_EQ(tidalAllReduce(&x, &y, 1, tidalFloat32, tidalSum, comm, nullptr), tidalInvalidUsage);
  EXPECT_THAT(std::string(tidalGetLastError(comm)), HasSubstr("rank 0: tidalAllReduce"));
  EXPECT_THAT(std::string(tidalGetLastError(comm)), HasSubstr("finalized"));
  EXPECT_EQ(tidalBarrier(comm, nullptr), tidalInvalidUsage);
  EXPECT_THAT(std::string(tidalGetLastError(comm)), HasSubstr("tidalBarrier"));
  EXPECT_EQ(tidalCommFinalize(comm), tidalInvalidUsage);
  EXPECT_THAT(std::string(tidalGetLastError(comm)), HasSubstr("already finalized"));
  int n = 0;
  EXPECT_EQ(tidalCommCount(comm, &n), tidalSuccess);
  EXPECT_EQ(tidalCommDestroy(comm), tidalSuccess);
  EXPECT_EQ(tidalCommFinalize(nullptr), tidalInvalidArgument);
}

TEST(Finalize, IsCollectiveAndFlushes) {
  onEveryRank(3, [](tidalComm_t comm, int rank) {
    std::vector<int32_t> v(1000, rank + 1);
    EXPECT_EQ(tidalAllReduce(v.data(), v.data(), v.size(), tidalInt32, tidalSum, comm, nullptr),
              tidalSuccess);
    EXPECT_EQ(v[999], 6);
    EXPECT_EQ(tidalCommFinalize(comm), tidalSuccess) << tidalGetLastError(comm);
  });
}

TEST(CuDevice, MinusOneWithoutCuda) {
  ForkedJob job(1,
                [](int) {
                  tidalComm_t comm = nullptr;
                  if (initOne(&comm, nullptr) != tidalSuccess) return 1;
                  int device = 42;
                  if (tidalCommCuDevice(comm, &device) != tidalSuccess || device != -1) return 2;
                  if (tidalCommCuDevice(comm, nullptr) != tidalInvalidArgument) return 3;
                  if (std::string(tidalGetLastError(comm))
                          .find("rank 0: tidalCommCuDevice: device is NULL") == std::string::npos) {
                    return 4;
                  }
                  return tidalCommDestroy(comm) == tidalSuccess ? 0 : 5;
                },
                {{"TIDAL_CUDA_DISABLE", "1"}});
  const auto status = job.wait(seconds(60));
  ASSERT_TRUE(WIFEXITED(status[0])) << status[0];
  EXPECT_EQ(WEXITSTATUS(status[0]), 0);
}

// PreMulSum: sum over ranks of scalar_r * x_r.
TEST(PreMulSum, AllReduceReduceAndReduceScatterScaleEachRank) {
  constexpr int kRanks = 3;
  onEveryRank(kRanks, [](tidalComm_t comm, int rank) {
    float scalar = 0.5f * static_cast<float>(rank + 1);  // 0.5, 1, 1.5
    tidalRedOp_t op = tidalSum;
    ASSERT_EQ(tidalRedOpCreatePreMulSum(&op, &scalar, tidalFloat32, tidalScalarHostImmediate, comm),
              tidalSuccess)
        << tidalGetLastError(comm);
    EXPECT_GE(static_cast<int>(op), tidalNumOps);
    scalar = 1000.0f;  // captured at creation: later changes do not count
    // x_r[i] = (r + 1) * (i + 1); result[i] = (i + 1) * sum 0.5 (r + 1)^2 = 7 (i + 1)
    std::vector<float> x(kRanks * 5), y(kRanks * 5, -1.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((rank + 1) * (i + 1));
    ASSERT_EQ(tidalAllReduce(x.data(), y.data(), x.size(), tidalFloat32, op, comm, nullptr),
              tidalSuccess)
        << tidalGetLastError(comm);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_FLOAT_EQ(y[i], 7.0f * (i + 1)) << i;
    // In place.
    std::vector<float> z = x;
    ASSERT_EQ(tidalAllReduce(z.data(), z.data(), z.size(), tidalFloat32, op, comm, nullptr),
              tidalSuccess);
    EXPECT_FLOAT_EQ(z[4], 35.0f);
    std::vector<float> r(5, -1.0f);
    ASSERT_EQ(tidalReduceScatter(x.data(), r.data(), 5, tidalFloat32, op, comm, nullptr),
              tidalSuccess);
    for (size_t i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(r[i], 7.0f * (rank * 5 + i + 1));
    std::vector<float> root(x.size(), -1.0f);
    ASSERT_EQ(tidalReduce(x.data(), root.data(), x.size(), tidalFloat32, op, 1, comm, nullptr),
              tidalSuccess);
    if (rank == 1) {
      EXPECT_FLOAT_EQ(root[2], 21.0f);
    }
    EXPECT_EQ(tidalRedOpDestroy(op, comm), tidalSuccess);
  });
}

TEST(PreMulSum, IntegerAndHalfTypes) {
  onEveryRank(2, [](tidalComm_t comm, int rank) {
    int32_t s = rank == 0 ? 3 : -2;
    tidalRedOp_t op;
    ASSERT_EQ(tidalRedOpCreatePreMulSum(&op, &s, tidalInt32, tidalScalarHostImmediate, comm),
              tidalSuccess);
    std::vector<int32_t> x(7, 10), y(7, 0);
    ASSERT_EQ(tidalAllReduce(x.data(), y.data(), 7, tidalInt32, op, comm, nullptr), tidalSuccess);
    EXPECT_EQ(y[6], 10);  // 3*10 - 2*10
    EXPECT_EQ(tidalRedOpDestroy(op, comm), tidalSuccess);
    uint16_t half2 = 0x4000;  // 2.0 in float16
    ASSERT_EQ(tidalRedOpCreatePreMulSum(&op, &half2, tidalFloat16, tidalScalarHostImmediate, comm),
              tidalSuccess);
    std::vector<uint16_t> h(3, 0x3c00), g(3, 0);  // 1.0
    ASSERT_EQ(tidalAllReduce(h.data(), g.data(), 3, tidalFloat16, op, comm, nullptr), tidalSuccess);
    EXPECT_EQ(g[0], 0x4400);  // 4.0
    EXPECT_EQ(tidalRedOpDestroy(op, comm), tidalSuccess);
  });
}

TEST(PreMulSum, BadOperatorsAreNamed) {
  tidalComm_t a = nullptr, b = nullptr;
  ASSERT_EQ(tidalCommInitAll(&a, 1, nullptr), tidalSuccess);
  ASSERT_EQ(tidalCommInitAll(&b, 1, nullptr), tidalSuccess);
  const auto last = [&](tidalComm_t c) { return std::string(tidalGetLastError(c)); };
  float scalar = 2.0f;
  tidalRedOp_t op;
  EXPECT_EQ(tidalRedOpCreatePreMulSum(nullptr, &scalar, tidalFloat32, tidalScalarHostImmediate, a),
            tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr("rank 0: tidalRedOpCreatePreMulSum: op is NULL"));
  EXPECT_EQ(tidalRedOpCreatePreMulSum(&op, nullptr, tidalFloat32, tidalScalarHostImmediate, a),
            tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr("scalar is NULL"));
  EXPECT_EQ(tidalRedOpCreatePreMulSum(&op, &scalar, static_cast<tidalDataType_t>(77),
                                      tidalScalarHostImmediate, a),
            tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr("datatype 77"));
  EXPECT_EQ(tidalRedOpCreatePreMulSum(&op, &scalar, tidalFloat32,
                                      static_cast<tidalScalarResidence_t>(9), a),
            tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr("residence 9"));
  // A host pointer as a device scalar: refused either way (no CUDA, or not device memory).
  EXPECT_NE(tidalRedOpCreatePreMulSum(&op, &scalar, tidalFloat32, tidalScalarDevice, a),
            tidalSuccess);
  EXPECT_THAT(last(a), HasSubstr("tidalScalarDevice"));

  ASSERT_EQ(tidalRedOpCreatePreMulSum(&op, &scalar, tidalFloat32, tidalScalarHostImmediate, a),
            tidalSuccess);
  const std::string opText = "op " + std::to_string(static_cast<int>(op));
  float x[4] = {1, 2, 3, 4}, y[4];
  // Another datatype.
  double dx[4] = {1, 2, 3, 4}, dy[4];
  EXPECT_EQ(tidalAllReduce(dx, dy, 4, tidalFloat64, op, a, nullptr), tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr(opText + " was created for datatype 7 (float), not 8 (double)"));
  // Another communicator.
  EXPECT_EQ(tidalAllReduce(x, y, 4, tidalFloat32, op, b, nullptr), tidalInvalidArgument);
  EXPECT_THAT(last(b), HasSubstr(opText + " was created on another communicator"));
  EXPECT_EQ(tidalRedOpDestroy(op, b), tidalInvalidArgument);
  EXPECT_THAT(last(b), HasSubstr(opText + " was created on another communicator"));
  // Works on its own communicator, then destroyed.
  EXPECT_EQ(tidalAllReduce(x, y, 4, tidalFloat32, op, a, nullptr), tidalSuccess);
  EXPECT_FLOAT_EQ(y[3], 8.0f);
  EXPECT_EQ(tidalRedOpDestroy(op, a), tidalSuccess);
  EXPECT_EQ(tidalReduce(x, y, 4, tidalFloat32, op, 0, a, nullptr), tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr(opText + " is not a live operator"));
  EXPECT_EQ(tidalRedOpDestroy(op, a), tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr(opText));
  EXPECT_EQ(tidalRedOpDestroy(tidalSum, a), tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr("op 0 is not one made by tidalRedOpCreatePreMulSum"));
  EXPECT_EQ(
      tidalReduceScatter(x, y, 4, tidalFloat32, static_cast<tidalRedOp_t>(123456), a, nullptr),
      tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr("op 123456"));
  EXPECT_EQ(tidalCommDestroy(a), tidalSuccess);
  EXPECT_EQ(tidalCommDestroy(b), tidalSuccess);
}

TEST(Memory, AllocNeedsCudaAndChecksArguments) {
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(tidalMemAlloc(nullptr, 64), tidalInvalidArgument);
  EXPECT_THAT(threadError(), HasSubstr("tidalMemAlloc: ptr is NULL"));
  EXPECT_EQ(tidalMemAlloc(&p, 0), tidalInvalidArgument);
  EXPECT_THAT(threadError(), HasSubstr("size is 0"));
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(tidalMemFree(nullptr), tidalSuccess);
  const tidalResult_t r = tidalMemAlloc(&p, 4096);
  if (r == tidalSuccess) {  // a machine with a usable GPU
    EXPECT_NE(p, nullptr);
    EXPECT_EQ(tidalMemFree(p), tidalSuccess);
    int host = 0;
    EXPECT_EQ(tidalMemFree(&host), tidalInvalidArgument);
  } else {
    EXPECT_EQ(r, tidalInvalidUsage);
    EXPECT_THAT(threadError(), HasSubstr("4096 bytes of device memory requested, but"));
    int host = 0;
    EXPECT_EQ(tidalMemFree(&host), tidalInvalidUsage);
  }
}

TEST(Memory, RegistrationHandlesAreChecked) {
  tidalComm_t a = nullptr, b = nullptr;
  ASSERT_EQ(tidalCommInitAll(&a, 1, nullptr), tidalSuccess);
  ASSERT_EQ(tidalCommInitAll(&b, 1, nullptr), tidalSuccess);
  const auto last = [&](tidalComm_t c) { return std::string(tidalGetLastError(c)); };
  std::vector<char> buffer(1 << 16);
  void* handle = nullptr;
  EXPECT_EQ(tidalCommRegister(a, buffer.data(), buffer.size(), nullptr), tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr("rank 0: tidalCommRegister: handle is NULL"));
  EXPECT_EQ(tidalCommRegister(a, nullptr, 16, &handle), tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr("buff is NULL (size 16)"));
  EXPECT_EQ(tidalCommRegister(a, buffer.data(), 0, &handle), tidalSuccess);
  EXPECT_EQ(handle, nullptr);
  EXPECT_EQ(tidalCommDeregister(a, nullptr), tidalSuccess);

  ASSERT_EQ(tidalCommRegister(a, buffer.data(), buffer.size(), &handle), tidalSuccess);
  ASSERT_NE(handle, nullptr);
  std::ostringstream text;
  text << "handle " << handle;
  EXPECT_EQ(tidalCommDeregister(b, handle), tidalInvalidArgument);
  EXPECT_THAT(last(b), HasSubstr(text.str() + " was registered on another communicator"));
  EXPECT_EQ(tidalCommDeregister(a, handle), tidalSuccess);
  EXPECT_EQ(tidalCommDeregister(a, handle), tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr(text.str() + " is not a registration of this communicator"));
  int stranger = 0;
  EXPECT_EQ(tidalCommDeregister(a, &stranger), tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr("unknown, or already deregistered"));
  EXPECT_EQ(tidalCommDestroy(a), tidalSuccess);
  EXPECT_EQ(tidalCommDestroy(b), tidalSuccess);
}

TEST(Memory, WindowHandlesAreCheckedAndKeptApartFromRegistrations) {
  tidalComm_t a = nullptr, b = nullptr;
  ASSERT_EQ(tidalCommInitAll(&a, 1, nullptr), tidalSuccess);
  ASSERT_EQ(tidalCommInitAll(&b, 1, nullptr), tidalSuccess);
  const auto last = [&](tidalComm_t c) { return std::string(tidalGetLastError(c)); };
  std::vector<char> buffer(1 << 16);
  tidalWindow_t win = nullptr;
  EXPECT_EQ(tidalCommWindowRegister(a, buffer.data(), buffer.size(), nullptr, 0),
            tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr("rank 0: tidalCommWindowRegister: win is NULL"));
  EXPECT_EQ(tidalCommWindowRegister(a, nullptr, 16, &win, 0), tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr("buff is NULL (size 16)"));
  EXPECT_EQ(tidalCommWindowRegister(a, buffer.data(), 0, &win, 0), tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr("size is 0"));
  EXPECT_EQ(win, nullptr);
  EXPECT_EQ(tidalCommWindowRegister(a, buffer.data(), 64, &win, 0x4), tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr("winFlags 0x4 has bits outside"));
  EXPECT_EQ(tidalCommWindowRegister(nullptr, buffer.data(), 64, &win, 0), tidalInvalidArgument);
  EXPECT_THAT(threadError(), HasSubstr("tidalCommWindowRegister: comm is NULL"));
  EXPECT_EQ(tidalCommWindowDeregister(a, nullptr), tidalSuccess);

  ASSERT_EQ(tidalCommWindowRegister(a, buffer.data(), buffer.size(), &win,
                                    TIDAL_WIN_COLL_SYMMETRIC | TIDAL_WIN_STRICT_ORDERING),
            tidalSuccess)
      << last(a);
  ASSERT_NE(win, nullptr);
  void* handle = nullptr;
  ASSERT_EQ(tidalCommRegister(a, buffer.data(), buffer.size(), &handle), tidalSuccess);
  std::ostringstream winText, handleText;
  winText << "win " << static_cast<void*>(win);
  handleText << "win " << handle;
  // Each deregister call refuses the other's handles, naming the right call.
  EXPECT_EQ(tidalCommDeregister(a, win), tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr("is a window (tidalCommWindowRegister)"));
  EXPECT_EQ(tidalCommWindowDeregister(a, reinterpret_cast<tidalWindow_t>(handle)),
            tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr(handleText.str() + " is a buffer registration"));
  EXPECT_EQ(tidalCommWindowDeregister(b, win), tidalInvalidArgument);
  EXPECT_THAT(last(b), HasSubstr(winText.str() + " was registered on another communicator"));
  EXPECT_EQ(tidalCommWindowDeregister(a, win), tidalSuccess) << last(a);
  EXPECT_EQ(tidalCommWindowDeregister(a, win), tidalInvalidArgument);
  EXPECT_THAT(last(a), HasSubstr(winText.str() + " is not a registration of this communicator"));
  EXPECT_EQ(tidalCommDeregister(a, handle), tidalSuccess) << last(a);
  // A window left registered is dropped with its communicator.
  ASSERT_EQ(tidalCommWindowRegister(b, buffer.data(), 8, &win, TIDAL_WIN_DEFAULT), tidalSuccess);
  EXPECT_EQ(tidalCommDestroy(a), tidalSuccess);
  EXPECT_EQ(tidalCommDestroy(b), tidalSuccess);
}

// A wait for a signal that never comes ends at TIDAL_TIMEOUT, naming what is
// missing, and leaves the communicator usable: the signal, once sent, is
// waited for. tidalCommAbort on another thread ends a wait at once.
TEST(OneSided, WaitSignalTimesOutNamingTheMissingSignalsAndAbortEndsIt) {
  ::setenv("TIDAL_TIMEOUT", "1", 1);
  tidalComm_t comm = nullptr;
  ASSERT_EQ(tidalCommInitAll(&comm, 1, nullptr), tidalSuccess);
  ::unsetenv("TIDAL_TIMEOUT");
  tidalWaitSignalDesc_t d{2, 0, 0, 0};
  ASSERT_EQ(tidalSignal(0, 0, 0, 0, comm, nullptr), tidalSuccess) << tidalGetLastError(comm);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(tidalWaitSignal(1, &d, comm, nullptr), tidalTimeout);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.9);
  EXPECT_LT(waited, 30.0);
  EXPECT_THAT(std::string(tidalGetLastError(comm)),
              HasSubstr("rank 0: tidalWaitSignal: signals missing after TIDAL_TIMEOUT=1 s "
                        "(arrived of expected: rank 0: 1 of 2)"));
  ASSERT_EQ(tidalSignal(0, 0, 0, 0, comm, nullptr), tidalSuccess) << tidalGetLastError(comm);
  EXPECT_EQ(tidalWaitSignal(1, &d, comm, nullptr), tidalSuccess) << tidalGetLastError(comm);
  // Those two are taken: one more is needed now.
  d.opCnt = 1;
  tidalResult_t aborted = tidalSuccess;
  std::thread waiter([&] { aborted = tidalWaitSignal(1, &d, comm, nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(tidalCommAbort(comm), tidalSuccess);
  waiter.join();
  EXPECT_EQ(aborted, tidalRemoteError);
}

// NCCL 2.30's parameter API over Tidal's settings: typed reads with range
// checks, strings, raw bytes, the key table and the dump; each error names
// the argument and the value.
TEST(Params, TypedReadsCheckRangeKindAndValue) {
  ::setenv("TIDAL_TIMEOUT", "300", 1);
  ::setenv("TIDAL_NET", "shm", 1);
  ::setenv("TIDAL_CHECK_CALLS", "0", 1);
  tidalParamHandle_t timeout = nullptr, net = nullptr, check = nullptr, none = nullptr;
  EXPECT_EQ(tidalParamBind(&none, "TIDAL_NO_SUCH_SETTING"), tidalInvalidArgument);
  EXPECT_THAT(threadError(), HasSubstr("key 'TIDAL_NO_SUCH_SETTING' is not a Tidal setting"));
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(tidalParamBind(&timeout, nullptr), tidalInvalidArgument);
  EXPECT_THAT(threadError(), HasSubstr("tidalParamBind: key is NULL"));
  ASSERT_EQ(tidalParamBind(&timeout, "TIDAL_TIMEOUT"), tidalSuccess) << threadError();
  ASSERT_EQ(tidalParamBind(&net, "TIDAL_NET"), tidalSuccess) << threadError();
  ASSERT_EQ(tidalParamBind(&check, "TIDAL_CHECK_CALLS"), tidalSuccess) << threadError();

  int16_t i16 = 0;
  uint64_t u64 = 0;
  int8_t i8 = 0;
  uint8_t u8 = 0;
  EXPECT_EQ(tidalParamGetI16(timeout, &i16), tidalSuccess) << threadError();
  EXPECT_EQ(i16, 300);
  EXPECT_EQ(tidalParamGetU64(timeout, &u64), tidalSuccess) << threadError();
  EXPECT_EQ(u64, 300u);
  EXPECT_EQ(tidalParamGetI8(timeout, &i8), tidalInvalidArgument);
  EXPECT_THAT(threadError(),
              HasSubstr("tidalParamGetI8: TIDAL_TIMEOUT=300 does not fit the 8-bit signed"));
  EXPECT_EQ(tidalParamGetU8(timeout, &u8), tidalInvalidArgument);
  ::setenv("TIDAL_TIMEOUT", "-1", 1);  // read afresh at every call
  uint32_t u32 = 7;
  EXPECT_EQ(tidalParamGetU32(timeout, &u32), tidalInvalidArgument);
  EXPECT_THAT(threadError(), HasSubstr("TIDAL_TIMEOUT=-1 does not fit the 32-bit unsigned"));
  EXPECT_EQ(u32, 7u);
  ::setenv("TIDAL_TIMEOUT", "soon", 1);
  int64_t i64 = 0;
  EXPECT_EQ(tidalParamGetI64(timeout, &i64), tidalInvalidArgument);
  EXPECT_THAT(threadError(), HasSubstr("TIDAL_TIMEOUT='soon'"));
  const char* text = nullptr;
  int length = -1;
  EXPECT_EQ(tidalParamGetParameter("TIDAL_TIMEOUT", &text, &length), tidalInvalidArgument);
  ::setenv("TIDAL_TIMEOUT", "45", 1);
  EXPECT_EQ(tidalParamGetParameter("TIDAL_TIMEOUT", &text, &length), tidalSuccess) << threadError();
  EXPECT_STREQ(text, "45");
  EXPECT_EQ(length, 2);
  EXPECT_EQ(tidalParamGetParameter("TIDAL_NOPE", &text, &length), tidalInvalidArgument);
  EXPECT_EQ(text, nullptr);

  // A boolean reads as 0 or 1; a string only as a string.
  int32_t i32 = -5;
  EXPECT_EQ(tidalParamGetI32(check, &i32), tidalSuccess) << threadError();
  EXPECT_EQ(i32, 0);
  EXPECT_EQ(tidalParamGetI32(net, &i32), tidalInvalidArgument);
  EXPECT_THAT(threadError(), HasSubstr("TIDAL_NET is a string setting ('shm')"));
  EXPECT_EQ(tidalParamGetStr(net, &text), tidalSuccess) << threadError();
  EXPECT_STREQ(text, "shm");
  EXPECT_EQ(tidalParamGetStr(timeout, &text), tidalSuccess) << threadError();
  EXPECT_STREQ(text, "45");

  // Raw bytes: the size needed comes back when the buffer is too small.
  unsigned char raw[16] = {};
  int len = 0;
  EXPECT_EQ(tidalParamGet(timeout, raw, 4, &len), tidalInvalidArgument);
  EXPECT_EQ(len, 8);
  EXPECT_EQ(tidalParamGet(timeout, raw, sizeof raw, &len), tidalSuccess) << threadError();
  int64_t rawValue = 0;
  std::memcpy(&rawValue, raw, sizeof rawValue);
  EXPECT_EQ(rawValue, 45);
  EXPECT_EQ(tidalParamGet(net, raw, sizeof raw, &len), tidalSuccess) << threadError();
  EXPECT_EQ(len, 4);
  EXPECT_STREQ(reinterpret_cast<const char*>(raw), "shm");

  int stranger = 0;
  EXPECT_EQ(tidalParamGetI32(reinterpret_cast<tidalParamHandle_t>(&stranger), &i32),
            tidalInvalidArgument);
  EXPECT_THAT(threadError(), HasSubstr("is not a handle from tidalParamBind"));

  const char** keys = nullptr;
  int count = 0;
  ASSERT_EQ(tidalParamGetAllParameterKeys(&keys, &count), tidalSuccess) << threadError();
  std::vector<std::string> names(keys, keys + count);
  EXPECT_GE(count, 20);
  EXPECT_NE(std::find(names.begin(), names.end(), "TIDAL_TIMEOUT"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "TIDAL_NET"), names.end());
  for (const std::string& name : names) {
    tidalParamHandle_t h = nullptr;
    EXPECT_EQ(tidalParamBind(&h, name.c_str()), tidalSuccess) << name;
  }

  testing::internal::CaptureStdout();
  tidalParamDumpAll();
  const std::string dump = testing::internal::GetCapturedStdout();
  EXPECT_THAT(dump, HasSubstr("TIDAL_TIMEOUT=45 (int, environment)\n"));
  EXPECT_THAT(dump, HasSubstr("TIDAL_NET=shm (string, environment)\n"));
  ::unsetenv("TIDAL_TIMEOUT");
  ::unsetenv("TIDAL_NET");
  ::unsetenv("TIDAL_CHECK_CALLS");
}

// Each rank writes its init result and error text to a file the test reads.
struct InitOutcome {
  int result = -1;
  std::string text;
};

std::vector<InitOutcome> initJob(int nranks, const std::function<void(int)>& before) {
  const std::string dir = "/tmp/tidal_settings_" + std::to_string(::getpid());
  ::mkdir(dir.c_str(), 0700);
  ForkedJob job(nranks,
                [&](int rank) {
                  before(rank);
                  tidalComm_t comm = nullptr;
                  const tidalResult_t r = tidalCommInitFromEnv(&comm);
                  std::ofstream out(dir + "/" + std::to_string(rank));
                  out << static_cast<int>(r) << "\n"
                      << (r == tidalSuccess ? "" : threadError()) << "\n";
                  out.close();
                  if (r == tidalSuccess) tidalCommDestroy(comm);
                  return 0;
                },
                {{"TIDAL_TIMEOUT", "30"}});
  const auto status = job.wait(seconds(90));
  std::vector<InitOutcome> outcomes(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    EXPECT_TRUE(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0) << "rank " << r;
    const std::string file = dir + "/" + std::to_string(r);
    std::ifstream in(file);
    in >> outcomes[r].result;
    std::getline(in, outcomes[r].text);
    std::getline(in, outcomes[r].text);
    ::unlink(file.c_str());
  }
  ::rmdir(dir.c_str());
  return outcomes;
}

TEST(ScheduleSettings, AChunkSizeOnOneRankFailsEveryRank) {
  const auto outcomes = initJob(3, [](int rank) {
    if (rank == 2) ::setenv("TIDAL_CHUNK_SIZE", "131072", 1);
  });
  for (int r = 0; r < 3; ++r) {
    const InitOutcome& o = outcomes[r];
    EXPECT_EQ(o.result, tidalInvalidUsage) << "rank " << r << ": " << o.text;
    EXPECT_THAT(o.text, HasSubstr("rank " + std::to_string(r) + ": TIDAL_CHUNK_SIZE="));
    // Ranks 0 and 1 name rank 2's value; rank 2 names rank 0's.
    if (r < 2) {
      EXPECT_THAT(o.text, HasSubstr("TIDAL_CHUNK_SIZE=524288 here but rank 2 has "
                                    "TIDAL_CHUNK_SIZE=131072"));
    } else {
      EXPECT_THAT(o.text, HasSubstr("TIDAL_CHUNK_SIZE=131072 here but rank 0 has "
                                    "TIDAL_CHUNK_SIZE=524288"));
    }
  }
}

TEST(ScheduleSettings, AnAlgorithmOnOneRankFailsEveryRank) {
  const auto outcomes = initJob(2, [](int rank) {
    if (rank == 0) ::setenv("TIDAL_ALLREDUCE_ALGO", "ring", 1);
  });
  for (const InitOutcome& o : outcomes) {
    EXPECT_EQ(o.result, tidalInvalidUsage) << o.text;
    EXPECT_THAT(o.text, HasSubstr("TIDAL_ALLREDUCE_ALGO"));
  }
}

TEST(ScheduleSettings, ExchangeAlgorithmsAndThresholdsMustAgree) {
  // Bruck against pairwise, or a tree against direct, would post receives
  // of sizes the peer never sends.
  for (const auto& [name, value] :
       std::vector<std::pair<const char*, const char*>>{{"TIDAL_ALLTOALL_ALGO", "bruck"},
                                                        {"TIDAL_ALLTOALL_BRUCK_BYTES", "64"},
                                                        {"TIDAL_GATHER_ALGO", "tree"},
                                                        {"TIDAL_GATHER_TREE_BYTES", "8"},
                                                        {"TIDAL_SCATTER_ALGO", "direct"},
                                                        {"TIDAL_SCATTER_TREE_BYTES", "0"},
                                                        {"TIDAL_ALLREDUCE_RABENSEIFNER_BYTES", "0"},
                                                        {"TIDAL_ALLGATHER_BRUCK_BYTES", "16"},
                                                        {"TIDAL_ALLREDUCE_ALGO", "tree"},
                                                        {"TIDAL_ALLGATHER_ALGO", "bruck"},
                                                        {"TIDAL_REDUCESCATTER_ALGO", "halving"},
                                                        {"TIDAL_REDUCESCATTER_HALVING_BYTES", "4"},
                                                        {"TIDAL_TUNER", "model"}}) {
    const auto outcomes = initJob(2, [&](int rank) {
      if (rank == 1) ::setenv(name, value, 1);
    });
    for (const InitOutcome& o : outcomes) {
      EXPECT_EQ(o.result, tidalInvalidUsage) << o.text;
      EXPECT_THAT(o.text, HasSubstr(std::string(name) + "=" + value));
    }
  }
}

TEST(ScheduleSettings, EqualSettingsSpelledDifferentlyAgree) {
  // 0x80000 is the default 524288 written another way: the parsed values agree.
  const auto outcomes = initJob(2, [](int rank) {
    if (rank == 1) ::setenv("TIDAL_CHUNK_SIZE", "0x80000", 1);
  });
  for (const InitOutcome& o : outcomes) {
    EXPECT_EQ(o.result, tidalSuccess) << o.text;
    EXPECT_THAT(o.text, Not(HasSubstr("TIDAL_CHUNK_SIZE")));
  }
}

}  // namespace
