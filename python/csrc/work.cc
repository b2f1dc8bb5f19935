#include "work.h"

#include <c10/util/Exception.h>
#include <pthread.h>

#include <utility>

namespace tidal_torch {

TidalWork::TidalWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      what_(std::move(what)),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

bool TidalWork::isCompleted() {
  std::lock_guard lock(mutex_);
  return completed_;
}

bool TidalWork::isSuccess() const {
  std::lock_guard lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr TidalWork::exception() const {
  std::lock_guard lock(mutex_);
  return exception_;
}

std::vector<at::Tensor> TidalWork::result() { return outputs_; }

bool TidalWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (timeout <= std::chrono::milliseconds::zero()) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    TORCH_CHECK(false, "tidal: ", what_, " did not complete within the wait timeout of ",
                timeout.count(), " ms (it goes on; the process group's timeout ends it)");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> TidalWork::getFuture() { return future_; }

void TidalWork::complete(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    completed_ = true;
    exception_ = error;
  }
  cv_.notify_all();
  // Callbacks (DDP's bucket step) run here, on the queue's thread.
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

WorkQueue::WorkQueue(std::string name) : name_(std::move(name)), thread_([this] { loop(); }) {
  // Shown by top -H and gdb (at most 15 characters).
  pthread_setname_np(thread_.native_handle(), name_.substr(0, 15).c_str());
}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void WorkQueue::push(Task task) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void WorkQueue::loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();  // a task reports its own errors through its TidalWork
  }
}

}  // namespace tidal_torch
