// A Store whose blocking calls can be ended from another thread: what an
// in-place restart (docs/fault.md "In-place restart") needs so that a rank
// blocked in a store wait of the generation that is being abandoned (a
// checkpoint commit waiting for a dead rank's vote, a transport waiting for
// a peer's address) returns at once instead of at its timeout.
//
// Get and Wait are cut into slices of at most kSlice, checking the abort
// flag between them: an abort ends a wait within kSlice plus one store
// round trip. After Abort() every call returns Aborted without touching
// the base store. Thread-safe as the base store is.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "comm/store.h"

namespace strata::comm {

class AbortableStore final : public Store {
 public:
  static constexpr Duration kSlice{100};

  explicit AbortableStore(std::shared_ptr<Store> base)
      : base_(std::move(base)) {}

  void Abort() { aborted_.store(true, std::memory_order_release); }
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  Status Set(const std::string& key, const std::string& value) override;
  StatusOr<std::string> Get(const std::string& key, Duration timeout) override;
  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  Status Wait(const std::vector<std::string>& keys, Duration timeout) override;
  StatusOr<bool> Check(const std::string& key) override;
  Status Delete(const std::string& key) override;

 private:
  Status Aborted() const;
  std::shared_ptr<Store> base_;
  std::atomic<bool> aborted_{false};
};

}  // namespace strata::comm
