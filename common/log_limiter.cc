#include "common/log_limiter.h"

#include "google/protobuf/stubs/logging.h"

namespace strata {
namespace {
const SystemClock kSystemClock;
constexpr char kOtherPeers[] = "other peers";
}  // namespace

LogLimiter::LogLimiter(Logger logger, LogLimiterOptions options,
                       const Clock* clock)
    : logger_(std::move(logger)),
      options_(options),
      clock_(clock != nullptr ? clock : &kSystemClock) {}

int64_t LogLimiter::NowMs() const { return clock_->SteadyNowMs(); }

bool LogLimiter::Admit(spdlog::level::level_enum level, std::string_view peer,
                       std::string_view category) {
  std::vector<Summary> due;
  bool allowed = false;
  {
    MutexLock lock(mu_);
    const int64_t now = NowMs();
    Key key{std::string(peer), std::string(category)};
    if (!windows_.contains(key) && windows_.size() >= options_.max_keys) {
      TakeEnded(now, /*all=*/false, &due);
      if (windows_.size() >= options_.max_keys) key.first = kOtherPeers;
    }
    auto it = windows_.find(key);
    if (it != windows_.end() &&
        now - it->second.start_ms >= options_.interval_ms) {
      if (it->second.suppressed > 0) {
        due.push_back({key.first, key.second, it->second.suppressed,
                       now - it->second.start_ms, it->second.level});
      }
      windows_.erase(it);
      it = windows_.end();
    }
    if (it == windows_.end()) {
      it = windows_.emplace(key, Window{.start_ms = now, .level = level}).first;
    }
    Window& w = it->second;
    allowed = w.logged < options_.burst;
    if (allowed) {
      ++w.logged;
    } else {
      ++w.suppressed;
      ++suppressed_total_;
    }
  }
  LogSummaries(due);
  return allowed;
}

void LogLimiter::TakeEnded(int64_t now, bool all, std::vector<Summary>* out) {
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (!all && now - it->second.start_ms < options_.interval_ms) {
      ++it;
      continue;
    }
    if (it->second.suppressed > 0) {
      out->push_back({it->first.first, it->first.second, it->second.suppressed,
                      now - it->second.start_ms, it->second.level});
    }
    it = windows_.erase(it);
  }
}

void LogLimiter::Flush() {
  std::vector<Summary> due;
  {
    MutexLock lock(mu_);
    TakeEnded(NowMs(), /*all=*/false, &due);
  }
  LogSummaries(due);
}

void LogLimiter::LogSummaries(const std::vector<Summary>& summaries) {
  for (const auto& s : summaries) {
    logger_->log(s.level, "suppressed {} similar messages from {} ({}) in {} s",
                 s.count, s.peer, s.category, (s.window_ms + 999) / 1000);
  }
}

void LogLimiter::FlushAll() {
  std::vector<Summary> due;
  {
    MutexLock lock(mu_);
    TakeEnded(NowMs(), /*all=*/true, &due);
  }
  LogSummaries(due);
}

uint64_t LogLimiter::suppressed_total() const {
  MutexLock lock(mu_);
  return suppressed_total_;
}

namespace {
LogLimiter* g_protobuf_limiter = nullptr;

void OnProtobufLog(google::protobuf::LogLevel level, const char* file, int line,
                   const std::string& message) {
  if (g_protobuf_limiter == nullptr) return;
  g_protobuf_limiter->Warn("parser", "protobuf", "protobuf: {} ({}:{})",
                           message, file, line);
}
}  // namespace

void RouteProtobufLogs(Logger logger) {
  static LogLimiter limiter(std::move(logger));
  g_protobuf_limiter = &limiter;
  google::protobuf::SetLogHandler(&OnProtobufLog);
}

}  // namespace strata
