// Durable key/value state of the coordinator in RocksDB under --state-dir
// (schema in docs/control-plane.md: "job/<id>" -> JobInfo, "meta/next_job_id").
// Every Put is written with sync=true so a SIGKILL right after a reply loses
// nothing acknowledged. RocksDB errors are converted here. Thread-compatible.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace rocksdb {
class DB;
}

namespace strata::coordinator {

class StateStore {
 public:
  // Opens (creating if missing) the database in `dir`.
  static StatusOr<std::unique_ptr<StateStore>> Open(const std::string& dir);
  ~StateStore();

  // `sync` = false skips the fsync of the write-ahead log: the write survives
  // a crash of this process (it is in the OS page cache) but not of the
  // machine. Used for the rendezvous KV, whose keys die with their attempt.
  Status Put(const std::string& key, const std::string& value,
             bool sync = true);
  Status Delete(const std::string& key, bool sync = true);
  // NotFound if absent.
  StatusOr<std::string> Get(const std::string& key);
  // All (key, value) pairs whose key starts with `prefix`, in key order.
  StatusOr<std::vector<std::pair<std::string, std::string>>> Scan(
      const std::string& prefix);

 private:
  explicit StateStore(rocksdb::DB* db);
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace strata::coordinator
