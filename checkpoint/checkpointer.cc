#include "checkpoint/checkpointer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "checkpoint/catalog.h"
#include "checkpoint/internal/persist.h"
#include "checkpoint/internal/save_state.h"
#include "checkpoint/internal/staging.h"
#include "checkpoint/location.h"
#include "checkpoint/reader.h"
#include "common/logging.h"
#include "common/mutex.h"

namespace strata::checkpoint {
namespace {

using internal::CopyJob;
using internal::SaveState;
using internal::Staged;

// Background checkpoint threads yield to training when cores are short,
// so a copy or a checksum never preempts a rank's compute or communication
// threads; on idle cores they run at full speed. The persist thread runs at
// nice 10, the deferred snapshot copier at nice 19 (CFS weight 15 against
// 1024 at nice 0, and a wakeup never preempts a nice-0 thread: Linux
// kernel/sched/core.c sched_prio_to_weight); both still progress when
// training keeps every core busy, and WaitSnapshot's caller joins the copy
// at its own priority. Acts on the calling thread only (Linux).
void LowerThreadPriority(int nice) {
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice);
}

}  // namespace

// The saves in flight and the two background threads. Every member below
// mu_ but the threads is guarded by it (ABSL_GUARDED_BY). A save moves
// unstaged_ (deferred copy pending) -> copying_ (being copied) -> queue_
// (staged) -> persist thread -> pool_ (its buffers, free for a later save).
class Checkpointer::Impl {
 public:
  explicit Impl(CheckpointOptions options);
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl();

  StatusOr<std::shared_ptr<SaveState>> SaveAsync(
      int64_t step, const std::vector<ShardedTensor>& tensors,
      const std::vector<Blob>& blobs, bool borrow);
  void WaitSnapshot();
  Status Wait();
  Status Poll();
  bool HasFreeSlot() {
    MutexLock lock(mu_);
    return in_flight_ < std::max(1, opts_.max_in_flight);
  }
  int consecutive_failures();
  StatusOr<int64_t> Latest();

 private:
  Status EnsureStorage();
  // Waits for a free in-flight slot and takes a reusable Staged.
  Staged AcquireSlot();
  // Records the result of a save that ran (for Wait, Poll and
  // consecutive_failures), before its handle reports it.
  void RecordResult(const Status& st);
  // Gives back a slot (and the save's buffers) once the save has ended.
  void ReleaseSlot(Staged staged);
  void StageFront(UniqueLock& lock) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status Persist(const Staged& s);
  void Loop();
  void SnapshotLoop();

  CheckpointOptions opts_;
  // Steps whose save failed on this rank: their leftovers are garbage at
  // the next save even before a newer step commits.
  std::set<int64_t> failed_steps_ ABSL_GUARDED_BY(mu_);
  // Opened on first use by the caller's thread, read by the persist thread
  // only for saves queued after that.
  std::shared_ptr<Storage> storage_;
  Mutex mu_;
  std::condition_variable cv_;
  std::deque<Staged> queue_ ABSL_GUARDED_BY(mu_);  // staged, to persist
  // Deferred copies not yet started.
  std::deque<Staged> unstaged_ ABSL_GUARDED_BY(mu_);
  // The deferred copy in progress.
  std::shared_ptr<CopyJob> copying_ ABSL_GUARDED_BY(mu_);
  std::vector<Staged> pool_ ABSL_GUARDED_BY(mu_);  // free buffer sets
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;         // queued + persisting
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The first failure since the last Wait or Poll.
  Status last_ ABSL_GUARDED_BY(mu_);
  int consecutive_failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread worker_;
  std::thread snapshotter_;  // with deferred_snapshot only
};

std::string DefaultCatalogPath(const std::string& uri) {
  return CheckpointDir(uri).value_or(uri) + "/catalog.rocksdb";
}

Checkpointer::Impl::Impl(CheckpointOptions options)
    : opts_(std::move(options)) {
  if (opts_.catalog == nullptr && opts_.default_catalog && opts_.rank == 0) {
    const std::string path = DefaultCatalogPath(opts_.uri);
    std::error_code ec;
    std::filesystem::create_directories(
        std::filesystem::path(path).parent_path(), ec);
    auto catalog = Catalog::Open(path);
    if (catalog.ok()) {
      opts_.catalog = std::move(*catalog);
    } else {
      GetLogger("CKPT")->warn("no checkpoint catalog: {}",
                              catalog.status().ToString());
    }
  }
  worker_ = std::thread([this] {
    LowerThreadPriority(10);
    Loop();
  });
  if (opts_.deferred_snapshot) {
    snapshotter_ = std::thread([this] {
      LowerThreadPriority(19);
      SnapshotLoop();
    });
  }
}

Checkpointer::Impl::~Impl() {
  (void)Wait();
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
  if (snapshotter_.joinable()) snapshotter_.join();
}

