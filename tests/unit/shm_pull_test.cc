// Single-copy pulls on the shm transport: a transfer of at least
// TIDAL_SHM_PULL_BYTES is read by the receiver straight out of the sender's
// memory (process_vm_readv) instead of being copied into the ring and out of
// it. What must hold: the bytes are exact (across processes: shm_transport_test),
// the sender's buffer counts as sent only once the receiver has
// read it, later transfers do not wait for that, a sender that gives up never
// has its buffer delivered as data, and a receiver that may not pull falls
// back to the ring without either side being told by hand.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "scoped_env.h"
#include "shm_test_support.h"
#include "transport_checks.h"
#include "transports/shm/shm_connection.h"
#include "transports/transport.h"

namespace tidal {
namespace {

using test::drain;
using test::driveUntilDone;
using test::pattern;
using test::ScopedEnv;
using test::secretOf;
using test::ShmPair;
using namespace std::chrono_literals;

const shm::ShmConnection& shmOf(const std::unique_ptr<Connection>& c) {
  const auto* s = dynamic_cast<const shm::ShmConnection*>(c.get());
  if (!s) throw std::runtime_error("not an shm connection");
  return *s;
}

#define SKIP_WITHOUT_PULLS()                                         \
  if (const std::string why = test::pullRefusedHere(); !why.empty()) \
  GTEST_SKIP() << "process_vm_readv is refused on this machine (" << why << ")"

TEST(ShmPull, LargeTransfersArePulledAndSmallOnesCrossTheRing) {
  SKIP_WITHOUT_PULLS();
  ScopedEnv pull("TIDAL_SHM_PULL_BYTES", "4096");
  ScopedEnv s1("TIDAL_SHM_SLOTS", "2");  // a small ring: headers and bytes wrap it
  ScopedEnv s2("TIDAL_SHM_SLOT_BYTES", "4096");
  ShmPair p;
  const size_t sizes[] = {0, 1, 4095, 4096, 0, 3 << 20, 17, 8192, 0, 70000, 4000, 5000};
  std::vector<std::vector<uint8_t>> out, in;
  uint64_t large = 0;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    out.push_back(pattern(sizes[i], static_cast<uint8_t>(i * 13 + 5)));
    in.emplace_back(sizes[i], 0);
    large += sizes[i] >= 4096;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    p.send->post(out[i].data(), out[i].size());
    p.recv->post(in[i].data(), in[i].size());
  }
  drain(*p.send, *p.recv);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], in[i]) << "transfer " << i;
  EXPECT_EQ(shmOf(p.recv).pulls(), large);
  EXPECT_EQ(shmOf(p.send).pulls(), large);
  EXPECT_NE(p.recv->describe().find("pulls transfers of 4096 bytes and more"), std::string::npos)
      << p.recv->describe();
}

// The sender's buffer must stay untouched until the receiver has read it: the
// transfer completes for the sender only then.
TEST(ShmPull, TheSenderCompletesOnlyOnceTheReceiverHasRead) {
  SKIP_WITHOUT_PULLS();
  ScopedEnv pull("TIDAL_SHM_PULL_BYTES", "4096");
  ShmPair p;
  std::vector<uint8_t> out = pattern(64 << 10, 1), in(out.size());
  p.send->post(out.data(), out.size());
  for (int i = 0; i < 100; ++i) p.send->progress();
  EXPECT_EQ(p.send->completed(), 0u) << "a pulled transfer completed before anyone read it";
  p.recv->post(in.data(), in.size());
  driveUntilDone(*p.recv, deadlineIn(5000ms));
  driveUntilDone(*p.send, deadlineIn(5000ms));
  EXPECT_EQ(p.send->completed(), 1u);
  EXPECT_EQ(in, out);
}

// A sender publishes its next transfers while earlier ones wait to be
// pulled, so a receiver never waits for the sender to be scheduled again.
TEST(ShmPull, LaterTransfersAreNotHeldBackByAnUnreadPull) {
  SKIP_WITHOUT_PULLS();
  ScopedEnv pull("TIDAL_SHM_PULL_BYTES", "4096");
  ShmPair p;
  const size_t sizes[] = {64 << 10, 100, 200 << 10, 0, 8192, 3};
  std::vector<std::vector<uint8_t>> out, in;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    out.push_back(pattern(sizes[i], static_cast<uint8_t>(i + 40)));
    in.emplace_back(sizes[i], 0);
    p.send->post(out[i].data(), out[i].size());
  }
  p.send->progress();  // once: every header and small transfer goes out now
  EXPECT_EQ(p.send->completed(), 0u);
  for (size_t i = 0; i < in.size(); ++i) p.recv->post(in[i].data(), in[i].size());
  driveUntilDone(*p.recv, deadlineIn(5000ms));  // the sender does not move meanwhile
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], in[i]) << "transfer " << i;
  p.send->progress();
  EXPECT_EQ(p.send->completed(), std::size(sizes));
}

// A sender that aborts (its call failed; the user may reuse the buffer) must
// not have its buffer delivered as the transfer's data.
TEST(ShmPull, ASenderThatGivesUpFailsThePull) {
  SKIP_WITHOUT_PULLS();
  ScopedEnv pull("TIDAL_SHM_PULL_BYTES", "4096");
  ShmPair p;
  std::vector<uint8_t> out = pattern(64 << 10, 2), in(out.size());
  p.send->post(out.data(), out.size());
  p.send->progress();  // the header is out
  p.send->abort();
  p.recv->post(in.data(), in.size());
  try {
    driveUntilDone(*p.recv, deadlineIn(5000ms));
    ADD_FAILURE() << "the pull of an abandoned buffer completed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalRemoteError);
    EXPECT_NE(std::string(e.what()).find("the sender gave up"), std::string::npos) << e.what();
  }
  EXPECT_EQ(p.recv->completed(), 0u);
}

