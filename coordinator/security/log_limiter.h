// Rate limit for security log lines: a rejected peer retries every ~100 ms
// (libzmq ZMQ_RECONNECT_IVL), and logging each attempt would flood the log.
// Allow() says yes the first time a key is seen and then at most once per
// `period`, reporting how many were suppressed in between. Memory is bounded:
// past `max_keys` distinct keys the table is cleared. Not thread-safe; each
// owner (the ZAP thread, the event loop) has its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace strata::coordinator {

class LogLimiter {
 public:
  using SteadyClock = std::chrono::steady_clock;

  explicit LogLimiter(SteadyClock::duration period = std::chrono::seconds(60),
                      size_t max_keys = 4096)
      : period_(period), max_keys_(max_keys) {}

  // True if a line about `key` may be logged at `now`; then `*suppressed` is
  // the number of refused calls for `key` since the last allowed one.
  bool Allow(const std::string& key, SteadyClock::time_point now,
             uint64_t* suppressed) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      if (entries_.size() >= max_keys_) entries_.clear();
      entries_.emplace(key, Entry{now, 0});
      *suppressed = 0;
      return true;
    }
    if (now - it->second.last < period_) {
      ++it->second.suppressed;
      return false;
    }
    *suppressed = it->second.suppressed;
    it->second = Entry{now, 0};
    return true;
  }

 private:
  struct Entry {
    SteadyClock::time_point last;
    uint64_t suppressed;
  };
  SteadyClock::duration period_;
  size_t max_keys_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace strata::coordinator
