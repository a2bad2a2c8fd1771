#include "common/fork_join.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "common/cpu_relax.h"

namespace strata {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Chunks per thread: enough that a thread which falls behind (preempted,
// or slower) leaves its share to the others, few enough that a claim (one
// compare-exchange) stays negligible next to a chunk of GEMM work.
constexpr int kChunksPerThread = 4;
constexpr int kMaxChunks = 0xFFFF;

uint64_t Claims(uint32_t gen, int chunks, int next) {
  return static_cast<uint64_t>(gen) << 32 |
         static_cast<uint64_t>(chunks) << 16 | static_cast<uint64_t>(next);
}

}  // namespace

ForkJoin::ForkJoin(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) {
    workers_.emplace_back([this] { Work(); });
  }
}

ForkJoin::~ForkJoin() {
  stop_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ForkJoin::Run(int n, absl::FunctionRef<void(int, int)> fn) {
  if (workers_.empty() || n <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  const int chunks = std::min({n, kChunksPerThread * threads(), kMaxChunks});
  fn_ = &fn;
  n_ = n;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  claims_.store(Claims(gen, chunks, 0), std::memory_order_release);
  generation_.store(gen, std::memory_order_release);
  generation_.notify_all();
  RunChunks(gen);
  // Chunks claimed by workers may still be running.
  for (int polls = 0; done_.load(std::memory_order_acquire) < chunks;) {
    CpuRelax();
    if (++polls % 1024 == 0) sched_yield();  // a worker may want our core
  }
  fn_ = nullptr;
}

void ForkJoin::RunChunks(uint32_t gen) {
  uint64_t c = claims_.load(std::memory_order_acquire);
  for (;;) {
    const int chunks = static_cast<int>(c >> 16 & 0xFFFF),
              next = static_cast<int>(c & 0xFFFF);
    if (static_cast<uint32_t>(c >> 32) != gen || next >= chunks) return;
    if (!claims_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
      continue;
    }
    // Claimed: run `gen` cannot end before this chunk is done, so its
    // fn_ and n_ (published before claims_) hold until then.
    const int n = n_;
    const int begin = static_cast<int>(int64_t{n} * next / chunks),
              end = static_cast<int>(int64_t{n} * (next + 1) / chunks);
    (*fn_)(begin, end);
    done_.fetch_add(1, std::memory_order_release);
    c = claims_.load(std::memory_order_acquire);
  }
}

void ForkJoin::Work() {
  uint32_t seen = 0;
  for (;;) {
    // Spin, then sleep, until the generation moves on.
    const int64_t spin_until = NowNs() + kSpinNs;
    uint32_t now = generation_.load(std::memory_order_acquire);
    for (int polls = 0; now == seen;
         now = generation_.load(std::memory_order_acquire)) {
      if (++polls % 64 == 0 && NowNs() > spin_until) {
        generation_.wait(seen, std::memory_order_acquire);
      } else {
        CpuRelax();
      }
    }
    seen = now;
    if (stop_.load(std::memory_order_relaxed)) return;
    RunChunks(now);
  }
}

}  // namespace strata
