// Helpers for collective tests: ranks as threads over in-process transports.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "comm/process_group.h"

namespace strata::comm::testing {

// Runs fn(rank, group) on `n` threads, one ProcessGroup each.
inline void RunRanks(int n, const std::function<void(int, Backend&)>& fn,
                     GroupOptions options = {}) {
  auto transports = NewInProcessTransports(n);
  std::vector<std::unique_ptr<ProcessGroup>> groups;
  for (auto& t : transports) {
    groups.push_back(std::make_unique<ProcessGroup>(std::move(t), options));
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { fn(r, *groups[r]); });
  }
  for (auto& t : threads) t.join();
}

// Deterministic small-integer data, exact in every dtype (sums of up to 8
// ranks stay below 256, bf16's exact-integer limit).
inline double Value(int rank, size_t i) {
  return static_cast<double>((rank + 1) * static_cast<int>(i % 7 + 1));
}

}  // namespace strata::comm::testing
