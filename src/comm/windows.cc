// The communicator's one-sided calls (one_sided.h): each takes the
// communicator for the call, as every other call does, and hands the work to
// OneSided. None of them breaks the communicator when it fails: a put or a
// signal that could not be made left no message half sent, and a wait that
// timed out can be waited for again.
#include "comm/communicator.h"

namespace tidal {

std::vector<WindowSpan> Communicator::registerWindow(const void* buff, size_t size, bool device,
                                                     int flags, uint64_t* number) {
  auto lock = enterCall("tidalCommWindowRegister");
  std::vector<WindowSpan> spans =
      oneSided_->gatherWindow(*bootstrap_, buff, size, device, flags, windowsRegistered_ + 1);
  *number = ++windowsRegistered_;
  return spans;
}

void Communicator::deregisterWindow(uint64_t number) {
  auto lock = enterCall("tidalCommWindowDeregister");
  oneSided_->agreeOnRelease(*bootstrap_, number);
}

void Communicator::putSignal(const void* source, size_t bytes, int peer,
                             const std::vector<WindowSpan>& spans, size_t offset) {
  auto lock = enterCall("tidalPutSignal");
  oneSided_->putSignal(source, bytes, peer, spans, offset, "tidalPutSignal");
}

void Communicator::signal(int peer) {
  auto lock = enterCall("tidalSignal");
  oneSided_->signal(peer, "tidalSignal");
}

void Communicator::waitSignal(const std::vector<OneSided::Wait>& waits) {
  auto lock = enterCall("tidalWaitSignal");
  oneSided_->waitSignal(waits, "tidalWaitSignal");
}

}  // namespace tidal
