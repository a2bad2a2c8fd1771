#include "checkpoint/checkpointer.h"

#include <sys/resource.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/catalog.h"
#include "checkpoint/stream_copy.h"
#include "common/logging.h"

namespace strata::checkpoint {

std::string StepDir(const std::string& dir, int64_t step) {
  return absl::StrFormat("%s/step-%012d", dir, step);
}

namespace {

std::string RankFile(int rank, const char* ext) {
  return absl::StrFormat("rank-%05d.%s", rank, ext);
}

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

// Staging copies are cut into pieces of this size, so a thread reaching
// WaitSnapshot can share the rest of a copy under way (1 MiB: ~0.1 ms of
// memcpy, so the copier's piece in hand never holds the fence long).
constexpr size_t kCopyPieceBytes = 1 << 20;

// Appends `n` bytes to the data file, recording block checksums.
Status AppendChunk(DataSink& out, const char* data, size_t n, size_t block,
                   ChunkMeta* chunk) {
  chunk->set_offset(out.size());
  chunk->set_length(n);
  chunk->set_block_bytes(block);
  for (size_t b = 0; b < n; b += block) {
    chunk->add_block_xxh3(XXH3_64bits(data + b, std::min(block, n - b)));
  }
  return out.Append(data, n);
}

}  // namespace

std::string DefaultCatalogPath(const std::string& uri) {
  std::string dir = uri;
  for (const char* scheme : {"rocksdb://", "file://"}) {
    if (dir.rfind(scheme, 0) == 0) dir = dir.substr(std::strlen(scheme));
  }
  return dir + "/catalog.rocksdb";
}

Checkpointer::Checkpointer(CheckpointOptions options)
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

Checkpointer::~Checkpointer() {
  (void)Wait();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
  if (snapshotter_.joinable()) snapshotter_.join();
}

Status Checkpointer::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return in_flight_ == 0; });
  Status st = last_;
  last_ = absl::OkStatus();
  return st;
}

// Opens the storage on first use (the caller's thread only).
Status Checkpointer::EnsureStorage() {
  if (!storage_) storage_ = opts_.storage;
  if (!storage_) {
    ASSIGN_OR_RETURN(storage_,
                     OpenStorage(opts_.uri, opts_.rank, /*writable=*/true));
  }
  return absl::OkStatus();
}

StatusOr<int64_t> Checkpointer::Latest() {
  RETURN_IF_ERROR(EnsureStorage());
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, storage_->Steps());
  if (steps.empty()) {
    return absl::NotFoundError("no committed checkpoint in " + opts_.uri);
  }
  return steps.back();
}

bool SaveHandle::done() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

Status SaveHandle::Wait() const {
  if (!state_) return absl::OkStatus();
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  return state_->status;
}

StatusOr<SaveHandle> Checkpointer::SaveAsync(
    int64_t step, const std::vector<ShardedTensor>& tensors,
    const std::vector<Blob>& blobs) {
  if (opts_.uri.empty() || !opts_.store || opts_.world_size < 1) {
    return absl::InvalidArgumentError(
        "checkpointer needs a URI, a store and a world size");
  }
  for (const ShardedTensor& t : tensors) RETURN_IF_ERROR(t.Validate());
  Staged staged;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock,
             [&] { return in_flight_ < std::max(1, opts_.max_in_flight); });
    ++in_flight_;
    if (!pool_.empty()) {
      staged = std::move(pool_.back());
      pool_.pop_back();
    }
  }
  if (Status opened = EnsureStorage(); !opened.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    cv_.notify_all();
    return opened;
  }
  staged.step = step;
  staged.parts.clear();
  for (const ShardedTensor& t : tensors) staged.parts.push_back(OwnPart(t));
  staged.blobs = blobs;
  SaveHandle handle;
  handle.state_ = std::make_shared<SaveHandle::State>();
  handle.state_->step = step;
  staged.handle = handle.state_;
  PlanCopies(staged);
  if (!opts_.deferred_snapshot) {
    for (const Copy& c : staged.copies)
      internal::StreamCopy(c.dst, c.src, c.len);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    (opts_.deferred_snapshot ? unstaged_ : queue_).push_back(std::move(staged));
  }
  cv_.notify_all();
  return handle;
}

void Checkpointer::WaitSnapshot() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (copying_) {  // help the copier finish, then wait for its hand-off
      std::shared_ptr<CopyJob> job = copying_;
      lock.unlock();
      RunCopies(*job);
      lock.lock();
      cv_.notify_all();
      cv_.wait(lock, [&] { return copying_ != job; });
    } else if (!unstaged_.empty()) {  // the copier has not started: copy
      StageFront(lock);
    } else {
      return;
    }
  }
}

