// Asynchronous, sharded checkpoints to a directory (local disk or a
// parallel file system) or an embedded RocksDB, loadable under any other
// parallelism (docs/checkpoint.md; loading is checkpoint/reader.h).
//
// Per step, each rank writes a data stream "rank-<5 digits>.data" (every
// chunk and blob it saves) and a "rank-<5 digits>.index" (RankIndex proto:
// where they are, checksums); rank 0 then writes "manifest.pb" (Manifest
// proto) and "LATEST". A step is committed iff its manifest exists: rank 0
// writes it atomically and durably only after every rank has made its data
// and index durable, so a crash at any moment leaves either the previous or
// the new checkpoint, never a partial one reported as committed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/storage.h"
#include "checkpoint/tensor.h"
#include "comm/store.h"
#include "common/status.h"

namespace strata::checkpoint {

class Catalog;

namespace internal {
class SaveState;
}

struct CheckpointOptions {
  // file:///path (or a plain path) or rocksdb:///path (checkpoint/storage.h).
  std::string uri;
  // Optional: use this storage instead of opening `uri` (e.g. a wrapper
  // around the real one, checkpoint/storage.h StorageWrapper).
  std::shared_ptr<Storage> storage;
  // Optional catalog (checkpoint/catalog.h) that rank 0 updates after each
  // commit and removal, under job name `job`.
  std::shared_ptr<Catalog> catalog;
  // Without `catalog`: rank 0 opens DIR/catalog.rocksdb next to the
  // checkpoint (DefaultCatalogPath), so every backend has one. A catalog
  // that cannot be opened is logged and skipped: checkpoints stay loadable
  // through their manifests.
  bool default_catalog = false;
  std::string job = "default";
  int rank = 0;
  int world_size = 1;
  // Rendezvous for the commit (a PrefixStore per job works).
  std::shared_ptr<comm::Store> store;
  size_t block_bytes = 1 << 20;  // checksum granularity
  // How long rank 0 waits for every rank's durable index.
  std::chrono::milliseconds commit_timeout{std::chrono::minutes(10)};
  // Keep the newest `keep_last` committed steps plus every step divisible
  // by `keep_every` (0 = none); rank 0 deletes the rest after a commit.
  int keep_last = 0;  // 0 = keep everything
  int64_t keep_every = 0;
  // Saves persisting at once; each holds its own staging buffers.
  int max_in_flight = 1;
  // Deferred snapshot (DataStates-LLM, Maurya et al. HPDC'24: parameters
  // and optimizer state do not change during forward and backward): the
  // staging copy runs on a background thread and SaveAsync returns without
  // copying; the caller must leave the tensors untouched until
  // WaitSnapshot() returns — a trainer calls it right before its optimizer
  // step, so the copy overlaps the next forward and backward.
  bool deferred_snapshot = false;
};

// One save in flight, as SaveAsync returns it (cf. the future of PyTorch
// DCP's async_save): done once this rank's part is durable and reported
// to the commit leader — on rank 0, once the step is committed (or the
// save failed). Copyable (copies share the save); thread-safe. The empty
// handle is done and OK.
class SaveHandle {
 public:
  SaveHandle() = default;

  int64_t step() const;  // -1 for the empty handle
  bool done() const;
  // Blocks until done; this save's result.
  Status Wait() const;

