// A staged receive (device buffers over a host transport, through pinned
// slots): what the peer delivered before it went still completes, so that
// the engine can read a call signature that arrived just before the link
// failed (engine.cc, explainWithSignatures).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/staged_connection.h"
#include "fake_device.h"
#include "scripted_connection.h"

namespace tidal {
namespace {

using test::FakeDeviceApi;
using test::FakeGpu;
using test::ScriptedConnection;

TEST(StagedRecvConnection, WhatArrivedBeforeThePeerWentStillCompletes) {
  FakeGpu gpu{std::chrono::milliseconds(5)};  // the copy out of the slot takes a while
  FakeDeviceApi device(gpu);
  auto script = std::make_shared<ScriptedConnection::Script>();
  ScriptedConnection host(script);
  StagedRecvConnection recv(device, host, 1024, 2);
  std::vector<char> record(64, 0);
  script->deliver.assign(64, 'x');
  script->completeUpTo = 1;
  recv.post(record.data(), record.size());
  recv.progress();  // the bytes are in the slot; their copy out of it is enqueued
  EXPECT_EQ(recv.completed(), 0u);
  // The peer goes; this rank's GPU finishes the copy.
  script->failWith = "the peer closed its end";
  ASSERT_TRUE(device.drain(std::chrono::seconds(5)));
  EXPECT_THROW(recv.progress(), Error);
  EXPECT_EQ(recv.completed(), 1u) << "a receive that had landed was lost with the link";
  EXPECT_EQ(std::string(record.begin(), record.end()), std::string(64, 'x'));
}

}  // namespace
}  // namespace tidal
