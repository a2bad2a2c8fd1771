// A Storage wrapper that injects faults, for tests: fail the Nth data
// append, fail durability (DataSink::Finish, the fsync point) or a metadata
// write by name, and "lose power": drop every data stream that was not
// finished. Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "checkpoint/storage.h"

namespace strata::checkpoint {

class FaultyStorage final : public Storage {
 public:
  explicit FaultyStorage(std::shared_ptr<Storage> base)
      : base_(std::move(base)) {}

  // The `n`-th Append from now (0 = the next one) fails with Unavailable.
  void FailAppendAfter(int n) { appends_left_ = n; }
  // Finish (fsync) of data streams fails.
  void FailFinish(bool on) { fail_finish_ = on; }
  // PutMeta of entries named `name` fails (e.g. "manifest.pb").
  void FailPutMeta(const std::string& name);
  // Simulated power loss: data streams not finished read as missing.
  void DropUnfinished(bool on) { drop_unfinished_ = on; }

  StatusOr<std::unique_ptr<DataSink>> CreateData(
      int64_t step, const std::string& name) override;
  Status ReadData(int64_t step, const std::string& name, uint64_t offset,
                  void* buf, size_t n) override;
  Status PutMeta(int64_t step, const std::string& name,
                 const std::string& bytes) override;
  StatusOr<std::string> GetMeta(int64_t step,
                                const std::string& name) override {
    return base_->GetMeta(step, name);
  }
  StatusOr<std::vector<int64_t>> Steps() override { return base_->Steps(); }
  Status RemoveStep(int64_t step) override { return base_->RemoveStep(step); }
  Status CollectGarbage(int64_t current) override {
    return base_->CollectGarbage(current);
  }
  std::string Where(int64_t step, const std::string& name) const override {
    return base_->Where(step, name);
  }

  // Called by the sinks.
  bool ConsumeAppend() { return appends_left_-- != 0; }
  bool fail_finish() const { return fail_finish_; }
  void MarkFinished(int64_t step, const std::string& name);

 private:
  std::shared_ptr<Storage> base_;
  std::atomic<int> appends_left_{-1};
  std::atomic<bool> fail_finish_{false}, drop_unfinished_{false};
  std::mutex mu_;
  std::set<std::string> failing_meta_;  // guarded by mu_
  std::set<std::string> finished_;      // "<step>/<name>", guarded by mu_
};

}  // namespace strata::checkpoint
