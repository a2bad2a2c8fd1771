#include "common/fork_join.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

namespace strata {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// [begin, end) of part `i` of `parts` of [0, n).
std::pair<int, int> Range(int n, int parts, int i) {
  const int base = n / parts, extra = n % parts;
  const int begin = i * base + std::min(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

}  // namespace

ForkJoin::ForkJoin(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) {
    workers_.emplace_back([this, i] { Work(i); });
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
  fn_ = &fn;
  n_ = n;
  done_.store(0, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  const auto [begin, end] = Range(n, threads(), 0);
  if (begin < end) fn(begin, end);
  // The workers run on the other cores; their share takes as long as ours.
  const int workers = static_cast<int>(workers_.size());
  for (int polls = 0; done_.load(std::memory_order_acquire) < workers;) {
    CpuRelax();
    if (++polls % 1024 == 0) sched_yield();  // a worker may want our core
  }
  fn_ = nullptr;
}

void ForkJoin::Work(int index) {
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
    const auto [begin, end] = Range(n_, threads(), index);
    if (begin < end) (*fn_)(begin, end);
    done_.fetch_add(1, std::memory_order_release);
  }
}

}  // namespace strata
