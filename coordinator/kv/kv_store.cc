#include "coordinator/kv/kv_store.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace strata::coordinator {
namespace {
constexpr char kPrefix[] = "kv/";
}

KvStore::KvStore(StateStore* store) : store_(store) {}

Status KvStore::Recover() {
  ASSIGN_OR_RETURN(auto rows, store_->Scan(kPrefix));
  for (auto& [key, value] : rows) {
    total_bytes_ += key.size() - (sizeof(kPrefix) - 1) + value.size();
    values_[key.substr(sizeof(kPrefix) - 1)] = std::move(value);
  }
  return absl::OkStatus();
}

Status KvStore::Resync() {
  ASSIGN_OR_RETURN(auto rows, store_->Scan(kPrefix));
  std::vector<StateStore::Mutation> writes;
  for (const auto& [key, value] : rows) {
    if (!values_.contains(key.substr(sizeof(kPrefix) - 1))) {
      writes.emplace_back(key, std::nullopt);
    }
  }
  for (const auto& [key, value] : values_)
    writes.emplace_back(kPrefix + key, value);
  return store_->Write(writes, /*sync=*/false);
}

Status KvStore::Set(const std::string& key, const std::string& value) {
  if (key.empty() || key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kv: key must be 1..", kMaxKeyBytes, " bytes, got ", key.size()));
  }
  if (value.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv: value of '", key, "' is ", value.size(),
                     " bytes; the limit is ", kMaxValueBytes));
  }
  auto it = values_.find(key);
  const size_t old_bytes =
      it == values_.end() ? 0 : key.size() + it->second.size();
  const size_t new_total = total_bytes_ - old_bytes + key.size() + value.size();
  if (new_total > kMaxTotalBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("kv: storing '", key, "' would make the store ", new_total,
                     " bytes; the limit is ", kMaxTotalBytes));
  }
  RETURN_IF_ERROR(store_->Put(kPrefix + key, value, /*sync=*/false));
  values_[key] = value;
  total_bytes_ = new_total;
  return absl::OkStatus();
}

StatusOr<std::string> KvStore::Get(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) {
    return absl::NotFoundError(absl::StrCat("kv: key '", key, "' not set"));
  }
  return it->second;
}

StatusOr<int64_t> KvStore::Add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  auto it = values_.find(key);
  if (it != values_.end() && !absl::SimpleAtoi(it->second, &value)) {
    return absl::FailedPreconditionError(
        absl::StrCat("kv: key '", key, "' holds a non-integer value"));
  }
  value += delta;
  RETURN_IF_ERROR(Set(key, absl::StrCat(value)));
  return value;
}

std::vector<std::string> KvStore::Missing(
    const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const auto& k : keys) {
    if (!values_.contains(k)) missing.push_back(k);
  }
  return missing;
}

Status KvStore::Delete(const std::string& key) {
  RETURN_IF_ERROR(store_->Delete(kPrefix + key, /*sync=*/false));
  auto it = values_.find(key);
  if (it != values_.end()) {
    total_bytes_ -= key.size() + it->second.size();
    values_.erase(it);
  }
  return absl::OkStatus();
}

Status KvStore::DeletePrefix(const std::string& prefix) {
  std::vector<StateStore::Mutation> deletes;
  auto begin = values_.lower_bound(prefix);
  auto end = begin;
  for (; end != values_.end() && end->first.starts_with(prefix); ++end) {
    deletes.emplace_back(kPrefix + end->first, std::nullopt);
  }
  RETURN_IF_ERROR(store_->Write(deletes, /*sync=*/false));
  for (auto it = begin; it != end; ++it) {
    total_bytes_ -= it->first.size() + it->second.size();
  }
  values_.erase(begin, end);
  return absl::OkStatus();
}

}  // namespace strata::coordinator
