// Durable key/value state of the coordinator in RocksDB under --state-dir
// (schema in docs/control-plane.md: "job/<id>" -> JobInfo, "meta/next_job_id").
// Every Put is written with sync=true so a SIGKILL right after a reply loses
// nothing acknowledged. RocksDB errors are converted here.
//
// Durability contract: a mutation is done only when its write returned OK;
// callers apply it to memory after that, never before. When a write fails
// (disk full, I/O error) the store turns unwritable: it logs one ERROR naming
// the state dir and the errno, refuses further writes with the same error
// (ResourceExhausted for ENOSPC, Unavailable for other I/O errors) and, with
// backoff (100 ms doubling to 2 s) from MaybeResume(), which the event loop
// calls every tick and every write calls first, recovers the database
// (common/rocks_db.h: Resume, else reopen) and writes a 256 KiB probe. Once
// a probe write succeeds it is writable again (logged), without a restart.
// A reopen bumps generation(): a write whose fsync failed may still have
// reached the disk, so owners of in-memory state then write it again
// (Service::Tick). health() tells clients which state the store is in.
// Thread-compatible (event-loop thread only).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"

namespace rocksdb {
class WriteBatch;
}  // namespace rocksdb

namespace strata {
class RocksDb;
}  // namespace strata

namespace strata::coordinator {

struct StoreHealth {
  bool writable = true;
  std::string error;          // why not, naming the state dir and errno
  int64_t since_unix_ms = 0;  // when it became unwritable
  int64_t failed_writes = 0;  // refused since then
};

class StateStore {
 public:
  // RocksDB's write buffer (memtable) size: the store's memory bound for
  // recent writes (docs/control-plane.md "Retention").
  static constexpr size_t kMemtableBytes = size_t{256} << 10;
  // RocksDB's block cache, which also holds the SST index blocks.
  static constexpr size_t kBlockCacheBytes = size_t{1} << 20;
  // Opens (creating if missing) the database in `dir`. `clock` (default: the
  // system clock) paces the resume backoff and must outlive the store.
  static StatusOr<std::unique_ptr<StateStore>> Open(
      const std::string& dir, const Clock* clock = nullptr);
  ~StateStore();

  // `sync` = false skips the fsync of the write-ahead log: the write survives
  // a crash of this process (it is in the OS page cache) but not of the
  // machine. Used for the rendezvous KV, whose keys die with their attempt.
  Status Put(const std::string& key, const std::string& value,
             bool sync = true);
  Status Delete(const std::string& key, bool sync = true);
  // Several puts (value) and deletes (nullopt) applied atomically: all or
  // none.
  using Mutation = std::pair<std::string, std::optional<std::string>>;
  Status Write(const std::vector<Mutation>& mutations, bool sync = true);
  // NotFound if absent.
  StatusOr<std::string> Get(const std::string& key);
  // All (key, value) pairs whose key starts with `prefix`, in key order.
  StatusOr<std::vector<std::pair<std::string, std::string>>> Scan(
      const std::string& prefix);

  // RocksDB's memory that grows with the data until its bound: memtables
  // (kMemtableBytes each), the block cache (kBlockCacheBytes) and the table
  // readers; 0 for what cannot be read.
  struct Memory {
    uint64_t memtables = 0, block_cache = 0, table_readers = 0;
  };
  Memory MemoryUsage();

  // When unwritable and the backoff allows: DB::Resume() and a probe write.
  void MaybeResume();
  const StoreHealth& health() const { return health_; }
  // Incremented by every reopen.
  int64_t generation() const;
  const std::string& dir() const { return dir_; }

 private:
  StateStore(std::unique_ptr<RocksDb> db, std::string dir, const Clock* clock);
  // Writes `batch` unless the store is unwritable (then returns its error);
  // a failed write makes it unwritable.
  Status Mutate(const std::string& what, rocksdb::WriteBatch& batch, bool sync);
  void MarkUnwritable(const Status& error);

  std::unique_ptr<RocksDb> db_;
  std::string dir_;
  const Clock* clock_;
  Logger logger_;
  StoreHealth health_;
  Status error_;  // the write error while unwritable
  int64_t next_resume_ms_ = 0;
  int64_t backoff_ms_ = 0;
};

}  // namespace strata::coordinator
