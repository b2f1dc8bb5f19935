// The correctness suite on CUDA device buffers, stream-ordered: every
// collective x type x op, in place and out of place, checked bit for bit.
//
// Each case: a kernel on the caller's stream spins for a while and only then
// writes the input; the collective is enqueued on the same stream; another
// kernel copies the output away after it. Only then does the host wait for
// the stream and check the copy. A collective that read its input before the
// first kernel finished, or that let the second kernel run before it
// finished, leaves the sentinel (or stale data) in what is checked.
//
// Also: AllToAll and a Send/Recv group on device buffers; the call returns while the GPU is still
// busy with earlier work on the stream (it never waits for the GPU), and a call mixing host and
// device buffers is refused naming both.
//
// Run as N processes under tidalrun (all on device 0 unless --spread, so the
// ranks share one GPU through cuda_ipc), or as N threads of one process
// (--threads N, tidalCommInitAll with every rank on device 0). Exit status 0
// only if every check passed; 77 (skipped) without a CUDA device.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu_check.h"
#include "gpu_kernels.h"
#include "tests/integration/collective_cases.h"
#include "tidal/tidal.h"

namespace {

using namespace tidal::test;
using tidal::gputest::DeviceMemory;

constexpr long long kWriterSpinNs = 300 * 1000;  // the input kernel's head start

struct Options {
  int threads = 0;
  bool big = false;
  bool spread = false;  // rank r on device r % count instead of all on device 0
};

bool runCase(tidalComm_t comm, cudaStream_t stream, int rank, int n, const Case& c) {
  const size_t ts = sizeOf(c.type);
  const CaseLayout l = layoutOf(c, rank, n);
  std::vector<char> input(l.sendCount * ts);
  fillInput(c, rank, n, input.data());
  DeviceMemory staged(input.size()), big(l.inPlaceElements * ts + 64),
      sendMem(l.sendCount * ts + 1), recvMem(l.recvCount * ts + 1), check(l.recvCount * ts + 1);
  GPU_CHECK(cudaMemcpy(staged.data(), input.data(), input.size(), cudaMemcpyHostToDevice));
  for (DeviceMemory* m : {&big, &sendMem, &recvMem}) {
    GPU_CHECK(cudaMemset(m->data(), 0x5a, m->size()));
  }
  GPU_CHECK(cudaDeviceSynchronize());
  char* sendbuff = c.inPlace ? big.data() + l.inPlaceSendOffset * ts : sendMem.data();
  char* recvbuff = c.inPlace ? big.data() + l.inPlaceRecvOffset * ts : recvMem.data();

  // Kernel, collective, kernel, all on the stream; the host waits only after.
  tidal::gputest::launchDelayedCopy(sendbuff, staged.data(), input.size(), kWriterSpinNs, stream);
  tidalResult_t r = tidalSuccess;
  switch (c.coll) {
    case Coll::AllReduce:
      r = tidalAllReduce(sendbuff, recvbuff, c.count, c.type, c.op, comm, stream);
      break;
    case Coll::AllGather:
      r = tidalAllGather(sendbuff, recvbuff, c.count, c.type, comm, stream);
      break;
    case Coll::ReduceScatter:
      r = tidalReduceScatter(sendbuff, recvbuff, c.count, c.type, c.op, comm, stream);
      break;
    case Coll::Broadcast:
      r = tidalBroadcast(sendbuff, recvbuff, c.count, c.type, c.root, comm, stream);
      break;
    case Coll::Reduce:
      r = tidalReduce(sendbuff, recvbuff, c.count, c.type, c.op, c.root, comm, stream);
      break;
  }
  const std::string what = describe(c, n);
  if (r != tidalSuccess) {
    std::fprintf(stderr, "rank %d: FAIL %s: %s: %s\n", rank, what.c_str(), tidalGetErrorString(r),
                 tidalGetLastError(comm));
    return false;
  }
  tidal::gputest::launchDelayedCopy(check.data(), recvbuff, l.recvCount * ts, 0, stream);
  GPU_CHECK(cudaStreamSynchronize(stream));
  tidalResult_t async = tidalSuccess;
  tidalCommGetAsyncError(comm, &async);
  if (async != tidalSuccess) {
    std::fprintf(stderr, "rank %d: FAIL %s: async error %s: %s\n", rank, what.c_str(),
                 tidalGetErrorString(async), tidalGetLastError(comm));
    return false;
  }
  std::vector<char> got(l.recvCount * ts);
  GPU_CHECK(cudaMemcpy(got.data(), check.data(), got.size(), cudaMemcpyDeviceToHost));
  size_t first = 0;
  if (const size_t wrong = countWrongOutput(c, rank, n, got.data(), &first)) {
    std::fprintf(stderr, "rank %d: FAIL %s: %zu wrong elements, first at %zu\n", rank, what.c_str(),
                 wrong, first);
    return false;
  }
  return true;
}

// The call must return while the stream is still busy with earlier work.
bool callDoesNotWaitForTheGpu(tidalComm_t comm, cudaStream_t stream, int rank) {
  DeviceMemory buf(4096);
  GPU_CHECK(cudaMemset(buf.data(), 0, buf.size()));
  GPU_CHECK(cudaDeviceSynchronize());
  constexpr long long kBusyNs = 200LL * 1000 * 1000;  // 200 ms of earlier work
  tidal::gputest::launchSleep(kBusyNs, stream);
  const auto start = std::chrono::steady_clock::now();
  const tidalResult_t r =
      tidalAllReduce(buf.data(), buf.data(), 1024, tidalFloat32, tidalSum, comm, stream);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  GPU_CHECK(cudaStreamSynchronize(stream));
  if (r != tidalSuccess || ms > 50.0) {
    std::fprintf(stderr, "rank %d: FAIL the call took %.1f ms behind 200 ms of GPU work (%s)\n",
                 rank, ms, tidalGetErrorString(r));
    return false;
  }
  return true;
}

bool mixedBuffersAreRefused(tidalComm_t comm, int rank) {
  DeviceMemory device(64);
  std::vector<float> host(16);
  const tidalResult_t r =
      tidalAllReduce(host.data(), device.data(), 16, tidalFloat32, tidalSum, comm, nullptr);
  const std::string text = tidalGetLastError(comm);
  const bool ok = r == tidalInvalidArgument && text.find("sendbuff") != std::string::npos &&
                  text.find("host memory") != std::string::npos &&
                  text.find("recvbuff") != std::string::npos &&
                  text.find("device memory") != std::string::npos;
  if (!ok) std::fprintf(stderr, "rank %d: FAIL mixed buffers: %d %s\n", rank, r, text.c_str());
  return ok;
}

// AllToAll and a Send/Recv group (ring shift both ways plus a self send) on
// device buffers, stream-ordered, checked exactly.
int32_t exchanged(int from, int to, size_t i) {
  return from * 100000 + to * 1000 + static_cast<int32_t>(i % 997);
}

bool exchangesOnDevice(tidalComm_t comm, cudaStream_t stream, int rank, int n) {
  const size_t count = 300001;  // several chunks per peer
  const auto un = static_cast<size_t>(n);
  const size_t blocks = std::max<size_t>(un, 3);  // the group below uses three
  std::vector<int32_t> in(count * blocks), out(count * un), want(count * un);
  for (size_t b = 0; b < blocks; ++b)
    for (size_t i = 0; i < count; ++i) in[b * count + i] = exchanged(rank, static_cast<int>(b), i);
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < count; ++i)
      want[static_cast<size_t>(p) * count + i] = exchanged(p, rank, i);
  DeviceMemory send(in.size() * sizeof(int32_t)), recv(in.size() * sizeof(int32_t));
  GPU_CHECK(cudaMemcpy(send.data(), in.data(), send.size(), cudaMemcpyHostToDevice));
  GPU_CHECK(cudaMemset(recv.data(), 0xff, recv.size()));
  bool ok =
      tidalAlltoAll(send.data(), recv.data(), count, tidalInt32, comm, stream) == tidalSuccess;
  GPU_CHECK(cudaStreamSynchronize(stream));
  GPU_CHECK(
      cudaMemcpy(out.data(), recv.data(), out.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
  if (!ok || out != want) {
    std::fprintf(stderr, "rank %d: FAIL AllToAll on device buffers (%s)\n", rank,
                 ok ? "wrong data" : tidalGetLastError(comm));
    return false;
  }
  // Block 0 to next, block 1 to prev, block 2 to self; received alike.
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  const size_t bytes = count * sizeof(int32_t);
  GPU_CHECK(cudaMemset(recv.data(), 0xff, recv.size()));
  ok = tidalGroupStart() == tidalSuccess;
  ok &= tidalSend(send.data() + 0 * bytes, count, tidalInt32, next, comm, stream) == tidalSuccess;
  ok &= tidalRecv(recv.data() + 0 * bytes, count, tidalInt32, prev, comm, stream) == tidalSuccess;
  ok &= tidalSend(send.data() + 1 * bytes, count, tidalInt32, prev, comm, stream) == tidalSuccess;
  ok &= tidalRecv(recv.data() + 1 * bytes, count, tidalInt32, next, comm, stream) == tidalSuccess;
  ok &= tidalSend(send.data() + 2 * bytes, count, tidalInt32, rank, comm, stream) == tidalSuccess;
  ok &= tidalRecv(recv.data() + 2 * bytes, count, tidalInt32, rank, comm, stream) == tidalSuccess;
  ok &= tidalGroupEnd() == tidalSuccess;
  GPU_CHECK(cudaStreamSynchronize(stream));
  out.resize(3 * count);
  GPU_CHECK(cudaMemcpy(out.data(), recv.data(), 3 * bytes, cudaMemcpyDeviceToHost));
  for (size_t i = 0; ok && i < count; ++i) {
    ok = out[i] == exchanged(prev, 0, i) && out[count + i] == exchanged(next, 1, i) &&
         out[2 * count + i] == exchanged(rank, 2, i);
  }
  if (!ok) std::fprintf(stderr, "rank %d: FAIL Send/Recv group on device buffers\n", rank);
  return ok;
}

int runSuite(tidalComm_t comm, int rank, int n, bool big) {
  cudaStream_t stream = nullptr;
  GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  long passed = 0, failed = 0;
  auto tally = [&](bool ok) { ok ? ++passed : ++failed; };
  tally(mixedBuffersAreRefused(comm, rank));
  tally(callDoesNotWaitForTheGpu(comm, stream, rank));
  // Several chunks: the pipelined ring, staging and the cuda_ipc ring's wrap.
  const size_t bigCount = big ? (size_t{1} << 22) + 3 : (size_t{1} << 20) + 3;
  for (const Case& c : standardCases(n, bigCount)) {
    tally(runCase(comm, stream, rank, n, c));
    if (failed > 20) break;
  }
  tally(exchangesOnDevice(comm, stream, rank, n));
  // A stream-ordered barrier, then one on the legacy default stream.
  tally(tidalBarrier(comm, stream) == tidalSuccess);
  GPU_CHECK(cudaStreamSynchronize(stream));
  DeviceMemory one(sizeof(float));
  GPU_CHECK(cudaMemset(one.data(), 0, sizeof(float)));
  tally(tidalAllReduce(one.data(), one.data(), 1, tidalFloat32, tidalSum, comm, nullptr) ==
        tidalSuccess);
  GPU_CHECK(cudaDeviceSynchronize());
  GPU_CHECK(cudaStreamDestroy(stream));
  std::printf("rank %d: %ld passed, %ld failed\n", rank, passed, failed);
  return failed == 0 ? 0 : 1;
}

int runAsProcess(const Options& opt) {
  const char* rankText = std::getenv("RANK");
  const int rank = rankText ? std::atoi(rankText) : 0;
  int devices = 0;
  GPU_CHECK(cudaGetDeviceCount(&devices));
  GPU_CHECK(cudaSetDevice(opt.spread ? rank % devices : 0));
  tidalComm_t comm = nullptr;
  if (tidalCommInitFromEnv(&comm) != tidalSuccess) {
    std::fprintf(stderr, "FAIL tidalCommInitFromEnv: %s\n", tidalGetLastError(nullptr));
    return 1;
  }
  int n = 0;
  tidalCommCount(comm, &n);
  const int status = runSuite(comm, rank, n, opt.big);
  return tidalCommDestroy(comm) == tidalSuccess ? status : 1;
}

int runAsThreads(const Options& opt) {
  const int n = opt.threads;
  std::vector<tidalComm_t> comms(static_cast<size_t>(n));
  std::vector<int> devlist(static_cast<size_t>(n), 0);  // every rank on one GPU
  if (tidalCommInitAll(comms.data(), n, devlist.data()) != tidalSuccess) {
    std::fprintf(stderr, "FAIL tidalCommInitAll: %s\n", tidalGetLastError(nullptr));
    return 1;
  }
  std::vector<int> status(static_cast<size_t>(n), 1);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      GPU_CHECK(cudaSetDevice(0));
      status[static_cast<size_t>(r)] = runSuite(comms[static_cast<size_t>(r)], r, n, opt.big);
    });
  }
  for (auto& t : threads) t.join();
  int result = 0;
  for (int r = 0; r < n; ++r) {
    result |= status[static_cast<size_t>(r)];
    if (tidalCommDestroy(comms[static_cast<size_t>(r)]) != tidalSuccess) result = 1;
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  tidal::gputest::skipWithoutDevice();
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--big") {
      opt.big = true;
    } else if (arg == "--spread") {
      opt.spread = true;
    } else if (arg == "--threads" && i + 1 < argc) {
      opt.threads = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--big] [--spread] [--threads N]\n", argv[0]);
      return 2;
    }
  }
  return opt.threads > 0 ? runAsThreads(opt) : runAsProcess(opt);
}
