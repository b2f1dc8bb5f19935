#include "transports/ib/ib_rails_connection.h"

#include "core/error.h"

namespace tidal::ib {

IbRailsConnection::IbRailsConnection(std::vector<std::unique_ptr<Connection>> rails,
                                     std::string description)
    : rails_(std::move(rails)),
      striper_(static_cast<uint32_t>(rails_.size())),
      description_(std::move(description)) {
  if (rails_.size() < 2 || rails_.size() > kMaxRails) {
    fail(tidalInternalError, "ib multi-rail connection with {} rails", rails_.size());
  }
}

std::string railsDescription(const std::vector<std::unique_ptr<IbConnection>>& rails) {
  std::string paths;
  for (const auto& r : rails) paths += (paths.empty() ? "" : " | ") + r->pathDescription();
  return fmt::format("ib {} rails [{}], {}", rails.size(), paths,
                     rails.front()->geometryDescription());
}

std::unique_ptr<Connection> joinRails(std::vector<std::unique_ptr<IbConnection>> rails) {
  if (rails.size() == 1) return std::move(rails.front());
  std::string description = railsDescription(rails);
  std::vector<std::unique_ptr<Connection>> plain;
  for (auto& r : rails) plain.push_back(std::move(r));
  return std::make_unique<IbRailsConnection>(std::move(plain), std::move(description));
}

void IbRailsConnection::post(void* data, size_t bytes) {
  const RailPlan plan = striper_.plan(bytes);
  Needs needs{};
  for (size_t r = 0; r < rails_.size(); ++r) needs[r] = rails_[r]->posted();
  for (uint32_t i = 0; i < plan.count; ++i) {
    const RailPiece& piece = plan.pieces[i];
    rails_[piece.rail]->post(static_cast<char*>(data) + piece.offset, piece.bytes);
    needs[piece.rail] = rails_[piece.rail]->posted();
  }
  pending_.push_back(needs);
  ++posted_;
}

bool IbRailsConnection::progress() {
  bool moved = false;
  for (auto& r : rails_) moved |= r->progress();
  while (!pending_.empty()) {
    const Needs& needs = pending_.front();
    for (size_t r = 0; r < rails_.size(); ++r) {
      if (rails_[r]->completed() < needs[r]) return moved;
    }
    pending_.pop_front();
    ++completed_;
    moved = true;
  }
  return moved;
}

void IbRailsConnection::addPollFds(std::vector<pollfd>& fds) const {
  // Each rail adds its descriptors only while it has work of its own.
  for (const auto& r : rails_) r->addPollFds(fds);
}

void IbRailsConnection::abort() {
  for (auto& r : rails_) r->abort();
}

}  // namespace tidal::ib
