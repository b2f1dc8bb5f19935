// What both directions of an ib connection answer the same way: counters,
// description, sleeping and abort through their IbLink.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "transports/ib/ib_link.h"
#include "transports/transport.h"

namespace tidal::ib {

class IbConnection : public Connection {
 public:
  int peer() const override { return peer_; }
  uint64_t completed() const override { return completed_; }
  uint64_t posted() const override { return posted_; }
  std::string describe() const override { return description_; }
  // Only a connection with work sleeps on its fds: an idle one whose peer
  // has finished (side channel at EOF) must not wake the engine forever.
  void addPollFds(std::vector<pollfd>& fds) const override {
    if (completed_ < posted_) link().addPollFds(fds);
  }
  void abort() override { link().abort(); }
  // "rxe0:1 RoCEv2 gid 1 mtu 1024 GDR off" and "1 QP, eager <= 8 KiB": the
  // two halves of describe(), which a multi-rail connection joins per rail.
  const std::string& pathDescription() const { return path_; }
  const std::string& geometryDescription() const { return geometry_; }

 protected:
  explicit IbConnection(int peer) : peer_(peer) {}
  void describeAs(std::string path, std::string geometry) {
    path_ = std::move(path);
    geometry_ = std::move(geometry);
    description_ = "ib " + path_ + ", " + geometry_;
  }
  virtual const IbLink& link() const = 0;
  virtual IbLink& link() = 0;

  int peer_;
  std::string description_, path_, geometry_;
  uint64_t posted_ = 0, completed_ = 0, bytesMoved_ = 0;
};

}  // namespace tidal::ib
