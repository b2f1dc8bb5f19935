#include "engine/stream_engine.h"

#include "core/log.h"
#include "core/socket.h"

namespace tidal {

StreamEngine::StreamEngine(int rank, DeviceApi& device, FailureHandler onFailure,
                           std::chrono::seconds timeout)
    : rank_(rank), device_(device), onFailure_(std::move(onFailure)), timeout_(timeout) {
  thread_ = std::thread([this] { loop(); });
}

StreamEngine::~StreamEngine() {
  try {
    waitIdle("tidalCommDestroy");
  } catch (const Error& e) {
    // Already reported through the communicator (a failure), or an abort.
    TIDAL_INFO(Coll, "rank {}: stream engine stops after: {}", rank_, e.what());
    abort();
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StreamEngine::submit(void* userStream, std::string what, Work work) {
  if (aborted_.load()) {
    fail(tidalRemoteError, "rank {}: {} on an aborted communicator", rank_, what);
  }
  if (failed_.load()) {
    std::lock_guard lock(mutex_);
    fail(failureCode_, "rank {}: {} after an earlier stream-ordered call failed: {}", rank_, what,
         failureText_);
  }
  // The sequence number is taken only once the stream accepted both the
  // capture and the hold, so that a refused stream leaves no gap that would
  // hold later streams forever.
  const uint64_t token = device_.captureInput(userStream);
  const auto seq = static_cast<uint32_t>(submitted_.load() + 1);
  try {
    device_.holdStream(userStream, seq);
  } catch (...) {
    device_.waitForInput(token);  // returns the token; the engine stream just waits a little
    throw;
  }
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(Item{seq, token, std::move(what), std::move(work)});
    submitted_.fetch_add(1);
  }
  wake_.notify_one();
}

void StreamEngine::waitIdle(const char* what) {
  std::unique_lock lock(mutex_);
  const uint64_t target = submitted_.load();
  auto lastProgress = Clock::now();
  uint64_t seen = finished_.load();
  while (finished_.load() < target) {
    if (failed_.load()) {
      fail(failureCode_, "rank {}: {}: an earlier stream-ordered call failed: {}", rank_, what,
           failureText_);
    }
    if (aborted_.load()) fail(tidalRemoteError, "rank {}: {}: communicator aborted", rank_, what);
    finishedCv_.wait_for(lock, std::chrono::milliseconds(100));
    if (finished_.load() != seen) {
      seen = finished_.load();
      lastProgress = Clock::now();
    } else if (Clock::now() - lastProgress > timeout_) {
      fail(tidalTimeout,
           "rank {}: {} waited TIDAL_TIMEOUT={} s for {} earlier stream-ordered call(s), none "
           "finished",
           rank_, what, timeout_.count(), target - seen);
    }
  }
  if (failed_.load()) {
    fail(failureCode_, "rank {}: {}: an earlier stream-ordered call failed: {}", rank_, what,
         failureText_);
  }
}

void StreamEngine::abort() {
  aborted_ = true;
  // Holds are wrap-safe "at least seq" waits: releasing the last submitted
  // sequence number lets every held stream go, queued or not.
  device_.release(static_cast<uint32_t>(submitted_.load()));
  wake_.notify_all();
  finishedCv_.notify_all();
}

void StreamEngine::loop() {
  try {
    device_.bindThread();
  } catch (const Error& e) {
    recordFailure(e, "binding the progress thread to its device");
  }
  for (;;) {
    Item item;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    runItem(item);
    {
      std::lock_guard lock(mutex_);
      finished_.fetch_add(1);
    }
    finishedCv_.notify_all();
  }
}

void StreamEngine::recordFailure(const Error& error, const std::string& what) {
  {
    std::lock_guard lock(mutex_);
    if (failed_.load()) return;  // only the first failure is the communicator's error
    failureCode_ = error.code();
    failureText_ = error.what();
    failed_ = true;
  }
  TIDAL_WARN(Coll, "rank {}: stream-ordered {} failed: {}", rank_, what, error.what());
  onFailure_(error);
}

void StreamEngine::runItem(Item& item) {
  try {
    device_.waitForInput(item.inputToken);
    if (!failed_.load() && !aborted_.load()) item.work(aborted_);
    if (aborted_.load() && !failed_.load()) {
      fail(tidalRemoteError, "rank {}: {} aborted (tidalCommAbort)", rank_, item.what);
    }
  } catch (const Error& e) {
    recordFailure(e, item.what);
  } catch (const std::exception& e) {
    recordFailure(Error(tidalInternalError,
                        fmt::format("rank {}: {}: internal error: {}", rank_, item.what, e.what())),
                  item.what);
  }
  // Released even after a failure: see the header. But not before the copies
  // and kernels the failed run had enqueued have finished: they read and
  // write the caller's buffers, which the caller may reuse or free as soon as
  // its stream goes on.
  if (failed_.load() || aborted_.load()) {
    if (!device_.drain(std::chrono::duration_cast<std::chrono::milliseconds>(timeout_))) {
      TIDAL_WARN(Coll, "rank {}: GPU work of the failed {} still runs after TIDAL_TIMEOUT={} s",
                 rank_, item.what, timeout_.count());
    }
  }
  device_.release(item.seq);
}

}  // namespace tidal