Checkpointer::Part Checkpointer::OwnPart(const ShardedTensor& t) {
  Part p;
  p.tensor = t;
  p.tensor.replica_id = 0;
  p.tensor.num_replicas = 1;
  if (t.local_shape.empty()) {
    p.has_chunk = t.replica_id == 0;
    return p;
  }
  const int64_t rows = t.local_shape[0];
  const int64_t begin = rows * t.replica_id / t.num_replicas;
  const int64_t end = rows * (t.replica_id + 1) / t.num_replicas;
  const size_t row_bytes = rows > 0 ? t.Bytes() / static_cast<size_t>(rows) : 0;
  p.tensor.local_shape[0] = end - begin;
  p.tensor.global_offset[0] += begin;
  p.tensor.data = static_cast<char*>(t.data) + begin * row_bytes;
  // A replica without rows writes nothing (an empty tensor still gets its
  // one empty chunk, from replica 0).
  p.has_chunk =
      p.tensor.NumElements() > 0 || (t.NumElements() == 0 && t.replica_id == 0);
  return p;
}

// Sizes the save's staging buffers, which are reused across saves (their
// pages are already faulted in, so copies run at memcpy speed), points the
// parts at them and lists the copies to make, in pieces.
void Checkpointer::PlanCopies(Staged& s) {
  s.copies.clear();
  for (size_t i = 0; i < s.parts.size(); ++i) {
    ShardedTensor& t = s.parts[i].tensor;
    if (!s.parts[i].has_chunk || t.Bytes() == 0) continue;
    // Keyed by name and position: a rank may hold two shards of a tensor.
    HostBuffer& buf = s.buffers[absl::StrCat(t.name, "#", i)];
    buf.Resize(t.Bytes());
    const char* src = static_cast<const char*>(t.data);
    for (size_t o = 0; o < t.Bytes(); o += kCopyPieceBytes) {
      s.copies.push_back(
          {src + o, buf.data() + o, std::min(kCopyPieceBytes, t.Bytes() - o)});
    }
    t.data = buf.data();
  }
}

void Checkpointer::RunCopies(CopyJob& job) {
  const std::vector<Copy>& copies = *job.copies;
  for (size_t i = job.next++; i < copies.size(); i = job.next++) {
    internal::StreamCopy(copies[i].dst, copies[i].src, copies[i].len);
    --job.left;
  }
}

// Copies the oldest deferred save (mu_ held on entry and exit; released
// while copying) and hands it to the persist thread. WaitSnapshot may share
// the copy meanwhile.
void Checkpointer::StageFront(std::unique_lock<std::mutex>& lock) {
  Staged staged = std::move(unstaged_.front());
  unstaged_.pop_front();
  auto job = std::make_shared<CopyJob>();
  job->copies = &staged.copies;
  job->left = staged.copies.size();
  copying_ = job;
  lock.unlock();
  RunCopies(*job);
  lock.lock();
  cv_.wait(lock, [&] { return job->left == 0; });  // a helper's last piece
  copying_ = nullptr;
  queue_.push_back(std::move(staged));
  cv_.notify_all();
}

void Checkpointer::SnapshotLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] {
      return stopping_ || (!unstaged_.empty() && copying_ == nullptr);
    });
    if (unstaged_.empty()) return;  // stopping
    if (copying_ == nullptr) StageFront(lock);
  }
}

void Checkpointer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;
    Staged staged = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Status st = Persist(staged);
    if (!st.ok()) {
      GetLogger("CKPT")->error("checkpoint {}: {}", staged.step,
                               std::string(st.message()));
    }
    {
      std::lock_guard<std::mutex> done(staged.handle->mu);
      staged.handle->done = true;
      staged.handle->status = st;
    }
    staged.handle->cv.notify_all();
    staged.handle.reset();
    lock.lock();
    if (!st.ok() && last_.ok()) last_ = st;
    pool_.push_back(std::move(staged));
    --in_flight_;
    cv_.notify_all();
  }
}

