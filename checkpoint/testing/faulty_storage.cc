#include "checkpoint/testing/faulty_storage.h"

#include "absl/strings/str_cat.h"

namespace strata::checkpoint::testing {

// A data stream of a FaultyStorage: consults its owner's armed faults.
class FaultyStorage::Sink final : public DataSink {
 public:
  Sink(FaultyStorage* owner, std::unique_ptr<DataSink> target, int64_t step,
       std::string name)
      : owner_(owner),
        target_(std::move(target)),
        step_(step),
        name_(std::move(name)) {}

  Status Append(const char* data, size_t n) override {
    if (!owner_->ConsumeAppend())
      return absl::UnavailableError("injected write failure");
    return target_->Append(data, n);
  }
  Status Finish() override {
    if (owner_->fail_finish_)
      return absl::UnavailableError("injected fsync failure");
    RETURN_IF_ERROR(target_->Finish());
    owner_->MarkFinished(step_, name_);
    return absl::OkStatus();
  }
  uint64_t size() const override { return target_->size(); }

 private:
  FaultyStorage* const owner_;
  const std::unique_ptr<DataSink> target_;
  const int64_t step_;
  const std::string name_;
};

void FaultyStorage::FailPutMeta(const std::string& name) {
  MutexLock lock(mu_);
  failing_meta_.insert(name);
}

void FaultyStorage::MarkFinished(int64_t step, const std::string& name) {
  MutexLock lock(mu_);
  finished_.insert(absl::StrCat(step, "/", name));
}

StatusOr<std::unique_ptr<DataSink>> FaultyStorage::CreateData(
    int64_t step, const std::string& name) {
  ASSIGN_OR_RETURN(auto sink, StorageWrapper::CreateData(step, name));
  return std::unique_ptr<DataSink>(
      std::make_unique<Sink>(this, std::move(sink), step, name));
}

Status FaultyStorage::ReadData(int64_t step, const std::string& name,
                               uint64_t offset, void* buf, size_t n) {
  if (drop_unfinished_) {
    MutexLock lock(mu_);
    if (!finished_.count(absl::StrCat(step, "/", name))) {
      return absl::DataLossError(Where(step, name) +
                                 " was lost (never made durable)");
    }
  }
  return StorageWrapper::ReadData(step, name, offset, buf, n);
}

Status FaultyStorage::PutMeta(int64_t step, const std::string& name,
                              const std::string& bytes) {
  {
    MutexLock lock(mu_);
    if (failing_meta_.count(name))
      return absl::UnavailableError("injected failure writing " + name);
  }
  return StorageWrapper::PutMeta(step, name, bytes);
}

}  // namespace strata::checkpoint::testing
