// The cuda_ipc transport's protocol with the GPU played by the test double
// of fake_device.h (two ranks as one process: the ring is mapped by its
// address, as between threads of one process on a real GPU): data and
// reductions through a ring much smaller than the transfers, zero-byte and
// odd-sized transfers, hellos from strangers, a peer that dies, abort.
#include "transports/cuda_ipc/cuda_ipc_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "fake_device.h"
#include "net/wire.h"
#include "scoped_env.h"

namespace tidal::cuda_ipc {
namespace {

using test::FakeDeviceApi;
using test::FakeGpu;
using test::ScopedEnv;

const Secret kSecret{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

// Sums floats on arrival, as the device runner's kernel reducer does.
class SumReducer final : public ArrivalReducer {
 public:
  explicit SumReducer(DeviceApi& device) : device_(device) {}
  void combine(void* dst, const void* local, const void* incoming, size_t bytes) const override {
    EXPECT_EQ(bytes % sizeof(float), 0u) << "a piece cut inside an element";
    device_.reduce(dst, local, incoming, bytes / sizeof(float), tidalFloat32, tidalSum, 0);
  }

 private:
  DeviceApi& device_;
};

class CudaIpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sender_ = std::make_unique<CudaIpcTransport>(TransportContext{0, 2, kSecret}, senderDevice_);
    receiver_ =
        std::make_unique<CudaIpcTransport>(TransportContext{1, 2, kSecret}, receiverDevice_);
    sender_->listen();
    handle_ = receiver_->listen();
  }
  void connect() {
    out_ = sender_->connectSend(1, handle_, deadlineIn(std::chrono::seconds(10)));
    in_ = receiver_->acceptRecv(0, deadlineIn(std::chrono::seconds(10)));
  }
  // Drives both ends until the receiver has completed `target` transfers.
  void pump(uint64_t target, std::chrono::seconds limit = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (in_->completed() < target || out_->completed() < out_->posted()) {
      out_->progress();
      in_->progress();
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "transfers stalled";
    }
  }

