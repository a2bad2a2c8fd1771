#include "common/rocks_db.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rocksdb_log.h"

namespace strata {

const char* RocksErrnoName(std::string_view rocks_message) {
  for (auto [name, err] : {std::pair{"ENOSPC", ENOSPC},
                           {"EDQUOT", EDQUOT},
                           {"EIO", EIO},
                           {"EROFS", EROFS},
                           {"EACCES", EACCES}}) {
    if (rocks_message.find(std::strerror(err)) != std::string_view::npos)
      return name;
  }
  if (rocks_message.find("No space") != std::string_view::npos) return "ENOSPC";
  return "I/O error";
}

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  const std::string text = s.ToString();
  const std::string msg = absl::StrCat(what, ": ", text);
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsCorruption()) return absl::DataLossError(msg);
  const std::string_view err = RocksErrnoName(text);
  if (s.IsNoSpace() || s.subcode() == rocksdb::Status::kSpaceLimit ||
      err == "ENOSPC" || err == "EDQUOT") {
    return absl::ResourceExhaustedError(msg);
  }
  return absl::UnavailableError(msg);
}

StatusOr<std::unique_ptr<RocksDb>> RocksDb::Open(rocksdb::Options o,
                                                 const std::string& path,
                                                 Logger logger) {
  // RocksDB logs an error when it creates a missing directory itself.
  if (o.create_if_missing) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot create directory ", path, ": ", ec.message()));
    }
  }
  std::unique_ptr<RocksDb> db(
      new RocksDb(FailSafeRocksDbOptions(std::move(o), logger), path, logger));
  MutexLock lock(db->mu_);
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

Status RocksDb::RecoverLocked() {
  if (db_ != nullptr && db_->Resume().ok()) {
    broken_ = false;
    logger_->info("rocksdb {} resumed after a failed write", path_);
    return absl::OkStatus();
  }
  // RocksDB 7.8 does not resume after a failed WAL append (Busy); closing
  // and reopening does. The old instance closes once its last user lets go.
  db_.reset();
  RETURN_IF_ERROR(OpenLocked());
  broken_ = false;
  ++reopens_;
  logger_->info("rocksdb {} reopened after a failed write", path_);
  return absl::OkStatus();
}

StatusOr<std::shared_ptr<rocksdb::DB>> RocksDb::Get() {
  MutexLock lock(mu_);
  if (broken_ || db_ == nullptr) RETURN_IF_ERROR(RecoverLocked());
  return db_;
}

StatusOr<std::shared_ptr<rocksdb::DB>> RocksDb::GetForRead() {
  MutexLock lock(mu_);
  if (db_ == nullptr) RETURN_IF_ERROR(RecoverLocked());
  return db_;
}

Status RocksDb::Write(rocksdb::WriteBatch& batch, bool sync,
                      const std::string& what) {
  ASSIGN_OR_RETURN(std::shared_ptr<rocksdb::DB> db, Get());
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  Status st = FromRocks(db->Write(wo, &batch), what);
  if (!st.ok() && !absl::IsNotFound(st)) Broken(db);
  return st;
}

Status RocksDb::Flush(const std::string& what) {
  ASSIGN_OR_RETURN(std::shared_ptr<rocksdb::DB> db, Get());
  Status st = FromRocks(db->Flush(rocksdb::FlushOptions()), what);
  if (!st.ok()) Broken(db);
  return st;
}

int64_t RocksDb::reopens() const {
  MutexLock lock(mu_);
  return reopens_;
}

void RocksDb::Broken(const std::shared_ptr<rocksdb::DB>& db) {
  MutexLock lock(mu_);
  if (db_ == db) broken_ = true;
}

}  // namespace strata
