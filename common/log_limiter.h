// Rate limit for log lines a remote party can cause: bad frames, refused
// handshakes, dropped connections, a peer retried while unreachable. Without
// it 50 garbage connections to the coordinator wrote thousands of lines.
//
// Lines are grouped by key = (peer, category): peer is who caused them
// ("127.0.0.1", a CURVE key, an endpoint), category what happened ("bad
// frame", "unreachable"). Per key, the first `burst` lines of each
// `interval_ms` window are logged; later ones are only counted. When the
// window has ended, the count is logged as one line
//   suppressed K similar messages from PEER (CATEGORY) in S s
// by the next line about that key or by Flush() (call it periodically, e.g.
// from the event loop's tick, so a flood that stopped is still summarized).
//
// Memory is bounded: at most `max_keys` keys are tracked; a new key beyond
// that first evicts keys whose window has ended (logging their summaries),
// else is counted under peer "other peers", so a flood from many addresses
// still logs at most (max_keys + 1) x burst lines per interval.
//
// Time is the injected Clock's steady reading (SystemClock if none).
// Thread-safe: one mutex; formatting and logging happen outside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/logging.h"
#include "common/mutex.h"

namespace strata {

struct LogLimiterOptions {
  int burst = 5;                 // lines per key and window
  int64_t interval_ms = 60'000;  // window length
  size_t max_keys = 256;
};

class LogLimiter {
 public:
  // `logger` receives the lines; `clock` (nullable: SystemClock) must
  // outlive the limiter.
  explicit LogLimiter(Logger logger, LogLimiterOptions options = {},
                      const Clock* clock = nullptr);
  LogLimiter(const LogLimiter&) = delete;
  LogLimiter& operator=(const LogLimiter&) = delete;

  // Logs fmt::format(format, args...) at `level` unless the key's quota for
  // this window is used up (then the message is not even formatted).
  // Returns true if the line was logged. A level the logger drops is not
  // counted.
  template <typename... Args>
  bool Log(spdlog::level::level_enum level, std::string_view peer,
           std::string_view category, fmt::format_string<Args...> format,
           Args&&... args) {
    if (!logger_->should_log(level)) return false;
    if (!Admit(level, peer, category)) return false;
    logger_->log(level, fmt::format(format, std::forward<Args>(args)...));
    return true;
  }
  template <typename... Args>
  bool Warn(std::string_view peer, std::string_view category,
            fmt::format_string<Args...> format, Args&&... args) {
    return Log(spdlog::level::warn, peer, category, format,
               std::forward<Args>(args)...);
  }

  // Logs the summaries of the windows that have ended and forgets those keys.
  void Flush();
  // Logs every pending summary, ended or not, and forgets every key (at
  // shutdown, so nothing suppressed goes unmentioned).
  void FlushAll();

  // Lines refused so far (all keys).
  uint64_t suppressed_total() const;

 private:
  struct Window {
    int64_t start_ms = 0;
    int logged = 0;
    uint64_t suppressed = 0;
    spdlog::level::level_enum level = spdlog::level::warn;
  };
  struct Summary {
    std::string peer, category;
    uint64_t count;
    int64_t window_ms;  // how long they were counted
    spdlog::level::level_enum level;
  };
  using Key = std::pair<std::string, std::string>;  // (peer, category)

  // Decides under the mutex; logs due summaries outside it.
  bool Admit(spdlog::level::level_enum level, std::string_view peer,
             std::string_view category);
  int64_t NowMs() const;
  // Erases the windows that have ended at `now` (every window if `all`),
  // moving those with suppressed lines to `out`.
  void TakeEnded(int64_t now, bool all, std::vector<Summary>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LogSummaries(const std::vector<Summary>& summaries);

  Logger logger_;
  const LogLimiterOptions options_;
  const Clock* clock_;
  mutable Mutex mu_;
  std::map<Key, Window> windows_ ABSL_GUARDED_BY(mu_);
  uint64_t suppressed_total_ ABSL_GUARDED_BY(mu_) = 0;
};

// protobuf logs some parse errors of bad input itself, to stderr, one line
// per frame (invalid UTF-8 in a string field of a frame a peer sent): routes
// them to `logger` at warn through a process-wide LogLimiter (category
// "protobuf", peer "parser"). Call once at the start of main(), before
// threads (protobuf's handler is a plain global).
void RouteProtobufLogs(Logger logger);

}  // namespace strata
