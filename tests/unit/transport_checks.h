// Checks shared by the transport tests (tcp, shm): driving a pair of
// connections to completion, a connection that is set up promptly whatever
// strangers wait on the same listener, and abort() ending a waiting accept.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "core/error.h"
#include "net/hello_acceptor.h"
#include "transports/transport.h"

namespace tidal::test {

// Drives both connections on this thread until every posted transfer completed.
inline void drain(Connection& a, Connection& b) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (a.completed() < a.posted() || b.completed() < b.posted()) {
    a.progress();
    b.progress();
    ASSERT_LT(Clock::now(), deadline) << "transfers did not complete";
  }
}

// Rank `from` connects to rank `to`, which listens at `handle`: the pair must
// be set up in far less than kHelloReadLimit (strangers on the listener hold
// only their own slots) and carry a word.
inline void expectPromptConnection(Transport& sender, Transport& receiver, int from, int to,
                                   const ConnectHandle& handle) {
  const auto start = Clock::now();
  const Deadline deadline = deadlineIn(std::chrono::milliseconds(10000));
  auto send = sender.connectSend(to, handle, deadline);
  auto recv = receiver.acceptRecv(from, deadline);
  EXPECT_LT(Clock::now() - start, kHelloReadLimit / 2);
  uint64_t x = 0x5117e27, y = 0;
  send->post(&x, sizeof x);
  recv->post(&y, sizeof y);
  drain(*send, *recv);
  EXPECT_EQ(y, x);
}

// abort() from another thread ends an acceptRecv that waits for `from` on a
// listening `receiver` at once, as a RemoteError that says so.
inline void expectAbortEndsAccept(Transport& receiver, int from) {
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    receiver.abort();
  });
  const auto start = Clock::now();
  try {
    receiver.acceptRecv(from, deadlineIn(std::chrono::milliseconds(10000)));
    ADD_FAILURE() << "accept returned without a peer";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), tidalRemoteError) << e.what();
    EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
  }
  aborter.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

}  // namespace tidal::test
