// The backend's unit of asynchronous work and the thread that runs it.
//
// Every collective the backend issues becomes one Task on a WorkQueue: the
// calling thread checks the arguments, prepares contiguous buffers and
// returns a TidalWork at once; the queue's thread runs the tasks one after
// another in issue order (Tidal's host-buffer calls block, and a
// communicator runs one call at a time), then completes the TidalWork and its
// Future. DDP's reducer hangs the bucket's next step on that Future, so a
// bucket's AllReduce runs while the backward pass computes the next bucket.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tidal_torch {

class TidalWork : public c10d::Work {
 public:
  // outputs: what result() and the Future's value are (DDP reads the
  // Future's value as a list of tensors). what: "allreduce", for messages.
  TidalWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  // Blocks until done (timeout 0: no limit; the communicator's own timeout
  // still bounds the operation); rethrows the operation's error. A timeout
  // that expires throws, naming the operation and the time; the operation
  // itself goes on.
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Called once, by the queue's thread, when the operation has ended.
  void complete(std::exception_ptr error);

 private:
  std::string what_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// One thread that runs tasks in the order they were pushed. The destructor
// runs what is queued, then joins.
class WorkQueue {
 public:
  using Task = std::function<void()>;
  explicit WorkQueue(std::string name);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void push(Task task);

 private:
  void loop();

  std::string name_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tidal_torch
