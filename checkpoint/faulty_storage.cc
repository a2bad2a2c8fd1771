#include "checkpoint/faulty_storage.h"

#include "absl/strings/str_cat.h"

namespace strata::checkpoint {
namespace {

class FaultySink final : public DataSink {
 public:
  FaultySink(FaultyStorage* owner, std::unique_ptr<DataSink> base, int64_t step,
             std::string name)
      : owner_(owner),
        base_(std::move(base)),
        step_(step),
        name_(std::move(name)) {}
  Status Append(const char* data, size_t n) override {
    if (!owner_->ConsumeAppend())
      return absl::UnavailableError("injected write failure");
    return base_->Append(data, n);
  }
  Status Finish() override {
    if (owner_->fail_finish())
      return absl::UnavailableError("injected fsync failure");
    RETURN_IF_ERROR(base_->Finish());
    owner_->MarkFinished(step_, name_);
    return absl::OkStatus();
  }
  uint64_t size() const override { return base_->size(); }

 private:
  FaultyStorage* owner_;
  std::unique_ptr<DataSink> base_;
  int64_t step_;
  std::string name_;
};

}  // namespace

void FaultyStorage::FailPutMeta(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  failing_meta_.insert(name);
}

void FaultyStorage::MarkFinished(int64_t step, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  finished_.insert(absl::StrCat(step, "/", name));
}

StatusOr<std::unique_ptr<DataSink>> FaultyStorage::CreateData(
    int64_t step, const std::string& name) {
  ASSIGN_OR_RETURN(auto sink, base_->CreateData(step, name));
  return std::unique_ptr<DataSink>(
      std::make_unique<FaultySink>(this, std::move(sink), step, name));
}

Status FaultyStorage::ReadData(int64_t step, const std::string& name,
                               uint64_t offset, void* buf, size_t n) {
  if (drop_unfinished_) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!finished_.count(absl::StrCat(step, "/", name))) {
      return absl::DataLossError(Where(step, name) +
                                 " was lost (never made durable)");
    }
  }
  return base_->ReadData(step, name, offset, buf, n);
}

Status FaultyStorage::PutMeta(int64_t step, const std::string& name,
                              const std::string& bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failing_meta_.count(name))
      return absl::UnavailableError("injected failure writing " + name);
  }
  return base_->PutMeta(step, name, bytes);
}

}  // namespace strata::checkpoint
