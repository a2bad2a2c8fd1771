// Where checkpoint bytes live, behind one interface chosen by URI
// (docs/checkpoint.md): file:///path (or a plain path) for a directory on a
// local disk or a parallel file system, rocksdb:///path for an embedded RocksDB
// per rank with blob files, mem:// for the memory tier (the worker's tmpfs
// directory, replicated to a peer node's worker; checkpoint/mem_wire.h and
// docs/checkpoint.md "Memory tier"). The checkpointer and the reader see
// only this.
//
// Names: data streams are "rank-<5 digits>.data"; metadata entries are
// "rank-<5 digits>.index" and "manifest.pb" per step, and "LATEST" at the
// root (step < 0). A step is committed iff its "manifest.pb" exists. Every
// name is one path component (ValidName); others are InvalidArgument. The
// file:// backend never follows a symlink below its root: a symlinked step
// directory or file is not a step and is never read through or deleted
// through. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace strata::checkpoint {

// A data stream being written: append sequentially, then Finish makes it
// durable. Not thread-safe. A stream never finished may be lost by a crash;
// the storage's CollectGarbage removes it later.
class DataSink {
 public:
  DataSink() = default;
  DataSink(const DataSink&) = delete;
  DataSink& operator=(const DataSink&) = delete;
  virtual ~DataSink() = default;

  // REQUIRES: Finish() has not been called.
  virtual Status Append(const char* data, size_t n) = 0;
  // Makes every appended byte durable (the fsync point). On failure the
  // stream must be treated as lost.
  // REQUIRES: called at most once.
  virtual Status Finish() = 0;
  // Bytes appended so far.
  virtual uint64_t size() const = 0;
};

// A reader's hold on a committed step (Storage::PinStep): while it lives,
// RemoveStep of that step fails with FailedPrecondition, so retention and
// `strata ckpt gc` leave the step alone. Released when destroyed, or when
// the holding process dies (it is an flock).
class StepPin {
 public:
  StepPin() = default;
  StepPin(const StepPin&) = delete;
  StepPin& operator=(const StepPin&) = delete;
  virtual ~StepPin() = default;
};

// Implementations: storage/file_storage.cc, storage/rocksdb_storage.cc;
// wrappers derive from StorageWrapper below.
class Storage {
 public:
  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  virtual ~Storage() = default;

  // A new data stream `name` of `step`, replacing any unfinished one.
  virtual StatusOr<std::unique_ptr<DataSink>> CreateData(
      int64_t step, const std::string& name) = 0;
  // Exactly n bytes at `offset`; DataLoss naming the place when missing or
  // short.
  virtual Status ReadData(int64_t step, const std::string& name,
                          uint64_t offset, void* buf, size_t n) = 0;
  // The `k`-th other copy (k = 0, 1, ...) of the bytes ReadData reads, for
  // a reader whose bytes failed their checksum: exactly n bytes at
  // `offset` from another place holding the same entry (the memory tier:
  // a peer's replica, or this node's copy when ReadData read a peer's).
  // OutOfRange when there is no k-th other copy (the default: one copy);
  // the copy's own error (NotFound, Unavailable, DataLoss) when that one
  // cannot be read. A reader tries them in order until one verifies.
  virtual Status ReadOtherCopy(int64_t step, const std::string& name,
                               uint64_t offset, void* buf, size_t n, int k) {
    (void)step, (void)name, (void)offset, (void)buf, (void)n, (void)k;
    return absl::OutOfRangeError("no other copy");
  }
  // Durable and atomic: readers see the old entry or the new one.
  virtual Status PutMeta(int64_t step, const std::string& name,
                         const std::string& bytes) = 0;
  // NotFound when absent.
  virtual StatusOr<std::string> GetMeta(int64_t step,
                                        const std::string& name) = 0;
  // Committed steps (with a manifest), ascending.
  virtual StatusOr<std::vector<int64_t>> Steps() = 0;
  // Pins committed step `step` for reading (StepPin); NotFound when it is
  // not committed (never, or removed before the pin took hold).
  virtual StatusOr<std::unique_ptr<StepPin>> PinStep(int64_t step) = 0;
  // Uncommits (manifest first), then deletes what this process may delete
  // of a step (file: the whole step directory; rocksdb: the manifest and
  // this rank's entries). FailedPrecondition, deleting nothing, while a
  // reader pins the step.
  virtual Status RemoveStep(int64_t step) = 0;
  // Deletes this rank's entries of uncommitted steps other than `current`
  // that are either in `failed` (this rank's own saves that failed) or older
  // than the newest committed step (failed elsewhere, or uncommitted by
  // retention), so a failed save's partial data does not keep a disk full.
  // Other uncommitted steps are left: rank 0 may still be merging them
  // after this rank moved on to its next save.
  virtual Status CollectGarbage(int64_t current,
                                const std::set<int64_t>& failed) = 0;
  // Human-readable location of an entry, for error messages.
  virtual std::string Where(int64_t step, const std::string& name) const = 0;
};

// Forwards every call to another Storage (leveldb's EnvWrapper): a wrapper
// overrides only what it changes. Thread-safe if the target is.
class StorageWrapper : public Storage {
 public:
  // REQUIRES: target != nullptr.
  explicit StorageWrapper(std::shared_ptr<Storage> target)
      : target_(std::move(target)) {}

  Storage& target() const { return *target_; }

  StatusOr<std::unique_ptr<DataSink>> CreateData(
      int64_t step, const std::string& name) override {
    return target_->CreateData(step, name);
  }
  Status ReadData(int64_t step, const std::string& name, uint64_t offset,
                  void* buf, size_t n) override {
    return target_->ReadData(step, name, offset, buf, n);
  }
  Status ReadOtherCopy(int64_t step, const std::string& name,
                       uint64_t offset, void* buf, size_t n, int k) override {
    return target_->ReadOtherCopy(step, name, offset, buf, n, k);
  }
  Status PutMeta(int64_t step, const std::string& name,
                 const std::string& bytes) override {
    return target_->PutMeta(step, name, bytes);
  }
  StatusOr<std::string> GetMeta(int64_t step,
                                const std::string& name) override {
    return target_->GetMeta(step, name);
  }
  StatusOr<std::vector<int64_t>> Steps() override { return target_->Steps(); }
  StatusOr<std::unique_ptr<StepPin>> PinStep(int64_t step) override {
    return target_->PinStep(step);
  }
  Status RemoveStep(int64_t step) override { return target_->RemoveStep(step); }
  Status CollectGarbage(int64_t current,
                        const std::set<int64_t>& failed) override {
    return target_->CollectGarbage(current, failed);
  }
  std::string Where(int64_t step, const std::string& name) const override {
    return target_->Where(step, name);
  }

 private:
  const std::shared_ptr<Storage> target_;
};

// True when `name` (a data stream or metadata entry named by a manifest or
// index) is one path component: not empty, no '/', no NUL, not "." or "..".
bool ValidName(const std::string& name);

// The step directory of a file:// checkpoint, e.g. DIR/step-000000000120.
std::string StepDir(const std::string& dir, int64_t step);

// file:///path, a plain path, rocksdb:///path or mem://[DIR]. With `writable`, `rank`
// selects the RocksDB instance this process writes; other ranks' instances
// (and all of them when not writable) are opened read-only and reopened to
// see later writes. InvalidArgument for other schemes; the backend's error
// when a writable store cannot be created or opened.
StatusOr<std::shared_ptr<Storage>> OpenStorage(const std::string& uri,
                                               int rank = 0,
                                               bool writable = false);

}  // namespace strata::checkpoint
