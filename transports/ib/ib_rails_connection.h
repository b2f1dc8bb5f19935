// One ib connection over several NICs (multi-rail): a connection per rail,
// each with its own QPs, completion queue, side channel and protocol
// (ib_send_connection.h, ib_recv_connection.h), and a RailStriper that cuts
// every posted transfer into pieces for them (rail_striping.h).
//
// Rail i of this rank is paired with rail i of the peer: rail-optimised
// fabrics connect the same-index NIC of every host through the same leaf
// switch, so same-index traffic stays on one leaf. Only the first
// min(both counts) rails are used; the transport says at INFO which NICs
// that leaves out (ib_transport.cc).
//
// Order: each rail completes its pieces in post order, and a transfer is
// complete when every rail it used has completed its piece of it; so
// transfers complete in post order, as the Connection contract says,
// whichever rail is faster. Both directions are this one class: posting,
// striping and counting are the same, only the rails differ.
#pragma once

#include <array>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transports/ib/ib_connection.h"
#include "transports/ib/rail_striping.h"
#include "transports/transport.h"

namespace tidal::ib {

class IbRailsConnection final : public Connection {
 public:
  // `rails` are the per-rail connections, in rail order, all of one
  // direction and one peer (2..kMaxRails of them); `description` is what
  // describe() says (railsDescription()).
  IbRailsConnection(std::vector<std::unique_ptr<Connection>> rails, std::string description);

  int peer() const override { return rails_.front()->peer(); }
  void post(void* data, size_t bytes) override;
  bool progress() override;
  uint64_t completed() const override { return completed_; }
  uint64_t posted() const override { return posted_; }
  void addPollFds(std::vector<pollfd>& fds) const override;
  void abort() override;
  // "ib 2 rails [rxe0:1 RoCEv2 gid 1 mtu 1024 GDR off | rxe1:1 ...], 1 QP, eager <= 8 KiB"
  std::string describe() const override { return description_; }

  size_t railCount() const { return rails_.size(); }

 private:
  // Per rail: how many of its transfers must have completed for a transfer
  // to be complete (its post count right after the transfer's piece).
  using Needs = std::array<uint64_t, kMaxRails>;

  std::vector<std::unique_ptr<Connection>> rails_;
  RailStriper striper_;
  std::deque<Needs> pending_;  // pending_[i] is transfer completed_ + i
  uint64_t posted_ = 0, completed_ = 0;
  std::string description_;
};

// "ib 2 rails [rxe0:1 RoCEv2 gid 1 mtu 1024 GDR off | rxe1:1 ...], 1 QP, eager <= 8 KiB"
std::string railsDescription(const std::vector<std::unique_ptr<IbConnection>>& rails);

// The connection the transport hands out: the one rail itself when there is
// one (the single-NIC connection, unchanged), else an IbRailsConnection.
std::unique_ptr<Connection> joinRails(std::vector<std::unique_ptr<IbConnection>> rails);

}  // namespace tidal::ib
