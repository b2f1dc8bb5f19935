// Ranks that disagree about a collective: each scenario has the last rank
// call something other than the rest (count, datatype, op, root, which
// collective, one call too many), then every rank calls the same AllReduce.
// Real processes over tcp and shm, 2 and 4 ranks. Without call signatures
// these returned success with wrong data and poisoned the calls after them;
// now no rank may return success with wrong data, every rank must get an
// error naming the mismatch (the ranks that compare the two calls name both,
// the others are told by them), and none may wait for TIDAL_TIMEOUT.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "job_fork.h"
#include "tidal/tidal.h"

namespace {

using namespace std::chrono;
using tidal::test::ForkedJob;

// What a rank saw, as its exit code's bits.
enum Seen : int {
  kWrongData = 1,  // a call returned success with wrong data
  kNamedIt = 2,    // an error named the mismatch
  kNoError = 4,    // neither call failed
  kInitFailed = 8,
  kWrongCode = 16,     // an error that was not tidalInvalidUsage / tidalRemoteError
  kNamedExactly = 32,  // (P2pMismatch) the error named both sides as the scenario expects
};

enum class Scenario {
  CountSmall,
  CountLarge,
  CountZero,
  TypeSameSize,
  TypeOtherSize,
  Op,
  BroadcastRoot,
  ReduceRoot,
  AllReduceVsBroadcast,
  AllReduceVsAllGather,
  ExtraCall,
};

const char* name(Scenario s) {
  switch (s) {
    case Scenario::CountSmall:
      return "CountSmall";
    case Scenario::CountLarge:
      return "CountLarge";
    case Scenario::CountZero:
      return "CountZero";
    case Scenario::TypeSameSize:
      return "TypeSameSize";
    case Scenario::TypeOtherSize:
      return "TypeOtherSize";
    case Scenario::Op:
      return "Op";
    case Scenario::BroadcastRoot:
      return "BroadcastRoot";
    case Scenario::ReduceRoot:
      return "ReduceRoot";
    case Scenario::AllReduceVsBroadcast:
      return "AllReduceVsBroadcast";
    case Scenario::AllReduceVsAllGather:
      return "AllReduceVsAllGather";
    case Scenario::ExtraCall:
      return "ExtraCall";
  }
  return "?";
}

bool namesMismatch(const char* text) {
  return std::strstr(text, "mismatched collective") ||
         std::strstr(text, "not a collective's signature") ||
         std::strstr(text, "is in another call") || std::strstr(text, "sent a message") ||
         std::strstr(text, "where this rank receives a message") ||
         std::strstr(text, "the datatypes differ");
}

// The mismatched call, as rank `rank` of `n` makes it (the odd one is n - 1).
tidalResult_t mismatchedCall(Scenario s, int rank, int n, tidalComm_t comm) {
  const bool odd = rank == n - 1;
  std::vector<char> bytes(size_t{2} << 23);  // room for 2 Mi doubles, or 1 Mi per rank gathered
  void* buf = bytes.data();
  switch (s) {
    case Scenario::CountSmall:
      return tidalAllReduce(buf, buf, odd ? 200 : 100, tidalFloat32, tidalSum, comm, nullptr);
    case Scenario::CountLarge:
      return tidalAllReduce(buf, buf, odd ? size_t{2} << 20 : size_t{1} << 20, tidalFloat32,
                            tidalSum, comm, nullptr);
    case Scenario::CountZero:
      return tidalAllReduce(buf, buf, odd ? 0 : 100, tidalFloat32, tidalSum, comm, nullptr);
    case Scenario::TypeSameSize:
      return tidalAllReduce(buf, buf, 100, odd ? tidalInt32 : tidalFloat32, tidalSum, comm,
                            nullptr);
    case Scenario::TypeOtherSize:
      return tidalAllReduce(buf, buf, 100, odd ? tidalFloat64 : tidalFloat32, tidalSum, comm,
                            nullptr);
    case Scenario::Op:
      return tidalAllReduce(buf, buf, 100, tidalFloat32, odd ? tidalMax : tidalSum, comm, nullptr);
    case Scenario::BroadcastRoot:
      return tidalBroadcast(buf, buf, 100, tidalFloat32, odd ? n - 1 : 0, comm, nullptr);
    case Scenario::ReduceRoot:
      return tidalReduce(buf, buf, 100, tidalFloat32, tidalSum, odd ? n - 1 : 0, comm, nullptr);
    case Scenario::AllReduceVsBroadcast:
      return odd ? tidalBroadcast(buf, buf, 100, tidalFloat32, 0, comm, nullptr)
                 : tidalAllReduce(buf, buf, 100, tidalFloat32, tidalSum, comm, nullptr);
    case Scenario::AllReduceVsAllGather:
      // In place: this rank's block already sits at its slot of the output.
      return odd ? tidalAllGather(bytes.data() + size_t{100} * sizeof(float) * rank, buf, 100,
                                  tidalFloat32, comm, nullptr)
                 : tidalAllReduce(buf, buf, 100, tidalFloat32, tidalSum, comm, nullptr);
    case Scenario::ExtraCall:
      if (odd) {
        const tidalResult_t r =
            tidalAllReduce(buf, buf, 100, tidalFloat32, tidalSum, comm, nullptr);
        if (r != tidalSuccess) return r;
      }
      return tidalAllReduce(buf, buf, 100, tidalFloat32, tidalSum, comm, nullptr);
  }
  return tidalInternalError;
}

int rankBody(Scenario s, int rank, int n) {
  tidalComm_t comm;
  if (tidalCommInitFromEnv(&comm) != tidalSuccess) return kInitFailed;
  int seen = 0;
  bool anyError = false;
  auto noteError = [&](tidalResult_t r, const char* step) {
    const char* text = tidalGetLastError(comm);
    std::fprintf(stderr, "%s np%d rank %d, %s: %s\n", name(s), n, rank, step, text);
    anyError = true;
    if (namesMismatch(text)) seen |= kNamedIt;
    if (r != tidalInvalidUsage && r != tidalRemoteError) seen |= kWrongCode;
  };
  if (const tidalResult_t r = mismatchedCall(s, rank, n, comm); r != tidalSuccess)
    noteError(r, "the mismatched call");
  // The call after it matches on every rank: it must not succeed with wrong
  // data (the streams out of step used to make it do just that).
  std::vector<float> v(64, static_cast<float>(rank + 1));
  const tidalResult_t r =
      tidalAllReduce(v.data(), v.data(), v.size(), tidalFloat32, tidalSum, comm, nullptr);
  if (r != tidalSuccess) {
    noteError(r, "the matching AllReduce after it");
  } else {
    const float want = static_cast<float>(n * (n + 1) / 2);
    for (float x : v) {
      if (x != want) {
        std::fprintf(stderr, "%s np%d rank %d: AllReduce succeeded with %g, not %g\n", name(s), n,
                     rank, static_cast<double>(x), static_cast<double>(want));
        seen |= kWrongData;
        break;
      }
    }
  }
  if (!anyError) seen |= kNoError;
  tidalCommAbort(comm);
  return seen;
}

using Param = std::tuple<Scenario, int, const char*>;

class Mismatch : public ::testing::TestWithParam<Param> {};

TEST_P(Mismatch, EveryRankFailsAndTheComparingRanksNameBothCalls) {
  const auto [scenario, n, net] = GetParam();
  const Scenario s = scenario;
  const int ranks = n;
  // A rank left waiting for its timeout would be killed by the job's limit
  // first: the mismatch must be found, not timed out.
  ForkedJob job(ranks, [s, ranks](int rank) { return rankBody(s, rank, ranks); },
                {{"TIDAL_TIMEOUT", "120"}, {"TIDAL_NET", net}});
  const auto status = job.wait(seconds(60));
  int named = 0;
  for (int r = 0; r < ranks; ++r) {
    ASSERT_TRUE(WIFEXITED(status[r])) << "rank " << r << " did not exit (hung or crashed)";
    const int seen = WEXITSTATUS(status[r]);
    EXPECT_FALSE(seen & kInitFailed) << "rank " << r;
    EXPECT_FALSE(seen & kWrongData) << "rank " << r << " returned success with wrong data";
    EXPECT_FALSE(seen & kNoError) << "rank " << r << " was never told anything was wrong";
    EXPECT_FALSE(seen & kWrongCode) << "rank " << r << " failed with an unexpected result code";
    if (seen & kNamedIt) ++named;
  }
  // The odd rank and a rank that receives from it compare signatures; the
  // others hear what they found around the bootstrap ring
  // (src/comm/failure_notice.cc): every rank names the mismatch.
  EXPECT_EQ(named, ranks);
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(name(std::get<0>(info.param))) + "_np" +
         std::to_string(std::get<1>(info.param)) + "_" + std::get<2>(info.param);
}

INSTANTIATE_TEST_SUITE_P(
    Calls, Mismatch,
    ::testing::Combine(::testing::Values(Scenario::CountSmall, Scenario::CountLarge,
                                         Scenario::CountZero, Scenario::TypeSameSize,
                                         Scenario::TypeOtherSize, Scenario::Op,
                                         Scenario::BroadcastRoot, Scenario::ReduceRoot,
                                         Scenario::AllReduceVsBroadcast,
                                         Scenario::AllReduceVsAllGather, Scenario::ExtraCall),
                       ::testing::Values(2, 4), ::testing::Values("tcp", "shm")),
    paramName);

// TIDAL_CHECK_CALLS=0 is for those who must save the signature's cost: the
// same mismatch then goes unnoticed by the library (this is what the check
// buys; the test keeps the switch honest).
TEST(MismatchUnchecked, WithoutTheCheckACountMismatchIsNotNamed) {
  ForkedJob job(2,
                [](int rank) {
                  tidalComm_t comm;
                  if (tidalCommInitFromEnv(&comm) != tidalSuccess) return int{kInitFailed};
                  std::vector<float> v(200, 1.0f);
                  const tidalResult_t r = tidalAllReduce(v.data(), v.data(), rank == 1 ? 200 : 100,
                                                         tidalFloat32, tidalSum, comm, nullptr);
                  const int seen =
                      r != tidalSuccess && namesMismatch(tidalGetLastError(comm)) ? kNamedIt : 0;
                  tidalCommAbort(comm);
                  return seen;
                },
                {{"TIDAL_TIMEOUT", "5"}, {"TIDAL_NET", "tcp"}, {"TIDAL_CHECK_CALLS", "0"}});
  const auto status = job.wait(seconds(30));
  for (int r = 0; r < 2; ++r) {
    if (WIFEXITED(status[r])) {
      EXPECT_FALSE(WEXITSTATUS(status[r]) & kNamedIt) << "rank " << r;
    }
  }
}

// Send/Recv carry a header of their own (collectives/p2p.cc): count,
// datatype, and small messages inline. Two ranks over tcp and shm.
enum class P2pScenario {
  TypeInline,        // 4 float32 (inside the header) received as int32
  TypeLarge,         // 1000 float32 received as int32
  RecvVsCollective,  // rank 0 in AllReduce, rank 1 receives from it
  SendVsCollective,  // rank 0 in AllReduce, rank 1 sends to it
};

const char* name(P2pScenario s) {
  switch (s) {
    case P2pScenario::TypeInline:
      return "TypeInline";
    case P2pScenario::TypeLarge:
      return "TypeLarge";
    case P2pScenario::RecvVsCollective:
      return "RecvVsCollective";
    case P2pScenario::SendVsCollective:
      return "SendVsCollective";
  }
  return "?";
}

// What the rank that reads the other's header or signature must say; the
// other is told (or, where its own call completed, fails on its next one
// with a mismatch of its own to name).
const char* expectedText(P2pScenario s) {
  switch (s) {
    case P2pScenario::TypeInline:
    case P2pScenario::TypeLarge:
      return "the datatypes differ";
    case P2pScenario::RecvVsCollective:
      return "rank 0 called AllReduce(count 100, float, sum) as its call #1 where this rank "
             "receives a message from it";
    case P2pScenario::SendVsCollective:
      return "rank 1 sent a message, Send(count 100, float), where rank 0 called AllReduce";
  }
  return "?";
}

int p2pRankBody(P2pScenario s, int rank) {
  tidalComm_t comm;
  if (tidalCommInitFromEnv(&comm) != tidalSuccess) return kInitFailed;
  std::vector<float> buf(1000, 1.0f);
  tidalResult_t r = tidalSuccess;
  switch (s) {
    case P2pScenario::TypeInline:
    case P2pScenario::TypeLarge: {
      const size_t count = s == P2pScenario::TypeInline ? 4 : 1000;
      r = rank == 0 ? tidalSend(buf.data(), count, tidalFloat32, 1, comm, nullptr)
                    : tidalRecv(buf.data(), count, tidalInt32, 0, comm, nullptr);
      break;
    }
    case P2pScenario::RecvVsCollective:
    case P2pScenario::SendVsCollective:
      if (rank == 0) {
        r = tidalAllReduce(buf.data(), buf.data(), 100, tidalFloat32, tidalSum, comm, nullptr);
      } else if (s == P2pScenario::RecvVsCollective) {
        r = tidalRecv(buf.data(), 100, tidalFloat32, 0, comm, nullptr);
      } else {
        r = tidalSend(buf.data(), 100, tidalFloat32, 0, comm, nullptr);
      }
      break;
  }
  // Whoever returned success is told on its next call at the latest.
  if (r == tidalSuccess)
    r = tidalAllReduce(buf.data(), buf.data(), 10, tidalFloat32, tidalSum, comm, nullptr);
  int seen = r == tidalSuccess ? kNoError : 0;
  if (r != tidalSuccess) {
    const char* text = tidalGetLastError(comm);
    std::fprintf(stderr, "%s rank %d: %s\n", name(s), rank, text);
    if (namesMismatch(text)) seen |= kNamedIt;
    if (std::strstr(text, expectedText(s))) seen |= kNamedExactly;
    if (r != tidalInvalidUsage && r != tidalRemoteError) seen |= kWrongCode;
  }
  tidalCommAbort(comm);
  return seen;
}

using P2pParam = std::tuple<P2pScenario, const char*>;

class P2pMismatch : public ::testing::TestWithParam<P2pParam> {};

TEST_P(P2pMismatch, BothRanksFailAndTheReceiverNamesBothSides) {
  const auto [scenario, net] = GetParam();
  const P2pScenario s = scenario;
  ForkedJob job(2, [s](int rank) { return p2pRankBody(s, rank); },
                {{"TIDAL_TIMEOUT", "120"}, {"TIDAL_NET", net}});
  const auto status = job.wait(seconds(60));
  int named = 0, exactly = 0;
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(WIFEXITED(status[r])) << "rank " << r << " did not exit (hung or crashed)";
    const int seen = WEXITSTATUS(status[r]);
    EXPECT_FALSE(seen & kInitFailed) << "rank " << r;
    EXPECT_FALSE(seen & kNoError) << "rank " << r << " was never told anything was wrong";
    EXPECT_FALSE(seen & kWrongCode) << "rank " << r << " failed with an unexpected result code";
    if (seen & kNamedIt) ++named;
    if (seen & kNamedExactly) ++exactly;
  }
  // Both ranks name a mismatch, and the one that read the other's header
  // (or signature) names both sides in the scenario's words.
  EXPECT_EQ(named, 2);
  EXPECT_GE(exactly, 1);
}

std::string p2pParamName(const ::testing::TestParamInfo<P2pParam>& info) {
  return std::string(name(std::get<0>(info.param))) + "_" + std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(Calls, P2pMismatch,
                         ::testing::Combine(::testing::Values(P2pScenario::TypeInline,
                                                              P2pScenario::TypeLarge,
                                                              P2pScenario::RecvVsCollective,
                                                              P2pScenario::SendVsCollective),
                                            ::testing::Values("tcp", "shm")),
                         p2pParamName);

}  // namespace
