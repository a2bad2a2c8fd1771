// A writable RocksDB instance that survives write errors: the one place where
// strata opens, writes and recovers its databases (coordinator state,
// checkpoint catalog, rocksdb:// checkpoint storage).
//
// RocksDB 7.8.3 (Debian 12) behaves badly on a full or failing disk in two
// ways this class contains (measured with tests/fault/failio):
// - its info LOG file, once a write to it failed, aborts the process on the
//   next log line (assertion `sync_without_flush_called_`), so every
//   instance logs through spdlog (rocksdb_log.h);
// - after a failed WAL append the instance keeps a background error, refuses
//   every later write, and DB::Resume() answers Busy. So after a failed write
//   or flush the instance is marked broken; its next use (Get) tries
//   DB::Resume() and, when RocksDB refuses, closes and reopens it, which
//   replays the WAL (acknowledged writes are kept, failed ones were never
//   acknowledged) and fails cleanly while the disk is still full.
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/logging.h"
#include "common/mutex.h"
#include "common/status.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"

namespace strata {

// The errno behind a RocksDB error message ("ENOSPC", "EDQUOT", "EIO",
// "EROFS", "EACCES"; RocksDB keeps the strerror text, not the number), or
// "I/O error" when none is named.
const char* RocksErrnoName(std::string_view rocks_message);

// A RocksDB status as a Status: NotFound; DataLoss for corruption;
// ResourceExhausted for a full disk or quota (ENOSPC, EDQUOT); Unavailable
// otherwise. The message is `what`: <RocksDB's message>.
Status FromRocks(const rocksdb::Status& s, const std::string& what);

class RocksDb {
 public:
  // Opens (creating it and its parent directories when
  // `o.create_if_missing`) the instance at `path`, with `o` made safe by
  // FailSafeRocksDbOptions (RocksDB's log goes to `logger`).
  static StatusOr<std::unique_ptr<RocksDb>> Open(rocksdb::Options o,
                                                 const std::string& path,
                                                 Logger logger);
  RocksDb(const RocksDb&) = delete;
  RocksDb& operator=(const RocksDb&) = delete;
  ~RocksDb() = default;

  // The instance, recovered first if an earlier write or flush failed
  // (Resume, else reopen); the recovery's error when that fails (e.g. the
  // disk is still full). Callers share it: a reopen waits for none of them
  // (it fails while one still holds the old instance).
  StatusOr<std::shared_ptr<rocksdb::DB>> Get();
  // For reads: the instance even while it is broken (reads still work on a
  // database that refuses writes); opened again only when a failed recovery
  // left none.
  StatusOr<std::shared_ptr<rocksdb::DB>> GetForRead();
  // Applies `batch` atomically (synced when `sync`); on failure the
  // instance is marked broken and recovered at its next use.
  Status Write(rocksdb::WriteBatch& batch, bool sync, const std::string& what);
  // Flushes the memtable: its large values go to fresh blob files, its WAL
  // is dropped, and the automatic compactions that follow (L0 trigger) drop
  // deleted values and the blob files no table refers to any more. (An
  // explicit CompactRange with kForceOptimized made later Gets of live keys
  // return NotFound in RocksDB 7.8.3 with blob files, while iterators still
  // saw them.) On failure the instance is marked broken.
  Status Flush(const std::string& what);
  // Times the instance was closed and opened again by a recovery: a write
  // whose fsync failed may still have reached the disk, so owners of
  // in-memory state write it again when this changes.
  int64_t reopens() const;
  const std::string& path() const { return path_; }

 private:
  RocksDb(rocksdb::Options o, std::string path, Logger logger)
      : options_(std::move(o)), path_(std::move(path)), logger_(logger) {}
  Status OpenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status RecoverLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks `db` (the instance the failed call used) broken.
  void Broken(const std::shared_ptr<rocksdb::DB>& db);

  const rocksdb::Options options_;
  const std::string path_;
  const Logger logger_;
  mutable Mutex mu_;
  std::shared_ptr<rocksdb::DB> db_ ABSL_GUARDED_BY(mu_);  // null while closed
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  int64_t reopens_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace strata
