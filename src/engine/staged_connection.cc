#include "engine/staged_connection.h"

#include <algorithm>

#include "core/error.h"

namespace tidal {

PinnedSlots::PinnedSlots(DeviceApi& device, size_t pieceBytes, int slots)
    : pieceBytes_(pieceBytes),
      slots_(slots),
      memory_(device.allocatePinned(pieceBytes * static_cast<size_t>(slots))) {
  for (int i = slots - 1; i >= 0; --i) free_.push_back(i);  // slot 0 is taken first
}

int PinnedSlots::take() {
  const int slot = free_.back();
  free_.pop_back();
  return slot;
}

std::string PinnedSlots::describe() const {
  return fmt::format("staged through {} x {} KiB pinned host memory", slots_, pieceBytes_ >> 10);
}

// ---------------------------------------------------------------------------
// Send: copy a piece off the GPU into a slot, post the slot once the copy is
// done, free the slot once the host transport has sent it.

StagedSendConnection::StagedSendConnection(DeviceApi& device, Connection& host, size_t pieceBytes,
                                           int slots)
    : device_(device), host_(host), pieceBytes_(pieceBytes), slots_(device, pieceBytes, slots) {}

void StagedSendConnection::post(void* data, size_t bytes) {
  transfers_.push_back(
      {static_cast<const char*>(data), bytes, 0, stagedPieceCount(bytes, pieceBytes_)});
  ++posted_;
}

bool StagedSendConnection::progress() {
  bool moved = false;
  while (nextToStage_ < transfers_.size()) {
    Transfer& t = transfers_[nextToStage_];
    if (t.bytes == 0) {
      if (!t.emptyStaged) pieces_.push_back({-1, 0, 0});
      t.emptyStaged = true;
      ++nextToStage_;
      moved = true;
      continue;
    }
    if (slots_.empty()) break;
    const size_t n = std::min(pieceBytes_, t.bytes - t.staged);
    const int slot = slots_.take();
    device_.copy(slots_.address(slot), t.data + t.staged, n);
    pieces_.push_back({slot, n, device_.mark()});
    t.staged += n;
    if (t.staged == t.bytes) ++nextToStage_;
    moved = true;
  }
  for (Piece& p : pieces_) {
    if (p.posted) continue;
    if (!device_.reached(p.marker)) break;  // pieces go out in order
    p.hostSeq = host_.posted();
    host_.post(slots_.address(p.slot), p.bytes);
    p.posted = true;
    moved = true;
  }
  moved |= host_.progress();
  while (!pieces_.empty() && pieces_.front().posted &&
         host_.completed() > pieces_.front().hostSeq) {
    if (pieces_.front().slot >= 0) slots_.give(pieces_.front().slot);
    pieces_.pop_front();
    // Pieces are made in transfer order, so the oldest belongs to the oldest transfer.
    if (--transfers_.front().pieces == 0) {
      transfers_.pop_front();
      --nextToStage_;
      ++completed_;
    }
    moved = true;
  }
  return moved;
}

std::string StagedSendConnection::describe() const {
  return host_.describe() + " " + slots_.describe();
}

// ---------------------------------------------------------------------------
// Receive: post a slot on the host transport, copy (or reduce) it onto the
// GPU once it has arrived, free it once that copy is done.

StagedRecvConnection::StagedRecvConnection(DeviceApi& device, Connection& host, size_t pieceBytes,
                                           int slots)
    : device_(device), host_(host), pieceBytes_(pieceBytes), slots_(device, pieceBytes, slots) {}

void StagedRecvConnection::post(void* data, size_t bytes) {
  transfers_.push_back(
      {static_cast<char*>(data), nullptr, nullptr, bytes, 0, stagedPieceCount(bytes, pieceBytes_)});
  ++posted_;
}

void StagedRecvConnection::postReduce(void* dst, const void* local, size_t bytes,
                                      const ArrivalReducer& reducer) {
  transfers_.push_back({static_cast<char*>(dst), static_cast<const char*>(local), &reducer, bytes,
                        0, stagedPieceCount(bytes, pieceBytes_)});
  ++posted_;
}

bool StagedRecvConnection::progress() {
  bool moved = false;
  while (nextToRequest_ < transfers_.size()) {
    Transfer& t = transfers_[nextToRequest_];
    if (t.bytes == 0) {
      if (!t.emptyRequested) {
        pieces_.push_back({-1, 0, t.dst, t.local, t.reducer, host_.posted()});
        host_.post(slots_.address(-1), 0);
      }
      t.emptyRequested = true;
      ++nextToRequest_;
      moved = true;
      continue;
    }
    if (slots_.empty()) break;
    const size_t n = std::min(pieceBytes_, t.bytes - t.requested);
    const int slot = slots_.take();
    pieces_.push_back({slot, n, t.dst + t.requested, t.local ? t.local + t.requested : nullptr,
                       t.reducer, host_.posted()});
    host_.post(slots_.address(slot), n);
    t.requested += n;
    if (t.requested == t.bytes) ++nextToRequest_;
    moved = true;
  }
  try {
    moved |= host_.progress();
  } catch (const Error&) {
    // The peer is gone, but what it sent before it went is ours: landed and
    // retired first, so that a call signature already here still counts
    // (engine.cc, explainWithSignatures).
    land();
    throw;
  }
  return land() || moved;
}

bool StagedRecvConnection::land() {
  bool moved = false;
  for (Piece& p : pieces_) {
    if (p.landed) continue;
    if (host_.completed() <= p.hostSeq) break;  // the host transport completes in order
    if (p.bytes > 0) {
      const char* slot = slots_.address(p.slot);
      if (p.reducer) {
        p.reducer->combine(p.dst, p.local, slot, p.bytes);
      } else {
        device_.copy(p.dst, slot, p.bytes);
      }
      p.marker = device_.mark();
    }
    p.landed = true;
    moved = true;
  }
  while (!pieces_.empty() && pieces_.front().landed && device_.reached(pieces_.front().marker)) {
    if (pieces_.front().slot >= 0) slots_.give(pieces_.front().slot);
    pieces_.pop_front();
    if (--transfers_.front().pieces == 0) {
      transfers_.pop_front();
      --nextToRequest_;
      ++completed_;
    }
    moved = true;
  }
  return moved;
}

std::string StagedRecvConnection::describe() const {
  return host_.describe() + " " + slots_.describe();
}

}  // namespace tidal
