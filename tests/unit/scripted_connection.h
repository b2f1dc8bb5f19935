// A Connection whose completions the test decides, for code above the
// transport seam (the engine, ib's rail striping): posts are recorded and
// complete only up to Script::completeUpTo; a post of exactly
// Script::deliver.size() bytes receives those bytes (a receive the "peer"
// has answered), and so does a post of a size in Script::deliverBySize.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "transports/transport.h"

namespace tidal::test {

class ScriptedConnection final : public Connection {
 public:
  struct Script {
    std::vector<std::pair<const char*, size_t>> posts;
    uint64_t completeUpTo = 0;
    std::vector<char> deliver;
    // Receives of other sizes, by size.
    std::map<size_t, std::vector<char>> deliverBySize;
    // When set, progress() throws this (tidalRemoteError) after completing
    // what it may: the peer went.
    std::string failWith;
    // progress() completes nothing before this time (a peer that answers
    // late, without a second thread).
    std::chrono::steady_clock::time_point completeNotBefore{};
    // What the engine published with publishCpu, and what peerWaitsOnCpu says.
    std::vector<int> publishedCpus;
    bool peerWaitsOnEveryCpu = false;
  };
  explicit ScriptedConnection(std::shared_ptr<Script> script, int peer = 7)
      : script_(std::move(script)), peer_(peer) {}
  int peer() const override { return peer_; }
  void post(void* data, size_t bytes) override {
    script_->posts.emplace_back(static_cast<const char*>(data), bytes);
    if (!script_->deliver.empty() && bytes == script_->deliver.size()) {
      std::memcpy(data, script_->deliver.data(), bytes);
    } else if (auto it = script_->deliverBySize.find(bytes); it != script_->deliverBySize.end()) {
      std::memcpy(data, it->second.data(), bytes);
    }
    ++posted_;
  }
  bool progress() override {
    if (std::chrono::steady_clock::now() < script_->completeNotBefore) return false;
    const uint64_t to = std::min(script_->completeUpTo, posted_);
    const bool moved = to > completed_;
    completed_ = std::max(completed_, to);
    if (!script_->failWith.empty()) fail(tidalRemoteError, "{}", script_->failWith);
    return moved;
  }
  uint64_t completed() const override { return completed_; }
  uint64_t posted() const override { return posted_; }
  void addPollFds(std::vector<pollfd>&) const override {}
  void publishCpu(int cpu) override { script_->publishedCpus.push_back(cpu); }
  bool peerWaitsOnCpu(int) const override { return script_->peerWaitsOnEveryCpu; }
  void abort() override {}
  std::string describe() const override { return "scripted"; }

 private:
  std::shared_ptr<Script> script_;
  int peer_;
  uint64_t posted_ = 0, completed_ = 0;
};

}  // namespace tidal::test
