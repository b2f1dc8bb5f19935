// The C++ layer (include/tidal/tidal.hpp): its compile-time mapping, its own
// checks, and every collective through it on communicators made by initAll.
// Links the public library only, as a user program would.
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "tidal/tidal.hpp"

namespace {

static_assert(tidal::dataTypeOf<int8_t> == tidalInt8);
static_assert(tidal::dataTypeOf<uint8_t> == tidalUint8);
static_assert(tidal::dataTypeOf<int32_t> == tidalInt32);
static_assert(tidal::dataTypeOf<uint32_t> == tidalUint32);
static_assert(tidal::dataTypeOf<int64_t> == tidalInt64);
static_assert(tidal::dataTypeOf<uint64_t> == tidalUint64);
static_assert(tidal::dataTypeOf<long long> == tidalInt64);
static_assert(tidal::dataTypeOf<unsigned long long> == tidalUint64);
static_assert(tidal::dataTypeOf<float> == tidalFloat32);
static_assert(tidal::dataTypeOf<const double> == tidalFloat64);
static_assert(!tidal::Element<bool>);
static_assert(!tidal::Element<char>);
static_assert(!tidal::Element<int16_t>);  // no 16-bit integers in the C API
static_assert(!tidal::Element<long double>);
static_assert(!std::is_copy_constructible_v<tidal::Communicator>);
static_assert(std::is_nothrow_move_constructible_v<tidal::Communicator>);

TEST(TidalHpp, EmptyCommunicatorThrowsInvalidUsage) {
  tidal::Communicator comm;
  EXPECT_FALSE(comm);
  try {
    comm.barrier();
    FAIL() << "no exception";
  } catch (const tidal::Error& e) {
    EXPECT_EQ(e.code(), tidalInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("barrier"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(comm.destroy());  // destroying nothing is fine
}

TEST(TidalHpp, SpanSizeMismatchThrowsInvalidArgument) {
  tidal::Communicator comm;
  std::vector<float> a(4), b(5);
  try {
    comm.allReduce(a, std::span(b));
    FAIL() << "no exception";
  } catch (const tidal::Error& e) {
    EXPECT_EQ(e.code(), tidalInvalidArgument);
  }
}

TEST(TidalHpp, UniqueIdBytesRoundTrip) {
  tidalUniqueId raw{};
  for (size_t i = 0; i < sizeof raw.internal; ++i) raw.internal[i] = static_cast<char>(i * 7);
  const tidal::UniqueId id(raw);
  const auto copy = tidal::UniqueId::fromBytes(id.bytes());
  EXPECT_EQ(std::memcmp(copy.raw().internal, raw.internal, sizeof raw.internal), 0);
  std::vector<std::byte> shortBytes(3);
  EXPECT_THROW(tidal::UniqueId::fromBytes(shortBytes), tidal::Error);
}

TEST(TidalHpp, VersionMatchesHeader) { EXPECT_EQ(tidal::version(), TIDAL_VERSION_CODE); }

// Renamed NCCL code compares the code with TIDAL_VERSION(2, x, y): it must take
// the paths of the NCCL 2.30 API, whichever encoding the comparison uses.
TEST(TidalHpp, VersionCodeIsNccl230) {
  EXPECT_EQ(TIDAL_VERSION_CODE, 23000);
  EXPECT_EQ(TIDAL_VERSION(2, 30, 0), 23000);
  EXPECT_EQ(TIDAL_VERSION(2, 9, 6), 20906);
  EXPECT_EQ(TIDAL_VERSION(2, 8, 4), 2804);
  EXPECT_EQ(TIDAL_VERSION(1, 3, 0), 1300);
  static_assert(TIDAL_VERSION_CODE >= TIDAL_VERSION(2, 19, 0));
  static_assert(TIDAL_VERSION_CODE >= TIDAL_VERSION(2, 7, 0));
  static_assert(TIDAL_VERSION_CODE < TIDAL_VERSION(2, 31, 0));
  EXPECT_STREQ(TIDAL_RELEASE_STRING, "0.2.0");
}

TEST(TidalHpp, LibraryErrorBecomesTidalError) {
  // nranks 0 is rejected by the library itself, not by the wrapper.
  try {
    tidal::Communicator::create(0, tidal::UniqueId(), 0);
    FAIL() << "no exception";
  } catch (const tidal::Error& e) {
    EXPECT_NE(e.code(), tidalSuccess);
    EXPECT_NE(std::string(e.what()).find("tidalCommInitRank"), std::string::npos) << e.what();
  }
}

// Every collective through the span overloads, 3 ranks in one process.
TEST(TidalHpp, CollectivesOnInitAll) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 1000;
  auto comms = tidal::Communicator::initAll(kRanks);
  ASSERT_EQ(comms.size(), static_cast<size_t>(kRanks));

  std::vector<std::string> failures(kRanks);
  std::vector<std::thread> threads;
  for (int t = 0; t < kRanks; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto& comm = comms[static_cast<size_t>(t)];
        const int r = comm.rank();
        const int n = comm.size();
        auto expect = [&](bool ok, const char* what) {
          if (!ok && failures[static_cast<size_t>(t)].empty())
            failures[static_cast<size_t>(t)] = what;
        };
        expect(r == t && n == kRanks, "rank/size");

        std::vector<int32_t> v(kCount);
        std::iota(v.begin(), v.end(), r);
        comm.allReduce(std::span(v));
        for (size_t i = 0; i < kCount; ++i) {
          expect(v[i] == static_cast<int32_t>(n * (n - 1) / 2 + n * static_cast<int>(i)),
                 "allReduce sum");
        }

        std::vector<double> mine(kCount, 1.0 + r), maxed(kCount);
        comm.allReduce(mine, std::span(maxed), tidalMax);
        for (double x : maxed) expect(x == n, "allReduce max");

        std::vector<uint64_t> block(4, static_cast<uint64_t>(r)), gathered(4 * kRanks);
        comm.allGather(block, std::span(gathered));
        for (size_t i = 0; i < gathered.size(); ++i) expect(gathered[i] == i / 4, "allGather");

        std::vector<float> whole(2 * kRanks, 1.0f), part(2);
        comm.reduceScatter(whole, std::span(part));
        for (float x : part) expect(x == static_cast<float>(n), "reduceScatter");

        std::vector<int64_t> b(16, r == 1 ? 77 : -1);
        comm.broadcast(std::span(b), 1);
        for (auto x : b) expect(x == 77, "broadcast");

        std::vector<uint8_t> ones(8, 1), sum(r == 2 ? 8 : 0);
        comm.reduce(ones, std::span(sum), 2);
        for (auto x : sum) expect(x == n, "reduce");

        comm.barrier();
        expect(comm.asyncError() == tidalSuccess, "asyncError");
      } catch (const tidal::Error& e) {
        failures[static_cast<size_t>(t)] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kRanks; ++t) EXPECT_EQ(failures[static_cast<size_t>(t)], "") << "rank " << t;
}

}  // namespace