  ScopedEnv slots_{"TIDAL_CUDA_IPC_SLOTS", "2"};
  ScopedEnv slotBytes_{"TIDAL_CUDA_IPC_SLOT_BYTES", "65536"};  // a 128 KiB ring
  FakeGpu gpu_;
  FakeDeviceApi senderDevice_{gpu_, 0};
  FakeDeviceApi receiverDevice_{gpu_, 0};
  std::unique_ptr<CudaIpcTransport> sender_, receiver_;
  ConnectHandle handle_;
  std::unique_ptr<Connection> out_, in_;
};

TEST_F(CudaIpcTest, OddSizesAndTransfersLargerThanTheRingArriveIntact) {
  connect();
  const std::vector<size_t> sizes{0, 1, 63, 64, 65, 100000, 0, 300001, 1 << 20, 7};
  std::vector<std::vector<uint8_t>> sent, received;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sent.emplace_back(sizes[i]);
    for (size_t k = 0; k < sizes[i]; ++k) sent.back()[k] = static_cast<uint8_t>(k * 7 + i);
    received.emplace_back(sizes[i], 0xee);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    out_->post(sent[i].data(), sizes[i]);
    in_->post(received[i].data(), sizes[i]);
  }
  pump(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(received[i], sent[i]) << "transfer " << i;
  EXPECT_EQ(in_->completed(), sizes.size());
  EXPECT_EQ(out_->completed(), sizes.size());
}

TEST_F(CudaIpcTest, ReducesOnArrivalInWholeElementsAcrossWraps) {
  connect();
  ASSERT_TRUE(in_->canReduceOnArrival());
  SumReducer reducer(receiverDevice_);
  // 3 transfers of ~300 KB each through a 128 KiB ring, with a 1-byte
  // transfer in between so that later ones start mid-ring.
  const size_t counts[] = {75001, 0, 100003};
  std::vector<std::vector<float>> incoming, local, result;
  uint8_t oddIn = 42, oddOut = 0;
  for (size_t i = 0; i < std::size(counts); ++i) {
    incoming.emplace_back(counts[i]);
    local.emplace_back(counts[i]);
    result.emplace_back(counts[i], -1.0f);
    std::iota(incoming.back().begin(), incoming.back().end(), 1.0f);
    std::fill(local.back().begin(), local.back().end(), 0.5f);
    out_->post(incoming[i].data(), counts[i] * sizeof(float));
    in_->postReduce(result[i].data(), local[i].data(), counts[i] * sizeof(float), reducer);
    out_->post(&oddIn, 1);
    in_->post(&oddOut, 1);
  }
  pump(2 * std::size(counts));
  for (size_t i = 0; i < std::size(counts); ++i) {
    for (size_t k = 0; k < counts[i]; ++k) {
      ASSERT_EQ(result[i][k], static_cast<float>(k + 1) + 0.5f) << "transfer " << i << " at " << k;
    }
  }
  EXPECT_EQ(oddOut, 42);
}

TEST_F(CudaIpcTest, StrangersAreRefusedAndTheRealPeerStillAccepted) {
  uint16_t port = 0;
  std::memcpy(&port, handle_.data(), sizeof port);
  // A stranger with the wrong secret, and one that sends garbage.
  Socket wrongSecret = Socket::connectTo(SocketAddress::loopback(AF_INET, port),
                                         deadlineIn(std::chrono::seconds(5)), "stranger");
  std::vector<uint8_t> payload(sizeof(Secret) + sizeof(CudaIpcTransport::HelloBody), 0);
  wire::sendMessage(wrongSecret, wire::MsgType::CudaIpcHello, payload.data(), payload.size(),
                    deadlineIn(std::chrono::seconds(5)), "stranger hello");
  Socket garbage = Socket::connectTo(SocketAddress::loopback(AF_INET, port),
                                     deadlineIn(std::chrono::seconds(5)), "garbage");
  const char junk[] = "GET / HTTP/1.0\r\n\r\n";
  garbage.sendAll(junk, sizeof junk, deadlineIn(std::chrono::seconds(5)), "junk");
  connect();
  float x = 3.0f, y = 0.0f;
  out_->post(&x, sizeof x);
  in_->post(&y, sizeof y);
  pump(1);
  EXPECT_EQ(y, 3.0f);
}

TEST_F(CudaIpcTest, HelloFromTheRightJobButWrongRankIsRefused) {
  // Rank 0's hello addressed to rank 0 (inconsistent), then the real one.
  auto confused =
      std::make_unique<CudaIpcTransport>(TransportContext{0, 2, kSecret}, senderDevice_);
  uint16_t port = 0;
  std::memcpy(&port, handle_.data(), sizeof port);
  // connectSend to "peer 0" at rank 1's port: the receiver is rank 1, so
  // this hello's toRank (0) is wrong.
  auto wrong = confused->connectSend(0, handle_, deadlineIn(std::chrono::seconds(5)));
  connect();
  uint8_t a = 9, b = 0;
  out_->post(&a, 1);
  in_->post(&b, 1);
  pump(1);
  EXPECT_EQ(b, 9);
}

TEST_F(CudaIpcTest, PeerThatDiesMidTransferIsNamed) {
  connect();
  std::vector<uint8_t> half(50000, 1), all(100000, 0);
  in_->post(all.data(), all.size());  // expects more than the sender will send
  out_->post(half.data(), half.size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (out_->completed() < 1) {
    out_->progress();
    in_->progress();
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
  }
  // Let the receiver take everything that was published: in this one-process
  // test the ring goes with the sender (a real process's ring stays mapped).
  for (int i = 0; i < 100; ++i) {
    in_->progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  out_.reset();  // the sending process is gone
  try {
    while (std::chrono::steady_clock::now() < deadline) {
      in_->progress();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    FAIL() << "a dead peer must be reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalRemoteError);
    const std::string text = e.what();
    EXPECT_NE(text.find("rank 1"), std::string::npos) << text;
    EXPECT_NE(text.find("from rank 0"), std::string::npos) << text;
    EXPECT_NE(text.find("lost"), std::string::npos) << text;
  }
  // What was published before the death did arrive.
  EXPECT_EQ(std::vector<uint8_t>(all.begin(), all.begin() + 50000), half);
}

TEST_F(CudaIpcTest, AbortStopsAWaitingReceiver) {
  connect();
  uint8_t b = 0;
  in_->post(&b, 1);
  in_->progress();
  std::thread([this] { in_->abort(); }).join();
  EXPECT_THROW(in_->progress(), Error);
  // The sender notices too, once it needs its peer.
  uint8_t a = 1;
  out_->post(&a, 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool failed = false;
  while (!failed && std::chrono::steady_clock::now() < deadline) {
    try {
      out_->progress();
      if (out_->completed() == 1) break;  // published before it noticed: fine
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), tidalRemoteError);
      failed = true;
    }
  }
}

TEST_F(CudaIpcTest, AcceptTimesOutNamingThePeer) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "1");
  try {
    receiver_->acceptRecv(0, deadlineIn(std::chrono::milliseconds(300)));
    FAIL() << "accept must time out";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalTimeout);
    EXPECT_NE(std::string(e.what()).find("rank 0 to connect"), std::string::npos) << e.what();
  }
}

TEST(CudaIpcConfig, BadGeometryIsRefusedNamingTheVariable) {
  FakeGpu gpu;
  FakeDeviceApi device(gpu);
  {
    ScopedEnv bad("TIDAL_CUDA_IPC_SLOT_BYTES", "1000");
    try {
      CudaIpcTransport t(TransportContext{3, 4, kSecret}, device);
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), tidalInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("TIDAL_CUDA_IPC_SLOT_BYTES=1000"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("rank 3"), std::string::npos);
    }
  }
  ScopedEnv bad("TIDAL_CUDA_IPC_SLOTS", "0");
  EXPECT_THROW(CudaIpcTransport(TransportContext{0, 1, kSecret}, device), Error);
}

}  // namespace
}  // namespace tidal::cuda_ipc
