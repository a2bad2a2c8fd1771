// The checkpoint catalog (docs/checkpoint.md): a RocksDB that records, for
// every job, each committed step with its storage URI and full chunk table
// (tensor -> chunks with file/offset/length/xxh3), and the latest step — for
// both storage backends. The coordinator keeps one under its --state-dir;
// rank 0 updates it after each commit. A file:// checkpoint stays loadable
// without it (its manifest is self-describing). The manifests in the
// storage are the truth: Reconcile repairs a catalog that missed a commit
// or a removal (a full disk, a crash between the manifest and the catalog
// write). A write that fails (e.g. ENOSPC) returns its error and the
// instance is recovered at the next call (common/rocks_db.h);
// nothing aborts. Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "checkpoint/storage.h"
#include "common/status.h"
#include "proto/checkpoint.pb.h"

namespace strata {
class RocksDb;
}  // namespace strata

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
  // Marks a step as no longer committed (retention removed it) and moves
  // latest back to the newest step still committed. A step the catalog
  // never recorded is fine (nothing to mark).
  Status RecordRemoval(const std::string& job, int64_t step);
  // Makes the job's committed steps those of `storage` (at `uri`): records
  // each committed step the catalog lacks (reading its manifest; a step
  // whose manifest does not read is skipped and logged), marks removed the
  // steps the storage no longer has, and sets latest to the newest. The
  // first storage or catalog error.
  Status Reconcile(const std::string& job, const std::string& uri,
                   Storage& storage);

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
  explicit Catalog(std::unique_ptr<RocksDb> db);
  std::unique_ptr<RocksDb> db_;
};

}  // namespace strata::checkpoint