Status Checkpointer::Impl::Wait() {
  UniqueLock lock(mu_);
  cv_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return in_flight_ == 0;
  });
  Status st = last_;
  last_ = absl::OkStatus();
  return st;
}

Status Checkpointer::Impl::Poll() {
  MutexLock lock(mu_);
  Status st = last_;
  last_ = absl::OkStatus();
  return st;
}

int Checkpointer::Impl::consecutive_failures() {
  MutexLock lock(mu_);
  return consecutive_failures_;
}

Status Checkpointer::Impl::EnsureStorage() {
  if (!storage_) storage_ = opts_.storage;
  if (storage_) return absl::OkStatus();
  ASSIGN_OR_RETURN(storage_,
                   OpenStorage(opts_.uri, opts_.rank, /*writable=*/true));
  if (opts_.catalog != nullptr) {
    // The manifests are the truth: repair what an earlier run's failed
    // catalog writes missed. Not fatal: the next commit tries again.
    Status st = opts_.catalog->Reconcile(opts_.job, opts_.uri, *storage_);
    if (!st.ok()) {
      GetLogger("CKPT")->warn("checkpoint catalog not reconciled: {}",
                              std::string(st.message()));
    }
  }
  return absl::OkStatus();
}

StatusOr<int64_t> Checkpointer::Impl::Latest() {
  RETURN_IF_ERROR(EnsureStorage());
  return NewestUsableStep(*storage_);
}

Staged Checkpointer::Impl::AcquireSlot() {
  UniqueLock lock(mu_);
  cv_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return in_flight_ < std::max(1, opts_.max_in_flight);
  });
  ++in_flight_;
  Staged staged;
  if (!pool_.empty()) {
    staged = std::move(pool_.back());
    pool_.pop_back();
  }
  return staged;
}

void Checkpointer::Impl::RecordResult(const Status& st) {
  MutexLock lock(mu_);
  if (!st.ok() && last_.ok()) last_ = st;
  consecutive_failures_ = st.ok() ? 0 : consecutive_failures_ + 1;
}

void Checkpointer::Impl::ReleaseSlot(Staged staged) {
  MutexLock lock(mu_);
  pool_.push_back(std::move(staged));
  --in_flight_;
  cv_.notify_all();
}

StatusOr<std::shared_ptr<SaveState>> Checkpointer::Impl::SaveAsync(
    int64_t step, const std::vector<ShardedTensor>& tensors,
    const std::vector<Blob>& blobs, bool borrow) {
  if (opts_.uri.empty() || !opts_.store || opts_.world_size < 1) {
    return absl::InvalidArgumentError(
        "checkpointer needs a URI, a store and a world size");
  }
  for (const ShardedTensor& t : tensors) RETURN_IF_ERROR(t.Validate());
  Staged staged = AcquireSlot();
  if (Status opened = EnsureStorage(); !opened.ok()) {
    // Not a failed save: the caller gets the error, Wait() does not.
    ReleaseSlot(std::move(staged));
    return opened;
  }
  staged.step = step;
  staged.parts.clear();
  for (const ShardedTensor& t : tensors) {
    staged.parts.push_back(internal::OwnPart(t));
  }
  staged.blobs = blobs;
  staged.handle = std::make_shared<SaveState>(step);
  std::shared_ptr<SaveState> handle = staged.handle;
  // Borrowed: the parts keep pointing at the caller's memory (no copy).
  staged.copies.clear();
  if (!borrow) internal::PlanCopies(staged);
  const bool deferred = opts_.deferred_snapshot && !borrow;
  if (!deferred) internal::CopyAll(staged);
  {
    MutexLock lock(mu_);
    (deferred ? unstaged_ : queue_).push_back(std::move(staged));
  }
  cv_.notify_all();
  return handle;
}

void Checkpointer::Impl::WaitSnapshot() {
  UniqueLock lock(mu_);
  for (;;) {
    if (copying_) {  // help the copier finish, then wait for its hand-off
      std::shared_ptr<CopyJob> job = copying_;
      lock.unlock();
      internal::RunCopies(*job);
      lock.lock();
      cv_.notify_all();
      cv_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return copying_ != job;
      });
    } else if (!unstaged_.empty()) {  // the copier has not started: copy
      StageFront(lock);
    } else {
      return;
    }
  }
}

// Copies the oldest deferred save (mu_ held on entry and exit; released
// while copying) and hands it to the persist thread. WaitSnapshot may share
// the copy meanwhile.
void Checkpointer::Impl::StageFront(UniqueLock& lock) {
  Staged staged = std::move(unstaged_.front());
  unstaged_.pop_front();
  auto job = std::make_shared<CopyJob>();
  job->copies = &staged.copies;
  job->left = staged.copies.size();
  copying_ = job;
  // `lock` holds mu_; released through the mutex, which the analysis sees
  // (it cannot tie a UniqueLock parameter to mu_).
  mu_.unlock();
  internal::RunCopies(*job);
  mu_.lock();
  // A helper's last piece.
  cv_.wait(lock.native(), [&] { return job->left == 0; });
  copying_ = nullptr;
  queue_.push_back(std::move(staged));
  cv_.notify_all();
}