TEST(ShmPull, ASizeMismatchIsNamedNotTruncated) {
  ScopedEnv pull("TIDAL_SHM_PULL_BYTES", "4096");
  ShmPair p;
  std::vector<uint8_t> out(8192), in(10000);
  p.send->post(out.data(), out.size());
  p.recv->post(in.data(), in.size());
  try {
    drain(*p.send, *p.recv);
    ADD_FAILURE() << "an 8192-byte transfer completed a 10000-byte receive";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("8192 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("10000 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("from rank 0"), std::string::npos) << what;
  }
}

// The receiver's TIDAL_SHM_PULL_BYTES=0 wins over the sender's setting: the
// headers say "inline" and the bytes cross the ring.
TEST(ShmPull, AReceiverThatMayNotPullGetsTheBytesThroughTheRing) {
  std::unique_ptr<Transport> t0, t1;
  {
    ScopedEnv pull("TIDAL_SHM_PULL_BYTES", "4096");
    t0 = createTransport("shm", {0, 2, secretOf(3)});
  }
  {
    ScopedEnv pull("TIDAL_SHM_PULL_BYTES", "0");
    ScopedEnv payloadPull("TIDAL_SHM_P2P_PULL_BYTES", "0");
    t1 = createTransport("shm", {1, 2, secretOf(3)});
  }
  const ConnectHandle h1 = t1->listen();
  t0->listen();
  auto send = t0->connectSend(1, h1, deadlineIn(10000ms));
  auto recv = t1->acceptRecv(0, deadlineIn(10000ms));
  std::vector<uint8_t> out = pattern(1 << 20, 7), in(out.size());
  send->post(out.data(), out.size());
  recv->post(in.data(), in.size());
  drain(*send, *recv);
  EXPECT_EQ(in, out);
  EXPECT_EQ(shmOf(recv).pulls(), 0u);
  EXPECT_EQ(shmOf(send).pulls(), 0u);
  EXPECT_NE(recv->describe().find("TIDAL_SHM_PULL_BYTES=0 and TIDAL_SHM_P2P_PULL_BYTES=0 here"),
            std::string::npos)
      << recv->describe();
}

// With the defaults (TIDAL_SHM_PULL_BYTES=0, TIDAL_SHM_P2P_PULL_BYTES=16384)
// a Send/Recv payload piece of 16 KiB or more is pulled when its sender says
// so, goes inline behind a header when it does not, and any other transfer
// (a collective's) crosses the ring unframed, all on one connection in one
// stream: each arrives intact, and only the chosen ones are pulled.
TEST(ShmPull, PayloadPiecesArePulledAtTheSendersChoiceAndOtherTransfersAreNot) {
  ScopedEnv pull("TIDAL_SHM_PULL_BYTES", "0");
  ScopedEnv payloadPull("TIDAL_SHM_P2P_PULL_BYTES", "16384");
  auto t0 = createTransport("shm", {0, 2, secretOf(3)});
  auto t1 = createTransport("shm", {1, 2, secretOf(3)});
  const ConnectHandle h1 = t1->listen();
  t0->listen();
  auto send = t0->connectSend(1, h1, deadlineIn(10000ms));
  auto recv = t1->acceptRecv(0, deadlineIn(10000ms));
  EXPECT_NE(recv->describe().find("pulls Send/Recv pieces of 16384 bytes and more"),
            std::string::npos)
      << recv->describe();
  struct Case {
    size_t bytes;
    bool payload;
    bool singleCopy;
    uint64_t pullsAfter;
  };
  const Case cases[] = {{256 << 10, true, true, 1},    // pulled
                        {256 << 10, true, false, 1},   // framed, inline
                        {256 << 10, false, false, 1},  // a collective's: unframed
                        {16384, true, true, 2},        // the threshold itself: pulled
                        {16383, true, true, 2},        // below it: unframed, inline
                        {100, false, false, 2},       {1 << 20, true, true, 3}};
  int seed = 1;
  for (const Case& c : cases) {
    std::vector<uint8_t> out = pattern(c.bytes, seed++), in(c.bytes);
    if (c.payload) {
      send->postPayload(out.data(), out.size(), c.singleCopy);
      recv->postPayload(in.data(), in.size(), false);
    } else {
      send->post(out.data(), out.size());
      recv->post(in.data(), in.size());
    }
    drain(*send, *recv);
    EXPECT_EQ(in, out) << c.bytes << " bytes, payload " << c.payload;
    EXPECT_EQ(shmOf(send).pulls(), c.pullsAfter) << c.bytes << " bytes";
    EXPECT_EQ(shmOf(recv).pulls(), c.pullsAfter) << c.bytes << " bytes";
  }
}

TEST(ShmPull, ANegativeThresholdIsRefusedByName) {
  ScopedEnv pull("TIDAL_SHM_PULL_BYTES", "-1");
  try {
    createTransport("shm", {0, 2, secretOf(1)});
    ADD_FAILURE() << "accepted TIDAL_SHM_PULL_BYTES=-1";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("TIDAL_SHM_PULL_BYTES=-1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tidal
