// A fixed team of threads that splits one loop among them, the caller
// being one of them: the intra-op parallelism of strata's GEMM kernels
// (common/panel_gemm.h), in the manner of an OpenMP parallel-for with a
// dynamic schedule or PyTorch's intra-op thread pool.
//
// Contract: Run() is called by one thread at a time (the team's owner),
// is not reentrant, and returns when every range has run. [0, n) is cut
// into at most 4 x threads() chunks that the caller and the workers claim
// one at a time, so a worker that is not running (asleep, or waiting for a
// core when ranks x threads outnumber the cores) costs nothing: the
// caller claims its chunks too. Between runs a worker spins for kSpinNs,
// then sleeps on a futex (std::atomic::wait): GEMMs of one layer follow
// each other within microseconds, and a worker that slept costs a wake-up
// (10-100 us, docs/results.md "Choices behind the tuner"); the same two-phase
// rule as the shm transport's waits.
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

  // fn(begin, end) on contiguous chunks of [0, n) that together cover it
  // once, of sizes differing by at most one, each on whichever thread of
  // the team claims it first.
  void Run(int n, absl::FunctionRef<void(int, int)> fn);

 private:
  static constexpr int64_t kSpinNs = 50'000;
  void Work();
  // Runs chunks of run `gen` until none is left.
  void RunChunks(uint32_t gen);

  std::vector<std::thread> workers_;
  // The current run; written by the caller before it publishes claims_.
  const absl::FunctionRef<void(int, int)>* fn_ = nullptr;
  int n_ = 0;
  // Claims of the current run: generation << 32 | chunks << 16 | next
  // chunk. A claim is a compare-exchange that checks the generation, so a
  // worker late from an earlier run cannot claim a chunk of this one.
  std::atomic<uint64_t> claims_{0};
  std::atomic<uint32_t> generation_{0};  // bumped per Run (and to stop)
  std::atomic<int> done_{0};             // chunks finished in this run
  std::atomic<bool> stop_{false};
};

}  // namespace strata
