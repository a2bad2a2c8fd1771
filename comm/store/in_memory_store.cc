// In-memory Store: one map guarded by a mutex, waiters on a condition
// variable. Thread-safe; shared by ranks that are threads of one process.
#include <condition_variable>
#include <map>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "comm/store.h"
#include "common/mutex.h"

namespace strata::comm {
namespace {

class InMemoryStore final : public Store {
 public:
  Status Set(const std::string& key, const std::string& value) override {
    {
      MutexLock lock(mu_);
      data_[key] = value;
    }
    cv_.notify_all();
    return absl::OkStatus();
  }

  StatusOr<std::string> Get(const std::string& key, Duration timeout) override {
    UniqueLock lock(mu_);
    if (!cv_.wait_for(lock.native(), timeout,
                      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                        return data_.count(key) > 0;
                      })) {
      return absl::DeadlineExceededError("store: timed out waiting for key '" +
                                         key + "'");
    }
    return data_[key];
  }

  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    int64_t value = 0;
    {
      MutexLock lock(mu_);
      auto it = data_.find(key);
      if (it != data_.end() && !absl::SimpleAtoi(it->second, &value)) {
        return absl::FailedPreconditionError("store: key '" + key +
                                             "' holds a non-integer value");
      }
      value += delta;
      data_[key] = std::to_string(value);
    }
    cv_.notify_all();
    return value;
  }

  Status Wait(const std::vector<std::string>& keys, Duration timeout) override {
    UniqueLock lock(mu_);
    auto all_present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& k : keys) {
        if (data_.count(k) == 0) return false;
      }
      return true;
    };
    if (!cv_.wait_for(lock.native(), timeout, all_present)) {
      std::vector<std::string> missing;
      for (const auto& k : keys) {
        if (data_.count(k) == 0) missing.push_back(k);
      }
      return absl::DeadlineExceededError("store: timed out waiting for keys: " +
                                         absl::StrJoin(missing, ", "));
    }
    return absl::OkStatus();
  }

  StatusOr<bool> Check(const std::string& key) override {
    MutexLock lock(mu_);
    return data_.count(key) > 0;
  }

  Status Delete(const std::string& key) override {
    MutexLock lock(mu_);
    data_.erase(key);
    return absl::OkStatus();
  }

 private:
  Mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_ ABSL_GUARDED_BY(mu_);
};

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base)
      : prefix_(std::move(prefix) + "/"), base_(std::move(base)) {}

  Status Set(const std::string& key, const std::string& value) override {
    return base_->Set(prefix_ + key, value);
  }
  StatusOr<std::string> Get(const std::string& key, Duration timeout) override {
    return base_->Get(prefix_ + key, timeout);
  }
  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    return base_->Add(prefix_ + key, delta);
  }
  Status Wait(const std::vector<std::string>& keys, Duration timeout) override {
    std::vector<std::string> full;
    full.reserve(keys.size());
    for (const auto& k : keys) full.push_back(prefix_ + k);
    return base_->Wait(full, timeout);
  }
  StatusOr<bool> Check(const std::string& key) override {
    return base_->Check(prefix_ + key);
  }
  Status Delete(const std::string& key) override {
    return base_->Delete(prefix_ + key);
  }

 private:
  const std::string prefix_;
  const std::shared_ptr<Store> base_;
};

}  // namespace

std::shared_ptr<Store> NewInMemoryStore() {
  return std::make_shared<InMemoryStore>();
}

std::shared_ptr<Store> NewPrefixStore(std::string prefix,
                                      std::shared_ptr<Store> base) {
  return std::make_shared<PrefixStore>(std::move(prefix), std::move(base));
}

}  // namespace strata::comm
