// The checkpoint catalog (docs/checkpoint.md): a RocksDB that records, for
// every job, each committed step with its storage URI and full chunk table
// (tensor -> chunks with file/offset/length/xxh3), and the latest step — for
// both storage backends. The coordinator keeps one under its --state-dir;
// rank 0 updates it after each commit. A file:// checkpoint stays loadable
// without it (its manifest is self-describing). Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/checkpoint.pb.h"

namespace rocksdb {
class DB;
}

namespace strata::checkpoint {

class Catalog {
 public:
  static StatusOr<std::unique_ptr<Catalog>> Open(const std::string& path);
  ~Catalog();
  Catalog(const Catalog&) = delete;
  Catalog& operator=(const Catalog&) = delete;

  // Records a committed step (its manifest) and makes it the job's latest
  // if newer. Durable (synced) when it returns.
  Status RecordCommit(const std::string& job, const std::string& uri,
                      const Manifest& manifest);
  // Marks a step as no longer committed (retention removed it).
  Status RecordRemoval(const std::string& job, int64_t step);

  struct Entry {
    int64_t step = 0;
    std::string uri;
    bool committed = false;
    Manifest manifest;
  };
  StatusOr<Entry> Get(const std::string& job, int64_t step);
  // NotFound when the job has no committed step.
  StatusOr<int64_t> Latest(const std::string& job);
  // Committed steps of the job, ascending.
  StatusOr<std::vector<int64_t>> Steps(const std::string& job);

 private:
  explicit Catalog(rocksdb::DB* db) : db_(db) {}
  rocksdb::DB* db_;
};

}  // namespace strata::checkpoint