 private:
  friend class Checkpointer;
  explicit SaveHandle(std::shared_ptr<internal::SaveState> state)
      : state_(std::move(state)) {}
  std::shared_ptr<internal::SaveState> state_;
};

// Threading: one thread calls SaveAsync/WaitSnapshot/Wait/Latest;
// persisting runs on an internal thread, one save after another in step
// order (and, with deferred_snapshot, staging copies on a second one), both
// at a lowered priority so they yield to training. At most max_in_flight
// saves are staged or persisting: SaveAsync first waits for a slot. Each
// in-flight save has its own staging buffers, reused by later saves. A
// replica stages and writes only its share of the rows (fully-parallel
// save), so a tensor replicated over n data-parallel ranks costs each 1/n
// of a copy.
//
// Failure: a failed save never commits its step and never harms earlier
// ones; later saves proceed. Its error reaches the caller three ways: the
// save's own SaveHandle::Wait(), the next Wait() (blocking) or the next
// Poll() (non-blocking; a trainer calls it between steps), and
// consecutive_failures() counts failed saves since the last success. The
// message starts "checkpoint step N at <URI>:" and names the file or
// RocksDB instance that failed; a full disk (ENOSPC, also RocksDB's "No
// space") is ResourceExhausted. Every such message ends with the free space
// of the checkpoint's file system ("; 0.0 MiB free of 16.0 MiB on /ckpt").
class Checkpointer {
 public:
  // Opens the storage lazily (first SaveAsync or Latest); with
  // default_catalog, rank 0 opens the catalog here.
  explicit Checkpointer(CheckpointOptions options);
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;
  // Waits for every save in flight (Wait), then stops the threads.
  ~Checkpointer();

  // Stage 1 (on the caller's thread): validates and copies every tensor
  // and blob into reusable host staging buffers, then returns — training
  // may modify its tensors at once (with deferred_snapshot: copies the
  // blobs, queues the tensor copies and returns; see WaitSnapshot). Stage 2
  // (background): writes, fsyncs, commits. The result of stage 2 is
  // returned by the handle and by Wait(). InvalidArgument without a URI, a
  // store or a world size, or for an invalid tensor; the storage's error
  // when it cannot be opened (nothing is queued then).
  // REQUIRES: with deferred_snapshot, the tensors' data stays valid and
  // unchanged until WaitSnapshot() returns.
  //
  // With `borrow` the tensors are not copied at all: the save writes them
  // from the caller's memory, which must stay valid and unchanged until
  // this save's handle is done (for a caller that hands over a snapshot it
  // owns, e.g. DCP's staged copy, or that waits for the save). Blobs are
  // still copied.
  StatusOr<SaveHandle> SaveAsync(int64_t step,
                                 const std::vector<ShardedTensor>& tensors,
                                 const std::vector<Blob>& blobs,
                                 bool borrow = false);
  // Blocks until every tensor handed to SaveAsync has been copied out; the
  // caller may modify them afterwards. The calling thread joins the copy
  // (the background copier runs at low priority and may be far behind
  // when the fence comes). Returns at once without deferred_snapshot.
  void WaitSnapshot();
  // Blocks until every save in flight is committed or failed; returns the
  // first failure since the last Wait or Poll (then forgets it).
  Status Wait();
  // Non-blocking: whether SaveAsync would find a free in-flight slot now
  // (fewer than max_in_flight saves staged or persisting). On rank 0 a
  // save holds its slot until it is committed, which needs every rank's
  // part, so a free slot on rank 0 means every rank has ended all but its
  // newest max_in_flight - 1 saves. Thread-safe.
  bool HasFreeSlot();
  // Non-blocking: the first failure among the saves that ended since the
  // last Wait or Poll (then forgotten); OK when none failed. Saves still in
  // flight are not waited for. Thread-safe.
  Status Poll();
  // Saves that failed in a row, counted when each ends: 0 after a save
  // that succeeded. Thread-safe.
  int consecutive_failures() const;
  // The newest usable committed step in this checkpointer's storage
  // (reader.h NewestUsableStep: newer steps with an empty or corrupt
  // manifest or truncated data are skipped and logged; saves still in
  // flight do not count); NotFound when there is none.
  StatusOr<int64_t> Latest();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// DIR/catalog.rocksdb for file:///DIR, rocksdb:///DIR or a plain DIR.
std::string DefaultCatalogPath(const std::string& uri);

// Committed steps (those with a manifest) of the checkpoint at `uri`,
// ascending; the storage's error when it cannot be opened or listed.
StatusOr<std::vector<int64_t>> ListSteps(const std::string& uri);
// The newest usable committed step (reader.h NewestUsableStep: what a
// resume should load — newer steps whose manifest is empty or corrupt or
// whose data is truncated are skipped, each logged with its reason; LATEST
// is a convenience for people and scripts, not consulted); NotFound when
// there is none.
StatusOr<int64_t> LatestStep(const std::string& uri);

}  // namespace strata::checkpoint
