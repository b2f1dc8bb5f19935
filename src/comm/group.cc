#include "comm/group.h"

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"

namespace tidal::group {

namespace {

struct CommWork {
  Communicator* comm;
  std::vector<std::function<void()>> collectives;
  std::vector<coll::P2pOp> p2p;
  CallMemory p2pMemory;  // of every op in p2p
};

struct State {
  int depth = 0;
  std::vector<CommWork> work;  // in the order the communicators first appear
  tidalResult_t failure = tidalSuccess;
  std::string failureText;
  std::vector<std::shared_ptr<void>> kept;
};

thread_local State state;

CommWork& workOf(Communicator& comm) {
  for (auto& w : state.work)
    if (w.comm == &comm) return w;
  state.work.push_back({&comm, {}, {}, {}});
  return state.work.back();
}

// Runs one communicator's share; its failure is also that communicator's last error.
void runShare(CommWork& w) {
  try {
    for (auto& collective : w.collectives) collective();
    w.comm->pointToPoint(w.p2p, w.p2pMemory);
  } catch (const Error& e) {
    w.comm->setLastError(e.what());
    throw;
  }
}

}  // namespace

bool active() { return state.depth > 0; }

void start() { ++state.depth; }

void runOrQueue(Communicator& comm, std::function<void()> work) {
  if (!active()) {
    work();
    return;
  }
  workOf(comm).collectives.push_back(std::move(work));
}

void pointToPoint(Communicator& comm, const coll::P2pOp& op, const CallMemory& memory) {
  if (!active()) {
    comm.pointToPoint(op, memory);
    return;
  }
  CommWork& w = workOf(comm);
  if (!w.p2p.empty() && (w.p2pMemory.kind != memory.kind || w.p2pMemory.stream != memory.stream)) {
    const auto describe = [](const CallMemory& m) {
      return m.kind == MemoryKind::Cuda ? fmt::format("CUDA buffers on stream {}", m.stream)
                                        : std::string("host buffers");
    };
    fail(tidalInvalidUsage,
         "rank {}: {} {} of this group takes {}, but the group's earlier Send/Recv on this "
         "communicator take {}: one group's Send/Recv on a communicator use one kind of memory "
         "(and one stream)",
         comm.rank(), op.kind == coll::P2pOp::Kind::Send ? "Send to" : "Recv from", op.peer,
         describe(memory), describe(w.p2pMemory));
  }
  w.p2pMemory = memory;
  w.p2p.push_back(op);
}

void keepAlive(std::shared_ptr<void> object) { state.kept.push_back(std::move(object)); }

void noteFailure(tidalResult_t code, const std::string& text) {
  if (state.failure != tidalSuccess) return;
  state.failure = code;
  state.failureText = text;
}

namespace {

// A group taken out of the thread's state: its work, and what must live
// until that work has run (keepAlive).
struct Taken {
  std::vector<CommWork> work;
  std::vector<std::shared_ptr<void>> kept;
};

// Leaves one level. At the outermost, takes the group out of the thread's
// state (the calls run from it may start groups of their own) and returns
// it, or throws the failure of a call inside it.
std::optional<Taken> leave(const char* fn) {
  if (state.depth == 0) {
    fail(tidalInvalidUsage,
         "{}: no group is open on this thread (tidalGroupStart was not called, or its group has "
         "already ended)",
         fn);
  }
  if (--state.depth > 0) return std::nullopt;
  Taken taken{std::move(state.work), std::move(state.kept)};
  const tidalResult_t failure = state.failure;
  const std::string failureText = std::move(state.failureText);
  state = State{};
  if (failure != tidalSuccess) {
    fail(failure, "{}: nothing in the group ran, because a call in it failed: {}", fn, failureText);
  }
  return taken;
}

}  // namespace

void end() {
  std::optional<Taken> taken = leave("tidalGroupEnd");
  if (!taken) return;
  std::vector<CommWork>& work = taken->work;
  if (work.size() == 1) {
    runShare(work[0]);
    return;
  }
  std::vector<std::unique_ptr<Error>> errors(work.size());
  std::vector<std::thread> threads;
  threads.reserve(work.size());
  for (size_t i = 0; i < work.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        runShare(work[i]);
      } catch (const Error& e) {
        errors[i] = std::make_unique<Error>(e);
      } catch (const std::exception& e) {
        errors[i] = std::make_unique<Error>(tidalInternalError, e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) throw *e;
}

std::optional<double> simulateEnd() {
  std::optional<Taken> taken = leave("tidalGroupSimulateEnd");
  if (!taken) return std::nullopt;
  double longest = 0;
  for (CommWork& w : taken->work) {
    try {
      longest = std::max(longest, w.comm->simulate(w.collectives, w.p2p, w.p2pMemory));
    } catch (const Error& e) {
      w.comm->setLastError(e.what());
      throw;
    }
  }
  return longest;
}

}  // namespace tidal::group
