#include "observe/published.h"

#include <chrono>

namespace strata::observe {

StatusOr<std::string> Published::Get() {
  std::shared_ptr<const std::function<std::string()>> source;
  {
    UniqueLock lock(mu_);
    const int64_t now = clock_->SteadyNowMs();
    read_ms_ = now;
    if (!has_text_ || now - published_ms_ > options_.max_age_ms) {
      const uint64_t seen = generation_;
      awaited_ = seen;
      ++waiting_;
      cv_.wait_for(lock.native(), std::chrono::milliseconds(options_.wait_ms),
                   [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                     return generation_ != seen;
                   });
      --waiting_;
    }
    if (!has_text_) {
      return absl::UnavailableError(
          "nothing to serve yet: the coordinator's loop did not publish "
          "within " +
          std::to_string(options_.wait_ms) + " ms");
    }
    source = source_;
  }
  return (*source)();  // outside the lock: the owner never waits for it
}

bool Published::Wanted() const {
  MutexLock lock(mu_);
  // A reader waits for a publication newer than the one it saw; once
  // there is one, it is served even if its thread has not woken yet (on a
  // busy machine that can take a while, and each render costs the loop).
  if (waiting_ > 0 && generation_ == awaited_) return true;
  const int64_t now = clock_->SteadyNowMs();
  // Warm: re-rendered only once the current text was read, so a scraper
  // costs one render per scrape, not one per `refresh`.
  return read_ms_ >= 0 && now - read_ms_ <= options_.keep_warm_ms &&
         (!has_text_ || (read_ms_ >= published_ms_ &&
                         now - published_ms_ >= options_.refresh_ms));
}

void Published::Publish(std::string text) {
  Publish([text = std::move(text)] { return text; });
}

void Published::Publish(std::function<std::string()> render) {
  auto source =
      std::make_shared<const std::function<std::string()>>(std::move(render));
  {
    MutexLock lock(mu_);
    source_ = std::move(source);
    has_text_ = true;
    published_ms_ = clock_->SteadyNowMs();
    ++generation_;
  }
  cv_.notify_all();
}

}  // namespace strata::observe
