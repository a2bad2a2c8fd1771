// A writable RocksDB instance that survives write errors (internal; used by
// the catalog and the rocksdb:// storage).
//
// RocksDB 7.8.3 (Debian 12) behaves badly on a full disk in two ways this
// class contains: its info LOG file, once a write to it failed, aborts the
// process on the next log line (assertion `sync_without_flush_called_`), so
// the instance logs through spdlog (common/rocksdb_log.h); and an instance
// whose WAL write failed refuses every later write ("Resource busy" from
// DB::Resume while its recovery is stuck), so after a failed write the next
// use closes it and opens it again, which replays the WAL and fails
// cleanly while the disk is still full. Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"

namespace strata::checkpoint::internal {

// A RocksDB status as a Status: NotFound, DataLoss for corruption,
// ResourceExhausted for a full disk, Unavailable otherwise; the message is
// `what`: <RocksDB's message>.
Status FromRocks(const rocksdb::Status& s, const std::string& what);

// `o` made safe on a full disk (common/rocksdb_log.h's
// FailSafeRocksDbOptions, logging as "ROCKSDB").
rocksdb::Options SafeOptions(rocksdb::Options o);

class RocksDb {
 public:
  // Opens (creating it when `o.create_if_missing`) the instance at `path`.
  static StatusOr<std::unique_ptr<RocksDb>> Open(const rocksdb::Options& o,
                                                 const std::string& path);
  RocksDb(const RocksDb&) = delete;
  RocksDb& operator=(const RocksDb&) = delete;
  ~RocksDb() = default;

  // The instance, reopened first if an earlier write failed; the open's
  // error when that fails (e.g. the disk is still full). Callers share it:
  // a reopen waits for none of them (it fails while one still holds it).
  StatusOr<std::shared_ptr<rocksdb::DB>> Get();
  // Applies `batch` atomically (synced when `sync`); on failure the
  // instance is reopened at its next use.
  Status Write(rocksdb::WriteBatch& batch, bool sync, const std::string& what);
  // Flushes the memtable: its large values go to fresh blob files, its
  // WAL is dropped, and the automatic compactions that follow (L0 trigger)
  // drop deleted values and the blob files no table refers to any more.
  // (An explicit CompactRange with kForceOptimized made later Gets of live
  // keys return NotFound in RocksDB 7.8.3 with blob files, while iterators
  // still saw them.) On failure the instance is reopened at its next use.
  Status Flush(const std::string& what);
  const std::string& path() const { return path_; }

 private:
  RocksDb(rocksdb::Options o, std::string path)
      : options_(std::move(o)), path_(std::move(path)) {}
  Status OpenLocked();
  // Drops `db` (the instance the failed call used) so the next use reopens.
  void Broken(const std::shared_ptr<rocksdb::DB>& db);

  const rocksdb::Options options_;
  const std::string path_;
  std::mutex mu_;
  std::shared_ptr<rocksdb::DB> db_;  // guarded by mu_; null when broken
};

}  // namespace strata::checkpoint::internal
