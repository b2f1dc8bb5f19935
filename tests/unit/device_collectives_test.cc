// The communicator's whole device path on the CPU: ranks as threads, each a
// real Communicator (bootstrap, host transports, DevicePath, StreamEngine,
// DeviceRunner, cuda_ipc or pinned staging), with the GPU - and only the
// GPU - played by the test double of fake_device.h, one "GPU" shared by all
// ranks as when several ranks share one device.
//
// Each case mirrors the GPU test (tests/gpu): a "kernel" writes the input on
// the caller's stream before the collective, another reads the output after
// it, and the host checks what that second kernel saw against values
// computed independently (tests/integration/expected_values.h).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "comm/communicator.h"
#include "core/dtype.h"
#include "fake_device.h"
#include "scoped_env.h"
#include "tests/integration/collective_cases.h"

namespace tidal {
namespace {

using test::FakeDeviceApi;
using test::FakeGpu;
using test::ScopedEnv;

using test::Case;
using test::Coll;

// Every copy and reduction of the fake GPU takes this long (other streams run
// meanwhile), so that a missing wait shows up as wrong data.
constexpr std::chrono::microseconds kKernelTime{30};

UniqueId freshJob() {
  UniqueId id;
  id.secret = randomSecret();
  id.root = startRoot(SocketAddress::loopback(AF_INET, 0), id.secret);
  return id;
}

// One rank's case; returns what went wrong, or "" when the result is exact.
std::string runCase(Communicator& comm, FakeGpu& gpu, FakeGpu::Stream* stream, const Case& c) {
  const int rank = comm.rank(), n = comm.nranks();
  const size_t ts = typeSize(c.type);
  const test::CaseLayout l = test::layoutOf(c, rank, n);
  // "Device" buffers: the fake GPU's memory is host memory.
  std::vector<char> big(l.inPlaceElements * ts + 64, 0x5a);
  std::vector<char> sendv(l.sendCount * ts + 1, 0x5a), recvv(l.recvCount * ts + 1, 0x5a);
  char* sendbuff = c.inPlace ? big.data() + l.inPlaceSendOffset * ts : sendv.data();
  char* recvbuff = c.inPlace ? big.data() + l.inPlaceRecvOffset * ts : recvv.data();
  // A kernel on the caller's stream writes the input just before the call;
  // it starts late, so a collective that did not wait for it reads sentinels.
  gpu.launch(
      stream, [=] { test::fillInput(c, rank, n, sendbuff); }, std::chrono::milliseconds(2));
  const CallMemory memory{MemoryKind::Cuda, stream};
  switch (c.coll) {
    case Coll::AllReduce:
      comm.allReduce(sendbuff, recvbuff, c.count, c.type, c.op, memory);
      break;
    case Coll::AllGather:
      comm.allGather(sendbuff, recvbuff, c.count, c.type, memory);
      break;
    case Coll::ReduceScatter:
      comm.reduceScatter(sendbuff, recvbuff, c.count, c.type, c.op, memory);
      break;
    case Coll::Broadcast:
      comm.broadcast(sendbuff, recvbuff, c.count, c.type, c.root, memory);
      break;
    case Coll::Reduce:
      comm.reduce(sendbuff, recvbuff, c.count, c.type, c.op, c.root, memory);
      break;
  }
  // Another kernel reads the output right after it.
  std::vector<char> seen(l.recvCount * ts);
  gpu.launch(stream, [&seen, recvbuff] { std::memcpy(seen.data(), recvbuff, seen.size()); });
  if (!gpu.synchronize(stream)) return "the caller's stream never finished";
  size_t first = 0;
  if (const size_t wrong = test::countWrongOutput(c, rank, n, seen.data(), &first)) {
    return fmt::format("{} wrong elements, first at {}", wrong, first);
  }
  return "";
}

std::vector<Case> cases(int n) {
  std::vector<Case> v;
  for (bool inPlace : {false, true}) {
    // Recursive doubling (small), the pipelined ring (several chunks), every op.
    for (tidalRedOp_t op : {tidalSum, tidalProd, tidalMax, tidalMin, tidalAvg}) {
      v.push_back({Coll::AllReduce, tidalFloat32, op, 1023, inPlace, 0});
    }
    v.push_back({Coll::AllReduce, tidalFloat32, tidalSum, 300001, inPlace, 0});
    v.push_back({Coll::AllReduce, tidalBfloat16, tidalAvg, 200003, inPlace, 0});
    v.push_back({Coll::AllReduce, tidalInt8, tidalProd, 77, inPlace, 0});
    v.push_back({Coll::AllReduce, tidalFloat8e4m3, tidalAvg, 70001, inPlace, 0});
    v.push_back({Coll::ReduceScatter, tidalFloat8e5m2, tidalSum, 1023, inPlace, 0});
    v.push_back({Coll::AllReduce, tidalFloat16, tidalSum, 0, inPlace, 0});
    v.push_back({Coll::AllGather, tidalUint8, tidalSum, 1001, inPlace, 0});
    v.push_back({Coll::AllGather, tidalFloat64, tidalSum, 70001, inPlace, 0});
    v.push_back({Coll::ReduceScatter, tidalInt32, tidalMax, 513, inPlace, 0});
    v.push_back({Coll::ReduceScatter, tidalFloat16, tidalSum, 90001, inPlace, 0});
    v.push_back({Coll::Broadcast, tidalInt64, tidalSum, 40000, inPlace, n - 1});
    v.push_back({Coll::Reduce, tidalUint32, tidalAvg, 150001, inPlace, n / 2});
  }
  return v;
}

struct Mode {
  const char* name;
  const char* net;           // TIDAL_NET
  const char* ipcDisable;    // TIDAL_CUDA_IPC_DISABLE
  const char* slots;         // TIDAL_STAGING_SLOTS
  const char* chunk;         // TIDAL_CHUNK_SIZE
  const char* ipcSlotBytes;  // TIDAL_CUDA_IPC_SLOT_BYTES (with one ring slot)
};
// The last two reuse every staging slot and ring slot at once, with many
// small pieces: a transfer that completed before its GPU work was done would
// get its slot overwritten under it.
const Mode kModes[] = {{"cuda_ipc", nullptr, nullptr, nullptr, nullptr, nullptr},
                       {"staged_shm", nullptr, "1", nullptr, nullptr, nullptr},
                       {"staged_tcp", "tcp", nullptr, nullptr, nullptr, nullptr},
                       {"staged_tcp_one_slot", "tcp", nullptr, "1", "65536", nullptr},
                       {"cuda_ipc_small_ring", nullptr, nullptr, "1", "65536", "65536"}};

// Runs `body(comm, stream)` on n rank threads sharing one fake GPU; returns
// every rank's failure text ("" when it passed).
template <typename Body>
std::vector<std::string> runJob(int n, FakeGpu& gpu, std::shared_ptr<std::atomic<int>> live,
                                Body&& body) {
  const UniqueId id = freshJob();
  std::vector<std::string> failures(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = Communicator::create(
            id, r, n, [&gpu, live] { return std::make_unique<FakeDeviceApi>(gpu, 0, live); });
        body(*comm, gpu.newStream(), failures[static_cast<size_t>(r)]);
      } catch (const std::exception& e) {
        failures[static_cast<size_t>(r)] += e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return failures;
}

class DeviceCollectives : public ::testing::TestWithParam<std::tuple<Mode, int>> {};

TEST_P(DeviceCollectives, EveryCollectiveIsOrderedOnTheStreamAndExact) {
  const auto [mode, n] = GetParam();
  ScopedEnv timeout("TIDAL_TIMEOUT", "60");
  ScopedEnv net("TIDAL_NET", mode.net);
  ScopedEnv ipc("TIDAL_CUDA_IPC_DISABLE", mode.ipcDisable);
  ScopedEnv slots("TIDAL_STAGING_SLOTS", mode.slots);
  ScopedEnv chunk("TIDAL_CHUNK_SIZE", mode.chunk);
  ScopedEnv ipcSlots("TIDAL_CUDA_IPC_SLOTS", mode.ipcSlotBytes ? "1" : nullptr);
  ScopedEnv ipcSlotBytes("TIDAL_CUDA_IPC_SLOT_BYTES", mode.ipcSlotBytes);
  FakeGpu gpu{kKernelTime};
  auto live = std::make_shared<std::atomic<int>>(0);
  const auto failures =
      runJob(n, gpu, live, [&](Communicator& comm, FakeGpu::Stream* stream, std::string& failure) {
        for (const Case& c : cases(n)) {
          if (const std::string wrong = runCase(comm, gpu, stream, c); !wrong.empty()) {
            failure += fmt::format("rank {}: {}: {}\n", comm.rank(), test::describe(c, n), wrong);
          }
        }
        // A stream-ordered barrier, then a host-buffer call: it must come after
        // the stream-ordered ones and still be exact.
        comm.barrier({MemoryKind::Cuda, stream});
        std::vector<float> host(100, 1.0f);
        comm.allReduce(host.data(), host.data(), host.size(), tidalFloat32, tidalSum);
        if (host[99] != static_cast<float>(n))
          failure += "host AllReduce after stream ones wrong\n";
      });
  for (const auto& f : failures) EXPECT_EQ(f, "");
  EXPECT_EQ(live->load(), 0) << "device memory left allocated after the communicators went";
}

INSTANTIATE_TEST_SUITE_P(
    ModesAndRanks, DeviceCollectives,
    ::testing::Combine(::testing::ValuesIn(kModes), ::testing::Values(2, 3, 4)), [](const auto& p) {
      return fmt::format("{}_np{}", std::get<0>(p.param).name, std::get<1>(p.param));
    });

// A rank that aborts while its peer runs a stream-ordered collective: the
// peer's stream is released, and the error surfaces as the communicator's
// async error and on its next call.
TEST(DeviceCollectivesFailure, PeerAbortSurfacesAsAsyncErrorAndOnTheNextCall) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "30");
  FakeGpu gpu{kKernelTime};
  auto live = std::make_shared<std::atomic<int>>(0);
  std::atomic<bool> rank0Submitted{false};
  const auto failures =
      runJob(2, gpu, live, [&](Communicator& comm, FakeGpu::Stream* stream, std::string& failure) {
        std::vector<float> data(1 << 16, 1.0f);
        if (comm.rank() == 1) {
          while (!rank0Submitted) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          comm.abort();
          return;
        }
        comm.allReduce(data.data(), data.data(), data.size(), tidalFloat32, tidalSum,
                       {MemoryKind::Cuda, stream});
        rank0Submitted = true;
        if (!gpu.synchronize(stream, std::chrono::seconds(20)))
          failure += "stream never released\n";
        for (int i = 0; i < 200 && comm.asyncError() == tidalSuccess; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (comm.asyncError() != tidalRemoteError) {
          failure += fmt::format("asyncError is {}, not RemoteError\n", int(comm.asyncError()));
        }
        try {
          comm.allReduce(data.data(), data.data(), data.size(), tidalFloat32, tidalSum,
                         {MemoryKind::Cuda, stream});
          failure += "the next call succeeded on a broken communicator\n";
        } catch (const Error& e) {
          if (e.code() != tidalRemoteError) failure += std::string("next call: ") + e.what() + "\n";
        }
      });
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(live->load(), 0);
}

// Device buffers on a communicator whose ranks cannot all use a GPU are
// refused, naming the rank.
TEST(DeviceCollectivesFailure, RankWithoutDeviceMakesDeviceBuffersInvalidUsage) {
  ScopedEnv timeout("TIDAL_TIMEOUT", "30");
  FakeGpu gpu{kKernelTime};
  const UniqueId id = freshJob();
  std::vector<std::string> seen(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto comm = Communicator::create(id, r, 2, [&gpu, r]() -> std::unique_ptr<DeviceApi> {
        if (r == 1) return nullptr;  // rank 1 has no GPU
        return std::make_unique<FakeDeviceApi>(gpu);
      });
      float x = 1;
      try {
        comm->allReduce(&x, &x, 1, tidalFloat32, tidalSum, {MemoryKind::Cuda, gpu.newStream()});
      } catch (const Error& e) {
        seen[static_cast<size_t>(r)] = fmt::format("{}: {}", int(e.code()), e.what());
      }
      comm->allReduce(&x, &x, 1, tidalFloat32, tidalSum);  // host buffers still work
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_NE(seen[0].find("rank 1 cannot use CUDA"), std::string::npos) << seen[0];
  EXPECT_EQ(seen[0].rfind(std::to_string(int(tidalInvalidUsage)), 0), 0u) << seen[0];
  EXPECT_NE(seen[1].find("this rank cannot use CUDA"), std::string::npos) << seen[1];
}

}  // namespace
}  // namespace tidal