Status Checkpointer::Persist(const Staged& staged) {
  const int64_t step = staged.step;
  Storage& storage = *storage_;
  RETURN_IF_ERROR(storage.CollectGarbage(step));
  const std::string data_name = RankFile(opts_.rank, "data");
  ASSIGN_OR_RETURN(auto out, storage.CreateData(step, data_name));
  RankIndex index;
  index.set_rank(opts_.rank);
  Status st;
  for (const Part& part : staged.parts) {
    const ShardedTensor& t = part.tensor;
    TensorMeta* meta = index.add_tensors();
    meta->set_name(t.name);
    meta->set_dtype(DTypeName(t.dtype));
    for (int64_t d : t.global_shape) meta->add_global_shape(d);
    if (!part.has_chunk) continue;
    ChunkMeta* chunk = meta->add_chunks();
    for (int64_t d : t.global_offset) chunk->add_global_offset(d);
    for (int64_t d : t.local_shape) chunk->add_shape(d);
    chunk->set_file(data_name);
    st = AppendChunk(*out, static_cast<const char*>(t.data), t.Bytes(),
                     opts_.block_bytes, chunk);
    if (!st.ok()) break;
  }
  for (const Blob& b : staged.blobs) {
    if (!st.ok()) break;
    if (!b.per_rank && opts_.rank != 0) continue;
    BlobMeta* meta = index.add_blobs();
    meta->set_name(b.per_rank ? absl::StrCat(opts_.rank, "/", b.name) : b.name);
    meta->set_file(data_name);
    meta->set_offset(out->size());
    meta->set_length(b.bytes.size());
    meta->set_xxh3(XXH3_64bits(b.bytes.data(), b.bytes.size()));
    ChunkMeta scratch;
    st = AppendChunk(*out, b.bytes.data(), b.bytes.size(), opts_.block_bytes,
                     &scratch);
  }
  if (st.ok()) st = out->Finish();
  RETURN_IF_ERROR(st);
  RETURN_IF_ERROR(storage.PutMeta(step, RankFile(opts_.rank, "index"),
                                  index.SerializeAsString()));

  // Commit: rank 0 waits for every rank's durable index, then publishes the
  // manifest (the commit point) and LATEST.
  const std::string key = absl::StrCat("ckpt/", step, "/done/");
  RETURN_IF_ERROR(opts_.store->Set(key + std::to_string(opts_.rank), "1"));
  if (opts_.rank != 0) return absl::OkStatus();
  std::vector<std::string> keys;
  for (int r = 0; r < opts_.world_size; ++r)
    keys.push_back(key + std::to_string(r));
  RETURN_IF_ERROR(opts_.store->Wait(keys, opts_.commit_timeout));
  Manifest manifest;
  manifest.set_step(step);
  manifest.set_world_size(opts_.world_size);
  manifest.set_created_by("strata");
  std::map<std::string, int> by_name;
  for (int r = 0; r < opts_.world_size; ++r) {
    const std::string name = RankFile(r, "index");
    auto bytes = storage.GetMeta(step, name);
    RankIndex ri;
    if (!bytes.ok() || !ri.ParseFromString(*bytes)) {
      return absl::DataLossError("cannot read rank index " +
                                 storage.Where(step, name));
    }
    for (const TensorMeta& t : ri.tensors()) {
      auto [it, inserted] = by_name.emplace(t.name(), manifest.tensors_size());
      if (inserted) {
        TensorMeta* m = manifest.add_tensors();
        *m = t;
        m->clear_chunks();
      }
      TensorMeta* m = manifest.mutable_tensors(it->second);
      if (m->dtype() != t.dtype() ||
          !std::equal(m->global_shape().begin(), m->global_shape().end(),
                      t.global_shape().begin(), t.global_shape().end())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor '", t.name(),
            "' saved with different dtype or global shape by rank ", r));
      }
      for (const ChunkMeta& c : t.chunks()) *m->add_chunks() = c;
    }
    for (const BlobMeta& b : ri.blobs()) *manifest.add_blobs() = b;
  }
  RETURN_IF_ERROR(
      storage.PutMeta(step, "manifest.pb", manifest.SerializeAsString()));
  RETURN_IF_ERROR(storage.PutMeta(-1, "LATEST", std::to_string(step)));
  if (opts_.catalog) {
    RETURN_IF_ERROR(
        opts_.catalog->RecordCommit(opts_.job, opts_.uri, manifest));
  }
  // Retention: keep the newest keep_last plus every keep_every-th step.
  if (opts_.keep_last > 0) {
    auto steps = storage.Steps();
    if (steps.ok() && static_cast<int>(steps->size()) > opts_.keep_last) {
      for (size_t i = 0; i + opts_.keep_last < steps->size(); ++i) {
        const int64_t s = (*steps)[i];
        if (opts_.keep_every > 0 && s % opts_.keep_every == 0) continue;
        // Uncommits first; other ranks drop their part at their next save
        // (CollectGarbage).
        RETURN_IF_ERROR(storage.RemoveStep(s));
        if (opts_.catalog)
          RETURN_IF_ERROR(opts_.catalog->RecordRemoval(opts_.job, s));
      }
    }
  }
  return absl::OkStatus();
}

StatusOr<std::vector<int64_t>> ListSteps(const std::string& uri) {
  ASSIGN_OR_RETURN(auto storage, OpenStorage(uri));
  return storage->Steps();
}

StatusOr<int64_t> LatestStep(const std::string& uri) {
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListSteps(uri));
  if (steps.empty())
    return absl::NotFoundError("no committed checkpoint in " + uri);
  return steps.back();
}

StatusOr<Manifest> ReadManifest(const std::string& uri, int64_t step) {
  ASSIGN_OR_RETURN(auto storage, OpenStorage(uri));
  return ReadManifest(*storage, step);
}

StatusOr<Manifest> ReadManifest(Storage& storage, int64_t step) {
  auto bytes = storage.GetMeta(step, "manifest.pb");
  if (!bytes.ok()) {
    return absl::NotFoundError(
        absl::StrCat("no committed checkpoint at step ", step, " (",
                     storage.Where(step, "manifest.pb"), " missing)"));
  }
  Manifest m;
  if (!m.ParseFromString(*bytes)) {
    return absl::DataLossError("corrupt manifest " +
                               storage.Where(step, "manifest.pb"));
  }
  return m;
}

}  // namespace strata::checkpoint
