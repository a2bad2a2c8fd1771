#include "checkpoint/internal/rocks_db.h"

#include <cstdarg>
#include <cstdio>

#include "common/logging.h"
#include "rocksdb/env.h"

namespace strata::checkpoint::internal {
namespace {

// RocksDB's info log, sent to spdlog: never a file on the (maybe full)
// checkpoint disk.
class SpdlogRocksLogger final : public rocksdb::Logger {
 public:
  SpdlogRocksLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format,
            va_list ap) override {
    if (level < GetInfoLogLevel()) return;
    char buf[1024];
    std::vsnprintf(buf, sizeof(buf), format, ap);
    if (level >= rocksdb::InfoLogLevel::ERROR_LEVEL) {
      GetLogger("ROCKSDB")->error("{}", buf);
    } else {
      GetLogger("ROCKSDB")->warn("{}", buf);
    }
  }
};

}  // namespace

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
  o.info_log = std::make_shared<SpdlogRocksLogger>();
  o.allow_fallocate = false;
  return o;
}

StatusOr<std::unique_ptr<RocksDb>> RocksDb::Open(const rocksdb::Options& o,
                                                 const std::string& path) {
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

Status RocksDb::FlushAndCompact(const std::string& begin,
                                const std::string& end,
                                const std::string& what) {
  ASSIGN_OR_RETURN(std::shared_ptr<rocksdb::DB> db, Get());
  Status st = FromRocks(db->Flush(rocksdb::FlushOptions()), what);
  if (st.ok() && begin < end) {
    const rocksdb::Slice b(begin), e(end);
    rocksdb::CompactRangeOptions co;
    co.bottommost_level_compaction =
        rocksdb::BottommostLevelCompaction::kForceOptimized;
    st = FromRocks(db->CompactRange(co, &b, &e), what);
  }
  if (!st.ok()) Broken(db);
  return st;
}

void RocksDb::Broken(const std::shared_ptr<rocksdb::DB>& db) {
  std::lock_guard<std::mutex> lock(mu_);
  if (db_ == db) db_.reset();  // closed once the last user lets go
}

}  // namespace strata::checkpoint::internal
