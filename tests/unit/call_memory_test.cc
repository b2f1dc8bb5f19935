// Where a call's buffers live (comm/call_memory.h), from classifications a
// GPU would give: mixed host and device buffers, a buffer on the wrong
// device, a stream with host buffers, managed memory, empty buffers.
#include "comm/call_memory.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace tidal {
namespace {

const cuda::PointerInfo kHost{};
const cuda::PointerInfo kDevice0{MemoryKind::Cuda, false, 0};
const cuda::PointerInfo kDevice1{MemoryKind::Cuda, false, 1};
const cuda::PointerInfo kManaged{MemoryKind::Cuda, true, 1};

int a_, b_;  // addresses to print
void* const kStream = reinterpret_cast<void*>(0x5eed);

CallMemory decide(const cuda::PointerInfo& send, const cuda::PointerInfo& recv, void* stream,
                  size_t sendBytes = 64, size_t recvBytes = 64, int commDevice = 0) {
  const std::vector<BufferArg> buffers{{"sendbuff", &a_, sendBytes}, {"recvbuff", &b_, recvBytes}};
  const std::vector<cuda::PointerInfo> infos{send, recv};
  return decideCallMemory("rank 3: tidalAllReduce", buffers, infos, stream, commDevice);
}

std::string failure(const cuda::PointerInfo& send, const cuda::PointerInfo& recv, void* stream,
                    tidalResult_t expected, int commDevice = 0) {
  try {
    decide(send, recv, stream, 64, 64, commDevice);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), expected) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(CallMemory, HostBuffersWithoutStreamRunOnTheHost) {
  const CallMemory m = decide(kHost, kHost, nullptr);
  EXPECT_EQ(m.kind, MemoryKind::Host);
}

TEST(CallMemory, DeviceBuffersAreOrderedOnTheirStream) {
  CallMemory m = decide(kDevice0, kDevice0, kStream);
  EXPECT_EQ(m.kind, MemoryKind::Cuda);
  EXPECT_EQ(m.stream, kStream);
  m = decide(kDevice0, kDevice0, nullptr);  // the legacy default stream
  EXPECT_EQ(m.kind, MemoryKind::Cuda);
  EXPECT_EQ(m.stream, nullptr);
}

TEST(CallMemory, MixedHostAndDeviceSaysWhich) {
  const std::string text = failure(kHost, kDevice0, kStream, tidalInvalidArgument);
  EXPECT_NE(text.find("rank 3: tidalAllReduce"), std::string::npos) << text;
  EXPECT_NE(text.find("sendbuff"), std::string::npos) << text;
  EXPECT_NE(text.find("is host memory"), std::string::npos) << text;
  EXPECT_NE(text.find("recvbuff"), std::string::npos) << text;
  EXPECT_NE(text.find("CUDA device memory on device 0"), std::string::npos) << text;
  // The other way round names them the other way round.
  const std::string reverse = failure(kDevice0, kHost, nullptr, tidalInvalidArgument);
  EXPECT_LT(reverse.find("recvbuff"), reverse.find("sendbuff")) << reverse;
  EXPECT_NE(failure(kManaged, kHost, kStream, tidalInvalidArgument).find("CUDA managed memory"),
            std::string::npos);
}

TEST(CallMemory, DeviceBufferOnAnotherDeviceIsRefused) {
  const std::string text = failure(kDevice1, kDevice1, kStream, tidalInvalidArgument, 0);
  EXPECT_NE(text.find("device 1"), std::string::npos) << text;
  EXPECT_NE(text.find("this communicator uses device 0"), std::string::npos) << text;
}

TEST(CallMemory, ManagedMemoryIsAcceptedOnAnyDevice) {
  const CallMemory m = decide(kManaged, kDevice0, kStream);
  EXPECT_EQ(m.kind, MemoryKind::Cuda);
}

TEST(CallMemory, StreamWithHostBuffersIsInvalidUsage) {
  const std::string text = failure(kHost, kHost, kStream, tidalInvalidUsage);
  EXPECT_NE(text.find("stream"), std::string::npos) << text;
  EXPECT_NE(text.find("host memory"), std::string::npos) << text;
}

TEST(CallMemory, EmptyBuffersAreNotLookedAtAndFollowTheStream) {
  // A zero-byte recvbuff that is "host" does not make a device call mixed.
  EXPECT_EQ(decide(kDevice0, kHost, kStream, 64, 0).kind, MemoryKind::Cuda);
  EXPECT_EQ(decide(kHost, kHost, kStream, 0, 0).kind, MemoryKind::Cuda);
  EXPECT_EQ(decide(kHost, kHost, nullptr, 0, 0).kind, MemoryKind::Host);
}

}  // namespace
}  // namespace tidal
