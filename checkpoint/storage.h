// Where checkpoint bytes live, behind one interface chosen by URI
// (docs/checkpoint.md): file:///path (or a plain path) for a directory on a local
// disk or a parallel file system, rocksdb:///path for an embedded RocksDB
// per rank with blob files. The checkpointer and the reader see only this.
//
// Names: data streams are "rank-<5 digits>.data"; metadata entries are
// "rank-<5 digits>.index" and "manifest.pb" per step, and "LATEST" at the
// root (step < 0). A step is committed iff its "manifest.pb" exists.
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace strata::checkpoint {

// A data stream being written: append sequentially, then Finish makes it
// durable. Not thread-safe.
class DataSink {
 public:
  virtual ~DataSink() = default;
  virtual Status Append(const char* data, size_t n) = 0;
  virtual Status Finish() = 0;
  virtual uint64_t size() const = 0;
};

class Storage {
 public:
  virtual ~Storage() = default;
  virtual StatusOr<std::unique_ptr<DataSink>> CreateData(
      int64_t step, const std::string& name) = 0;
  // Exactly n bytes at `offset`; DataLoss naming the place when missing or
  // short.
  virtual Status ReadData(int64_t step, const std::string& name,
                          uint64_t offset, void* buf, size_t n) = 0;
  // Durable and atomic: readers see the old entry or the new one.
  virtual Status PutMeta(int64_t step, const std::string& name,
                         const std::string& bytes) = 0;
  // NotFound when absent.
  virtual StatusOr<std::string> GetMeta(int64_t step,
                                        const std::string& name) = 0;
  // Committed steps (with a manifest), ascending.
  virtual StatusOr<std::vector<int64_t>> Steps() = 0;
  // Uncommits (manifest first), then deletes what this process may delete
  // of a step (file: the whole step directory; rocksdb: the manifest and
  // this rank's entries).
  virtual Status RemoveStep(int64_t step) = 0;
  // Deletes this rank's entries of steps that are neither committed nor
  // `current` (failed attempts, and steps whose manifest retention removed).
  virtual Status CollectGarbage(int64_t current) = 0;
  // Human-readable location of an entry, for error messages.
  virtual std::string Where(int64_t step, const std::string& name) const = 0;
};

// file:///path, a plain path, or rocksdb:///path. With `writable`, `rank`
// selects the RocksDB instance this process writes; other ranks' instances
// (and all of them when not writable) are opened as read-only secondaries
// that catch up with their writers. InvalidArgument for other schemes.
StatusOr<std::shared_ptr<Storage>> OpenStorage(const std::string& uri,
                                               int rank = 0,
                                               bool writable = false);

}  // namespace strata::checkpoint
