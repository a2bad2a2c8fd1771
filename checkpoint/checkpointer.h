// Asynchronous, sharded checkpoints to a directory (local disk or a
// parallel file system) or an embedded RocksDB, loadable under any other
// parallelism (docs/checkpoint.md; docs/checkpoint.md).
//
// Per step, each rank writes a data stream "rank-<5 digits>.data" (every
// chunk and blob it saves) and a "rank-<5 digits>.index" (RankIndex proto:
// where they are, checksums); rank 0 then writes "manifest.pb" (Manifest
// proto) and "LATEST". A step is committed iff its manifest exists: rank 0
// writes it atomically and durably only after every rank has made its data
// and index durable, so a crash at any moment leaves either the previous or
// the new checkpoint, never a partial one reported as committed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "checkpoint/host_buffer.h"
#include "checkpoint/storage.h"
#include "checkpoint/tensor.h"
#include "comm/store.h"
#include "proto/checkpoint.pb.h"

namespace strata::checkpoint {

struct CheckpointOptions {
  // file:///path (or a plain path) or rocksdb:///path (checkpoint/storage.h).
  std::string uri;
  // Optional: use this storage instead of opening `uri` (tests wrap the real
  // one in a FaultyStorage).
  std::shared_ptr<Storage> storage;
  // Optional catalog (checkpoint/catalog.h) that rank 0 updates after each
  // commit and removal, under job name `job`.
  std::shared_ptr<class Catalog> catalog;
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
// save failed). Copyable; the empty handle is done and OK.
class SaveHandle {
 public:
  int64_t step() const { return state_ ? state_->step : -1; }
  bool done() const;
  // Blocks until done; this save's result.
  Status Wait() const;

 private:
  friend class Checkpointer;
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    int64_t step = 0;
    bool done = false;  // guarded by mu
    Status status;      // guarded by mu
  };
  std::shared_ptr<State> state_;
};

// Threading: one thread calls SaveAsync/WaitSnapshot/Wait; persisting runs
// on an internal thread, one save after another in step order (and, with
// deferred_snapshot, staging copies on a second one). At most
// max_in_flight saves are staged or persisting: SaveAsync first waits for a
// slot. Each in-flight save has its own staging buffers, reused by later
// saves. A replica stages only the rows it writes (fully-parallel save), so
// a tensor replicated over n data-parallel ranks costs each 1/n of a copy.
class Checkpointer {
 public:
  explicit Checkpointer(CheckpointOptions options);
  ~Checkpointer();

  // Stage 1 (on the caller's thread): validates and copies every tensor
  // and blob into reusable host staging buffers, then returns — training
  // may modify its tensors at once (with deferred_snapshot: copies the
  // blobs, queues the tensor copies and returns; see WaitSnapshot). Stage 2
  // (background): writes, fsyncs, commits. The result of stage 2 is
  // returned by the handle and by Wait().
  StatusOr<SaveHandle> SaveAsync(int64_t step,
                                 const std::vector<ShardedTensor>& tensors,
                                 const std::vector<Blob>& blobs);
  // Blocks until every tensor handed to SaveAsync has been copied out; the
  // caller may modify them afterwards. The calling thread joins the copy
  // (the background copier runs at low priority and may be far behind
  // when the fence comes). Returns at once without deferred_snapshot.
  void WaitSnapshot();
  // Blocks until every save in flight is committed or failed; returns the
  // first failure since the last Wait.
  Status Wait();
  // The newest committed step in this checkpointer's storage (saves still
  // in flight do not count); NotFound when there is none.
  StatusOr<int64_t> Latest();

 private:
  // The part of a shard this replica writes: rows [k R/n, (k+1) R/n) of
  // dimension 0 for replica k of n (a scalar: replica 0 only). `tensor`
  // describes just those rows; its data points at the caller's memory until
  // staged, then at a staging buffer.
  struct Part {
    ShardedTensor tensor;
    bool has_chunk = true;  // false: this replica writes no rows
  };
  // A piece of a staging copy.
  struct Copy {
    const char* src;
    char* dst;
    size_t len;
  };
  // One save's staged state; its buffers return to the pool afterwards.
  struct Staged {
    int64_t step = 0;
    std::vector<Part> parts;
    std::map<std::string, HostBuffer> buffers;  // pinned when CUDA
    std::vector<Blob> blobs;
    std::vector<Copy> copies;  // still to copy into `buffers`
    std::shared_ptr<SaveHandle::State> handle;
  };
  // The deferred staging copy in progress: threads take pieces through
  // `next`; `left` counts pieces not yet copied.
  struct CopyJob {
    const std::vector<Copy>* copies = nullptr;
    std::atomic<size_t> next{0};
    std::atomic<size_t> left{0};
  };
  Status EnsureStorage();
  static Part OwnPart(const ShardedTensor& t);
  static void PlanCopies(Staged& s);
  static void RunCopies(CopyJob& job);
  void StageFront(std::unique_lock<std::mutex>& lock);
  Status Persist(const Staged& s);
  void Loop();
  void SnapshotLoop();

  CheckpointOptions opts_;
  std::shared_ptr<Storage> storage_;  // opened on first save
  std::deque<Staged> queue_;          // staged, to persist; guarded by mu_
  std::deque<Staged> unstaged_;       // deferred copies; guarded by mu_
  std::shared_ptr<CopyJob> copying_;  // the copy in progress; guarded by mu_
  std::vector<Staged> pool_;          // free buffer sets; guarded by mu_
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;      // queued + persisting; guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  Status last_;            // guarded by mu_
  std::thread worker_;
  std::thread snapshotter_;  // with deferred_snapshot only
};

// DIR/catalog.rocksdb for file:///DIR, rocksdb:///DIR or a plain DIR.
std::string DefaultCatalogPath(const std::string& uri);

// The step directory of a file:// checkpoint, e.g. DIR/step-000000000120.
std::string StepDir(const std::string& dir, int64_t step);
// The newest committed step: the newest step directory with a manifest
// (LATEST is a convenience for people and scripts).
// NotFound when there is none.
StatusOr<int64_t> LatestStep(const std::string& uri);
// Committed steps, ascending.
StatusOr<std::vector<int64_t>> ListSteps(const std::string& uri);
StatusOr<Manifest> ReadManifest(const std::string& uri, int64_t step);
StatusOr<Manifest> ReadManifest(Storage& storage, int64_t step);

// Fills each target's data with its box of the saved tensor of the same
// name, reading only the checksum blocks that overlap it. InvalidArgument
// when dtype or global shape differ; DataLoss naming tensor, chunk and file
// when a checksum fails, a file is short or part of the box was never
// saved; NotFound for a missing tensor or step.
struct LoadStats {
  uint64_t bytes_read = 0;    // from the data files
  uint64_t bytes_needed = 0;  // the targets' bytes
};
Status Load(const std::string& uri, int64_t step,
            std::vector<ShardedTensor>& targets, LoadStats* stats = nullptr);
Status Load(Storage& storage, int64_t step, std::vector<ShardedTensor>& targets,
            LoadStats* stats = nullptr);
// Reads a blob ("<rank>/<name>" for per-rank blobs).
StatusOr<std::string> LoadBlob(const std::string& uri, int64_t step,
                               const std::string& name);
StatusOr<std::string> LoadBlob(Storage& storage, int64_t step,
                               const std::string& name);
// Re-reads and checks every block of every chunk and blob.
Status Verify(const std::string& uri, int64_t step);
Status Verify(Storage& storage, int64_t step);

}  // namespace strata::checkpoint
