// closeWhenAllDone (comm/close_when_all_done.h): what a destroyed
// communicator's transports hold stays open until every rank has destroyed
// the communicator, and not longer, with ranks as threads on loopback.
#include "comm/close_when_all_done.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "core/secret.h"
#include "core/socket.h"
#include "scoped_env.h"

namespace tidal {
namespace {

using namespace std::chrono_literals;
using test::ScopedEnv;

// Two ranks with their bootstrap ring made.
struct TwoRanks {
  std::unique_ptr<Bootstrap> rank[2];
  TwoRanks() {
    UniqueId id;
    id.secret = randomSecret();
    id.root = startRoot(SocketAddress::loopback(AF_INET, 0), id.secret);
    std::thread t([&] { rank[1] = Bootstrap::create(id, 1, 2); });
    rank[0] = Bootstrap::create(id, 0, 2);
    t.join();
  }
};

// Something a transport would keep open (an endpoint) that says when it is
// progressed and when it closes.
class Watched final : public KeptOpen {
 public:
  Watched(std::atomic<bool>& closed, std::atomic<int>& progressed)
      : closed_(closed), progressed_(progressed) {}
  ~Watched() override { closed_ = true; }
  void progress() override { ++progressed_; }

 private:
  std::atomic<bool>& closed_;
  std::atomic<int>& progressed_;
};

bool becomesTrue(const std::atomic<bool>& flag, std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (!flag && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  return flag;
}

TEST(CloseWhenAllDone, HoldsUntilEveryRankHasClosed) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "60");
  TwoRanks job;
  std::atomic<bool> closed0{false}, closed1{false};
  std::atomic<int> progressed0{0}, progressed1{0};
  closeWhenAllDone(std::move(job.rank[0]), {std::make_shared<Watched>(closed0, progressed0)});
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(closed0) << "rank 0's endpoint closed while rank 1 had not destroyed";
  EXPECT_GT(progressed0.load(), 10) << "what is kept open is not progressed while it waits";
  EXPECT_EQ(closesWaiting(), 1u);
  closeWhenAllDone(std::move(job.rank[1]), {std::make_shared<Watched>(closed1, progressed1)});
  EXPECT_TRUE(becomesTrue(closed0, 10s));
  EXPECT_TRUE(becomesTrue(closed1, 10s));
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (closesWaiting() != 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(closesWaiting(), 0u);
}

// A rank that exits (or aborts) without destroying: its ring sockets close,
// and the wait ends at once, not at TIDAL_TIMEOUT.
TEST(CloseWhenAllDone, APeerThatIsGoneEndsTheWait) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "60");
  TwoRanks job;
  std::atomic<bool> closed{false};
  std::atomic<int> progressed{0};
  const auto start = std::chrono::steady_clock::now();
  closeWhenAllDone(std::move(job.rank[0]), {std::make_shared<Watched>(closed, progressed)});
  job.rank[1].reset();
  EXPECT_TRUE(becomesTrue(closed, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

}  // namespace
}  // namespace tidal