void Checkpointer::Impl::SnapshotLoop() {
  UniqueLock lock(mu_);
  for (;;) {
    cv_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || (!unstaged_.empty() && copying_ == nullptr);
    });
    if (unstaged_.empty()) return;  // stopping
    if (copying_ == nullptr) StageFront(lock);
  }
}

void Checkpointer::Impl::Loop() {
  UniqueLock lock(mu_);
  for (;;) {
    cv_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || !queue_.empty();
    });
    if (queue_.empty()) return;
    Staged staged = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Status st = Persist(staged);
    if (!st.ok()) {
      st = internal::DescribeSaveFailure(st, staged.step, opts_.uri);
      GetLogger("CKPT")->error("{}", std::string(st.message()));
    }
    RecordResult(st);
    {
      MutexLock guard(mu_);
      if (!st.ok()) failed_steps_.insert(staged.step);
    }
    staged.handle->Finish(st);
    staged.handle.reset();
    ReleaseSlot(std::move(staged));
    lock.lock();
  }
}

// Stage 2 of one save, on the persist thread: the steps of
// checkpoint/internal/persist.h in order, after dropping this rank's
// leftovers of uncommitted steps; the first failure ends the save.
Status Checkpointer::Impl::Persist(const Staged& s) {
  Storage& storage = *storage_;
  std::set<int64_t> failed;
  {
    MutexLock lock(mu_);
    failed = failed_steps_;
  }
  Status written = [&]() -> Status {
    RETURN_IF_ERROR(storage.CollectGarbage(s.step, failed));
    ASSIGN_OR_RETURN(RankIndex index, internal::WriteRankData(
                                          storage, s.step, opts_.rank,
                                          opts_.block_bytes, s.parts, s.blobs));
    return internal::WriteRankIndex(storage, s.step, index);
  }();
  if (!written.ok()) {
    // Rank 0 would otherwise wait for this rank until its commit timeout.
    internal::ReportFailed(*opts_.store, s.step, opts_.rank, written);
    return written;
  }
  RETURN_IF_ERROR(internal::ReportDurable(*opts_.store, s.step, opts_.rank));
  if (opts_.rank != 0) return absl::OkStatus();
  RETURN_IF_ERROR(internal::WaitForRanks(*opts_.store, s.step, opts_.world_size,
                                         opts_.commit_timeout));
  ASSIGN_OR_RETURN(Manifest manifest, internal::MergeRankIndexes(
                                          storage, s.step, opts_.world_size));
  RETURN_IF_ERROR(internal::PublishCommit(storage, opts_.catalog.get(),
                                          opts_.job, opts_.uri, manifest));
  return internal::ApplyRetention(storage, opts_.catalog.get(), opts_.job,
                                  opts_.keep_last, opts_.keep_every);
}

Checkpointer::Checkpointer(CheckpointOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

Checkpointer::~Checkpointer() = default;

StatusOr<SaveHandle> Checkpointer::SaveAsync(
    int64_t step, const std::vector<ShardedTensor>& tensors,
    const std::vector<Blob>& blobs, bool borrow) {
  ASSIGN_OR_RETURN(std::shared_ptr<SaveState> state,
                   impl_->SaveAsync(step, tensors, blobs, borrow));
  return SaveHandle(std::move(state));
}

void Checkpointer::WaitSnapshot() { impl_->WaitSnapshot(); }

Status Checkpointer::Wait() { return impl_->Wait(); }

Status Checkpointer::Poll() { return impl_->Poll(); }

bool Checkpointer::HasFreeSlot() { return impl_->HasFreeSlot(); }

int Checkpointer::consecutive_failures() const {
  return impl_->consecutive_failures();
}

StatusOr<int64_t> Checkpointer::Latest() { return impl_->Latest(); }

int64_t SaveHandle::step() const { return state_ ? state_->step() : -1; }

bool SaveHandle::done() const { return !state_ || state_->done(); }

Status SaveHandle::Wait() const {
  return state_ ? state_->Wait() : absl::OkStatus();
}

StatusOr<std::vector<int64_t>> ListSteps(const std::string& uri) {
  ASSIGN_OR_RETURN(auto storage, OpenStorage(uri));
  return storage->Steps();
}

StatusOr<int64_t> LatestStep(const std::string& uri) {
  ASSIGN_OR_RETURN(auto storage, OpenStorage(uri));
  return NewestUsableStep(*storage);
}

}  // namespace strata::checkpoint
