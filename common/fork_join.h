// A fixed team of threads that splits one loop among them, the caller
// being one of them: the intra-op parallelism of strata's GEMM kernels
// (common/panel_gemm.h), in the manner of an OpenMP parallel-for with a
// static schedule or PyTorch's intra-op thread pool.
//
// Contract: Run() is called by one thread at a time (the team's owner),
// is not reentrant, and returns when every range has run. Between runs a
// worker spins for kSpinNs, then sleeps on a futex (std::atomic::wait):
// GEMMs of one layer follow each other within microseconds, and a worker
// that slept costs a wake-up (10-100 us on the 2-core VM, docs/comm.md
// "Waiting"); the same two-phase rule as the shm transport's waits.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace strata {

class ForkJoin {
 public:
  // A team of `threads` (>= 1): the caller and threads - 1 workers.
  explicit ForkJoin(int threads);
  ~ForkJoin();
  ForkJoin(const ForkJoin&) = delete;
  ForkJoin& operator=(const ForkJoin&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // fn(begin, end) on threads() contiguous ranges of [0, n) of sizes
  // differing by at most one (thread 0, the caller, takes the first);
  // ranges that would be empty are not run.
  void Run(int n, absl::FunctionRef<void(int, int)> fn);

 private:
  static constexpr int64_t kSpinNs = 50'000;
  void Work(int index);

  std::vector<std::thread> workers_;
  // The current job; written by the caller before it bumps generation_.
  const absl::FunctionRef<void(int, int)>* fn_ = nullptr;
  int n_ = 0;
  std::atomic<uint32_t> generation_{0};  // bumped per Run (and to stop)
  std::atomic<int> done_{0};             // workers finished this Run
  std::atomic<bool> stop_{false};
};

}  // namespace strata
