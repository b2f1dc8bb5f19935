// One direction of a TCP connection to a peer, made of TIDAL_NSOCKS sockets.
//
// Large transfers are striped across the sockets in 4 KiB-aligned pieces so
// several kernel flows (and, on real NICs, several queues) carry them; small
// transfers take one socket, rotating with the sequence number. Both sides
// derive the same split from the same sequence of sizes, so no framing
// travels on the wire.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/socket.h"
#include "transports/transport.h"

namespace tidal {

class TcpConnection final : public Connection {
 public:
  enum class Direction { Send, Recv };

  TcpConnection(int selfRank, int peer, Direction direction, std::vector<Socket> sockets,
                std::string description);

  int peer() const override { return peer_; }
  void post(void* data, size_t bytes) override;
  bool progress() override;
  uint64_t completed() const override { return completed_; }
  uint64_t posted() const override { return posted_; }
  void addPollFds(std::vector<pollfd>& fds) const override;
  void abort() override;
  std::string describe() const override { return description_; }

 private:
  struct Piece {
    char* data;
    size_t left;
    uint64_t seq;
  };
  struct Lane {
    Socket socket;
    std::deque<Piece> queue;
  };

  // Moves bytes on one lane until it would block; returns bytes moved.
  size_t drive(Lane& lane);
  void pieceDone(uint64_t seq);
  [[noreturn]] void lost(const std::string& why) const;

  int selfRank_;
  int peer_;
  Direction direction_;
  std::vector<Lane> lanes_;
  std::string description_;
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
  // piecesLeft_[i] counts unfinished pieces of transfer completed_ + i.
  std::deque<uint32_t> piecesLeft_;
  uint64_t bytesMoved_ = 0;
};

}  // namespace tidal
