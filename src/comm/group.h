// tidalGroupStart / tidalGroupEnd: calls made between them run together.
//
// A group belongs to the calling thread and nests (only the outermost End
// runs it). Inside a group, collectives and Send/Recv only record what to
// do; the outermost GroupEnd runs, for each communicator the group touched,
// its collectives in the order they were called, then all its Send/Recv as
// one schedule (every operation posted at once, so any pattern of sends and
// receives completes). A group that spans several communicators runs each
// communicator's share on a thread of its own, so that a rank waiting on one
// communicator never holds up a peer that needs it on another. A call that
// fails its argument checks inside a group fails the group: GroupEnd runs
// nothing and returns that error; an error while running is returned by
// GroupEnd (and is the failing communicator's last error). A communicator's
// Send/Recv in one group are one schedule, so they take one kind of memory:
// all host buffers, or all device buffers on one stream.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "collectives/schedule.h"
#include "comm/call_memory.h"
#include "tidal/tidal.h"

namespace tidal {
class Communicator;
}

namespace tidal::group {

bool active();
void start();
// Outside a group: runs `work` now. Inside: keeps it for GroupEnd.
void runOrQueue(Communicator& comm, std::function<void()> work);
// Outside a group: a group of this one operation. Inside: kept for GroupEnd.
// Throws InvalidUsage when `memory` differs from that of the communicator's
// earlier Send/Recv in the group.
void pointToPoint(Communicator& comm, const coll::P2pOp& op, const CallMemory& memory);
// Keeps `object` alive until the group has run (a call's temporary input).
void keepAlive(std::shared_ptr<void> object);
// A call inside the group failed: the group will report it and run nothing.
void noteFailure(tidalResult_t code, const std::string& text);
// Leaves one level; the outermost runs the group. Throws the first error.
void end();
// tidalGroupSimulateEnd: leaves one level like end(), but the outermost runs
// nothing: it returns how long the group would take, in microseconds
// (Communicator::simulate; communicators' shares overlap, as they run on
// threads of their own, so the longest share counts). nullopt at an inner
// level. Throws what end() would for a failed call inside the group.
std::optional<double> simulateEnd();

}  // namespace tidal::group
