#include "comm/abortable_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace strata::comm {

Status AbortableStore::Aborted() const {
  return absl::AbortedError(
      "store aborted: an in-place restart abandoned this generation");
}

Status AbortableStore::Set(const std::string& key, const std::string& value) {
  if (aborted()) return Aborted();
  return base_->Set(key, value);
}

StatusOr<int64_t> AbortableStore::Add(const std::string& key, int64_t delta) {
  if (aborted()) return Aborted();
  return base_->Add(key, delta);
}

StatusOr<bool> AbortableStore::Check(const std::string& key) {
  if (aborted()) return Aborted();
  return base_->Check(key);
}

Status AbortableStore::Delete(const std::string& key) {
  if (aborted()) return Aborted();
  return base_->Delete(key);
}

StatusOr<std::string> AbortableStore::Get(const std::string& key,
                                          Duration timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (aborted()) return Aborted();
    const auto left = std::chrono::duration_cast<Duration>(
        end - std::chrono::steady_clock::now());
    const Duration slice = std::clamp(left, Duration(0), kSlice);
    auto v = base_->Get(key, slice);
    if (v.ok() || !absl::IsDeadlineExceeded(v.status()) || left <= kSlice) {
      return v;
    }
  }
}

Status AbortableStore::Wait(const std::vector<std::string>& keys,
                            Duration timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (aborted()) return Aborted();
    const auto left = std::chrono::duration_cast<Duration>(
        end - std::chrono::steady_clock::now());
    const Duration slice = std::clamp(left, Duration(0), kSlice);
    Status s = base_->Wait(keys, slice);
    if (s.ok() || !absl::IsDeadlineExceeded(s) || left <= kSlice) return s;
  }
}

}  // namespace strata::comm
