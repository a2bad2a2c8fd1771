// A text one thread renders (the coordinator's event loop: /metrics, the
// dashboard's JSON) and other threads serve (the HTTP handlers), without the
// servers ever touching the owner's state: the owner publishes a text, or a
// snapshot its readers render.
//
// The owner renders only when it is worth it: a reader is waiting, or
// someone read the current text, within the last `keep_warm`, and it is
// older than `refresh` — so a coordinator nobody scrapes renders nothing,
// one scraped every second renders once per scrape and serves a text at
// most a scrape interval + one tick old at once. A reader whose text is older than `max_age` waits up to `wait` for a
// fresh one, then takes what there is. Thread-safe; time from the injected
// Clock's steady reading (the waits themselves use real time).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"

namespace strata::observe {

struct PublishedOptions {
  int64_t refresh_ms = 500;       // re-render a warm text this often
  int64_t keep_warm_ms = 60'000;  // ... while read this recently
  int64_t max_age_ms = 2'000;     // older: the reader waits for a fresh one
  int64_t wait_ms = 1'000;        // ... at most this long
};

class Published {
 public:
  Published(const Clock* clock, PublishedOptions options = {})
      : clock_(clock), options_(options) {}

  // Reader. The latest text, fresh as described above; Unavailable when the
  // owner has published nothing within the wait (e.g. its loop is stuck).
  StatusOr<std::string> Get();

  // Owner: whether to render now.
  bool Wanted() const;
  // Owner: the new text; wakes waiting readers.
  void Publish(std::string text);
  // Owner: a new snapshot that each reader renders on its own thread, so
  // the owner's loop pays for taking the snapshot only (the /metrics
  // exposition of thousands of workers takes milliseconds to write, and
  // heartbeats would wait for it). `render` must own what it reads.
  void Publish(std::function<std::string()> render);

 private:
  const Clock* clock_;
  const PublishedOptions options_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  // The latest publication: a text or a snapshot's renderer.
  std::shared_ptr<const std::function<std::string()>> source_
      ABSL_GUARDED_BY(mu_);
  bool has_text_ ABSL_GUARDED_BY(mu_) = false;
  int64_t published_ms_ ABSL_GUARDED_BY(mu_) = 0;  // steady
  int64_t read_ms_ ABSL_GUARDED_BY(mu_) = -1;      // steady; -1: never read
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  // The generation the newest waiting reader saw: it waits for a later one.
  uint64_t awaited_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace strata::observe
