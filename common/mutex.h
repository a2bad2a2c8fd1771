// strata::Mutex: std::mutex with clang's thread-safety annotations
// (absl/base/thread_annotations.h), so members declared
// ABSL_GUARDED_BY(mu_) and functions declared
// ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) are checked by -Wthread-safety
// (tests/toolchain/thread_safety_test.py runs that analysis in the suite).
// libstdc++'s std::mutex carries no annotations, so the analysis cannot
// see it; these wrappers add them and nothing else: the same std::mutex,
// and condition variables stay std::condition_variable (UniqueLock::native()).
//
//   Mutex mu_;
//   int n_ ABSL_GUARDED_BY(mu_);
//   { MutexLock lock(mu_); ++n_; }                       // std::lock_guard
//   UniqueLock lock(mu_);                                 // std::unique_lock
//   cv_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
//     return n_ > 0;
//   });
//
// A condition variable's predicate is a lambda, which the analysis checks
// on its own: it is annotated ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) as above.
// GCC ignores the annotations.
#pragma once

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace strata {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return mu_.try_lock();
  }

  // The std::mutex itself, for std::unique_lock (UniqueLock).
  std::mutex& native() ABSL_LOCK_RETURNED(this) { return mu_; }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope (std::lock_guard).
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_.lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// Holds `mu` for its scope unless unlocked (std::unique_lock); native() is
// what std::condition_variable waits on.
class ABSL_SCOPED_LOCKABLE UniqueLock {
 public:
  explicit UniqueLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : lock_(mu.native()) {}
  ~UniqueLock() ABSL_UNLOCK_FUNCTION() {}
  UniqueLock(const UniqueLock&) = delete;
  UniqueLock& operator=(const UniqueLock&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { lock_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { lock_.unlock(); }

  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace strata
