#include "coordinator/state/state_store.h"

#include <rocksdb/db.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace strata::coordinator {
namespace {
Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  std::string msg = absl::StrCat(what, ": ", s.ToString(), " (", __FILE__, ":",
                                 __LINE__, ")");
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsCorruption()) return absl::DataLossError(msg);
  if (s.IsBusy() || s.IsTryAgain()) return absl::UnavailableError(msg);
  return absl::InternalError(msg);
}
}  // namespace

StatusOr<std::unique_ptr<StateStore>> StateStore::Open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create state dir ", dir, ": ", ec.message()));
  }
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* db = nullptr;
  RETURN_IF_ERROR(FromRocks(rocksdb::DB::Open(options, dir, &db),
                            absl::StrCat("open state db ", dir)));
  return std::unique_ptr<StateStore>(new StateStore(db));
}

StateStore::StateStore(rocksdb::DB* db) : db_(db) {}
StateStore::~StateStore() = default;

Status StateStore::Put(const std::string& key, const std::string& value,
                       bool sync) {
  rocksdb::WriteOptions w;
  w.sync = sync;
  return FromRocks(db_->Put(w, key, value), absl::StrCat("put ", key));
}

Status StateStore::Delete(const std::string& key, bool sync) {
  rocksdb::WriteOptions w;
  w.sync = sync;
  return FromRocks(db_->Delete(w, key), absl::StrCat("delete ", key));
}

StatusOr<std::string> StateStore::Get(const std::string& key) {
  std::string value;
  RETURN_IF_ERROR(FromRocks(db_->Get(rocksdb::ReadOptions(), key, &value),
                            absl::StrCat("get ", key)));
  return value;
}

StatusOr<std::vector<std::pair<std::string, std::string>>> StateStore::Scan(
    const std::string& prefix) {
  std::vector<std::pair<std::string, std::string>> out;
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
       it->Next()) {
    out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  RETURN_IF_ERROR(FromRocks(it->status(), absl::StrCat("scan ", prefix)));
  return out;
}

}  // namespace strata::coordinator
