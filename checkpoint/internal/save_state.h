// The shared state behind a SaveHandle (internal): the save's step, whether
// it is done and its result. The persist thread finishes it once; any
// number of handle copies read it. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "common/mutex.h"
#include "common/status.h"

namespace strata::checkpoint::internal {

class SaveState {
 public:
  explicit SaveState(int64_t step) : step_(step) {}
  SaveState(const SaveState&) = delete;
  SaveState& operator=(const SaveState&) = delete;

  int64_t step() const { return step_; }
  bool done() const {
    MutexLock lock(mu_);
    return done_;
  }
  // Blocks until Finish has been called; its status.
  Status Wait() const {
    UniqueLock lock(mu_);
    cv_.wait(lock.native(),
             [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_; });
    return status_;
  }
  // Records the save's result and wakes every waiter.
  // REQUIRES: called once.
  void Finish(Status status) {
    {
      MutexLock lock(mu_);
      done_ = true;
      status_ = std::move(status);
    }
    cv_.notify_all();
  }

 private:
  const int64_t step_;
  mutable Mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata::checkpoint::internal
