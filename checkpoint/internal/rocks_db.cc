#include "checkpoint/internal/rocks_db.h"

#include "checkpoint/internal/file_util.h"
#include "common/logging.h"
#include "common/rocksdb_log.h"

namespace strata::checkpoint::internal {
Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  const std::string msg = what + ": " + s.ToString();
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsCorruption()) return absl::DataLossError(msg);
  if (s.IsNoSpace() || s.subcode() == rocksdb::Status::kSpaceLimit)
    return absl::ResourceExhaustedError(msg);
  return absl::UnavailableError(msg);
}

rocksdb::Options SafeOptions(rocksdb::Options o) {
  return FailSafeRocksDbOptions(std::move(o), GetLogger("ROCKSDB"));
}

StatusOr<std::unique_ptr<RocksDb>> RocksDb::Open(const rocksdb::Options& o,
                                                 const std::string& path) {
  // RocksDB logs an error when it creates a missing directory itself.
  if (o.create_if_missing) RETURN_IF_ERROR(MakeDirs(path));
  std::unique_ptr<RocksDb> db(new RocksDb(SafeOptions(o), path));
  std::lock_guard<std::mutex> lock(db->mu_);
  RETURN_IF_ERROR(db->OpenLocked());
  return db;
}

Status RocksDb::OpenLocked() {
  rocksdb::DB* raw = nullptr;
  RETURN_IF_ERROR(FromRocks(rocksdb::DB::Open(options_, path_, &raw),
                            "open rocksdb " + path_));
  db_.reset(raw);
  return absl::OkStatus();
}

StatusOr<std::shared_ptr<rocksdb::DB>> RocksDb::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  if (db_ == nullptr) {
    RETURN_IF_ERROR(OpenLocked());
    GetLogger("CKPT")->info("reopened rocksdb {} after a failed write", path_);
  }
  return db_;
}

Status RocksDb::Write(rocksdb::WriteBatch& batch, bool sync,
                      const std::string& what) {
  ASSIGN_OR_RETURN(std::shared_ptr<rocksdb::DB> db, Get());
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  Status st = FromRocks(db->Write(wo, &batch), what);
  if (!st.ok()) Broken(db);
  return st;
}

Status RocksDb::Flush(const std::string& what) {
  ASSIGN_OR_RETURN(std::shared_ptr<rocksdb::DB> db, Get());
  Status st = FromRocks(db->Flush(rocksdb::FlushOptions()), what);
  if (!st.ok()) Broken(db);
  return st;
}

void RocksDb::Broken(const std::shared_ptr<rocksdb::DB>& db) {
  std::lock_guard<std::mutex> lock(mu_);
  if (db_ == db) db_.reset();  // closed once the last user lets go
}

}  // namespace strata::checkpoint::internal
