// A Storage wrapper that injects faults, for tests only (CMake target
// strata_checkpoint_testing, which no binary links): fail the Nth data
// append, fail durability (DataSink::Finish, the fsync point) or a metadata
// write by name, and "lose power": drop every data stream that was never
// finished. Everything else forwards to the wrapped storage. Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "checkpoint/storage.h"
#include "common/mutex.h"

namespace strata::checkpoint::testing {

class FaultyStorage final : public StorageWrapper {
 public:
  // REQUIRES: target != nullptr.
  explicit FaultyStorage(std::shared_ptr<Storage> target)
      : StorageWrapper(std::move(target)) {}

  // The `n`-th Append from now (0 = the next one) fails with Unavailable;
  // a negative `n` fails none.
  void FailAppendAfter(int n) { appends_left_ = n; }
  // While on, Finish (fsync) of data streams fails with Unavailable.
  void FailFinish(bool on) { fail_finish_ = on; }
  // PutMeta of entries named `name` (e.g. "manifest.pb") fails with
  // Unavailable from now on.
  void FailPutMeta(const std::string& name);
  // While on, data streams never finished read as lost (DataLoss):
  // a simulated power loss.
  void DropUnfinished(bool on) { drop_unfinished_ = on; }

  StatusOr<std::unique_ptr<DataSink>> CreateData(
      int64_t step, const std::string& name) override;
  Status ReadData(int64_t step, const std::string& name, uint64_t offset,
                  void* buf, size_t n) override;
  Status PutMeta(int64_t step, const std::string& name,
                 const std::string& bytes) override;

 private:
  class Sink;

  // False when the armed append failure is due now.
  bool ConsumeAppend() { return appends_left_-- != 0; }
  void MarkFinished(int64_t step, const std::string& name);

  std::atomic<int> appends_left_{-1};
  std::atomic<bool> fail_finish_{false}, drop_unfinished_{false};
  Mutex mu_;
  std::set<std::string> failing_meta_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> finished_ ABSL_GUARDED_BY(mu_);  // "<step>/<name>"
};

}  // namespace strata::checkpoint::testing
