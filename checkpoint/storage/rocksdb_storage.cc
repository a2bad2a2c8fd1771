// rocksdb:// storage: one embedded RocksDB per rank under DIR
// (DIR/rank-<5 digits>.rocksdb), so ranks in different processes never
// share a writer. Keys:
//   d/<step:012>/<name>/<piece:012>   1 MiB pieces of a data stream
//   m/<step:012>/<name>               metadata (index, manifest)
//   m/root/<name>                     LATEST
// Data streams and indexes live in their rank's instance, manifests and
// LATEST in rank 0's. Other ranks' instances are opened read-only and
// reopened before metadata reads (see Options() for why not secondaries).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/internal/file_util.h"
#include "checkpoint/storage/storages.h"
#include "common/mutex.h"
#include "common/rocks_db.h"
#include "common/rocksdb_log.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"

namespace strata::checkpoint {
namespace {

constexpr size_t kPiece = 1 << 20;
// A read-only instance opened while the owner flushes can miss what the
// flush moved (it read the version before the flush and finds the WAL
// gone) or fail to open: reads that find nothing, and failed opens, are
// tried again with fresh instances this many times in all, waiting a little
// longer each time (ReadOnlyBackoff) so that a flush has finished. Each save
// flushes (RocksSink::Finish), so concurrent readers do meet this.
constexpr int kReadOnlyRetries = 8;

// Before retry `attempt` (1-based): 2, 4, 8, 16, 32, 50, 50 ms (~160 ms in
// all), so a busy owner's flush or compaction can finish meanwhile.
void ReadOnlyBackoff(int attempt) {
  std::this_thread::sleep_for(
      std::chrono::milliseconds(std::min(50, 1 << std::min(attempt, 6))));
}

std::string StepKey(int64_t step) {
  return step < 0 ? std::string("root") : absl::StrFormat("%012d", step);
}
std::string MetaKey(int64_t step, const std::string& name) {
  return "m/" + StepKey(step) + "/" + name;
}
std::string DataKey(int64_t step, const std::string& name, uint64_t piece) {
  return absl::StrFormat("d/%s/%s/%012d", StepKey(step), name, piece);
}

// "rank-00003.data" / "rank-00003.index" -> 3; manifest and LATEST -> 0.
int OwnerOf(const std::string& name) {
  int rank = 0;
  if (name.rfind("rank-", 0) == 0 && absl::SimpleAtoi(name.substr(5, 5), &rank))
    return rank;
  return 0;
}

// db->Get(key), falling back to an iterator positioned at `key` when Get
// answers NotFound: RocksDB 7.8.3 with blob files sometimes answered
// NotFound to a Get of a live key after compactions, while iterators still
// returned it with its value (about 1 in 20 runs of ckpt_enospc_test's 30
// saves with retention; the blob files were intact).
rocksdb::Status GetValue(rocksdb::DB& db, const std::string& key,
                         std::string* value) {
  rocksdb::Status s = db.Get(rocksdb::ReadOptions(), key, value);
  if (!s.IsNotFound()) return s;
  std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(rocksdb::ReadOptions()));
  it->Seek(key);
  if (it->Valid() && it->key() == key) {
    value->assign(it->value().data(), it->value().size());
    return rocksdb::Status::OK();
  }
  return it->status().ok() ? s : it->status();
}

class RocksSink final : public DataSink {
 public:
  RocksSink(RocksDb* db, int64_t step, std::string name)
      : db_(db), step_(step), name_(std::move(name)) {
    piece_.reserve(kPiece);
  }
  Status Append(const char* data, size_t n) override {
    while (n > 0) {
      const size_t k = std::min(n, kPiece - piece_.size());
      piece_.append(data, k);
      data += k;
      n -= k;
      size_ += k;
      if (piece_.size() == kPiece) RETURN_IF_ERROR(Flush(false));
    }
    return absl::OkStatus();
  }
  // Syncs the WAL, then flushes: the stream's values land in blob files of
  // their own, which leave the disk once the step is deleted.
  Status Finish() override {
    RETURN_IF_ERROR(Flush(/*sync=*/true));
    return db_->Flush(absl::StrCat("rocksdb ", db_->path(), " flush ", name_,
                                   " of step ", step_));
  }
  uint64_t size() const override { return size_; }

 private:
  Status Flush(bool sync) {
    if (!piece_.empty() || sync) {
      rocksdb::WriteBatch batch;
      batch.Put(DataKey(step_, name_, next_), piece_);
      RETURN_IF_ERROR(
          db_->Write(batch, sync,
                     absl::StrCat("rocksdb ", db_->path(), " put ", name_,
                                  " piece ", next_, " of step ", step_)));
      ++next_;
    }
    piece_.clear();
    return absl::OkStatus();
  }
  RocksDb* db_;
  int64_t step_;
  std::string name_;
  std::string piece_;
  uint64_t next_ = 0, size_ = 0;
};

class RocksDbStorage final : public Storage {
 public:
  RocksDbStorage(std::string dir, int rank, bool writable)
      : dir_(std::move(dir)), rank_(rank), writable_(writable) {}
  ~RocksDbStorage() override {
    MutexLock lock(mu_);
    readers_.clear();
  }

  Status Init() {
    if (!writable_) return absl::OkStatus();
    ASSIGN_OR_RETURN(
        own_, RocksDb::Open(Options(), DbPath(rank_), GetLogger("ROCKSDB")));
    return absl::OkStatus();
  }

  StatusOr<std::unique_ptr<DataSink>> CreateData(
      int64_t step, const std::string& name) override {
    RETURN_IF_ERROR(CheckWritable(name));
    return std::unique_ptr<DataSink>(
        std::make_unique<RocksSink>(own_.get(), step, name));
  }

  Status ReadData(int64_t step, const std::string& name, uint64_t offset,
                  void* buf, size_t n) override {
    // A reader opened before this step was written does not see it, nor
    // one opened while the owner flushed: retries with fresh instances.
    Status s = ReadDataOnce(step, name, offset, buf, n, /*fresh=*/false);
    for (int attempt = 1; attempt < kReadOnlyRetries; ++attempt) {
      if (s.ok() || (writable_ && OwnerOf(name) == rank_)) return s;
      ReadOnlyBackoff(attempt);
      s = ReadDataOnce(step, name, offset, buf, n, /*fresh=*/true);
    }
    return s;
  }

  Status ReadDataOnce(int64_t step, const std::string& name, uint64_t offset,
                      void* buf, size_t n, bool fresh) {
    ASSIGN_OR_RETURN(std::shared_ptr<rocksdb::DB> db, Db(OwnerOf(name), fresh));
    char* out = static_cast<char*>(buf);
    std::string value;
    for (uint64_t pos = offset; pos < offset + n;) {
      const uint64_t piece = pos / kPiece, within = pos % kPiece;
      auto s = GetValue(*db, DataKey(step, name, piece), &value);
      if (!s.ok()) {
        return absl::DataLossError(absl::StrCat(Where(step, name), " piece ",
                                                piece, " is missing (",
                                                s.ToString(), ")"));
      }
      if (value.size() <= within) {
        return absl::DataLossError(
            absl::StrCat(Where(step, name), " is truncated at byte ", pos));
      }
      const size_t k =
          std::min<uint64_t>(value.size() - within, offset + n - pos);
      std::memcpy(out + (pos - offset), value.data() + within, k);
      pos += k;
    }
    return absl::OkStatus();
  }

  Status PutMeta(int64_t step, const std::string& name,
                 const std::string& bytes) override {
    RETURN_IF_ERROR(CheckWritable(name));
    rocksdb::WriteBatch batch;
    batch.Put(MetaKey(step, name), bytes);
    return own_->Write(batch, /*sync=*/true,
                       "rocksdb put " + Where(step, name));
  }

  StatusOr<std::string> GetMeta(int64_t step,
                                const std::string& name) override {
    // A fresh read-only instance sees every synced write of the owner —
    // unless the owner flushed while it opened (kReadOnlyRetries).
    rocksdb::Status s;
    std::string value;
    for (int attempt = 0; attempt < kReadOnlyRetries; ++attempt) {
      if (attempt > 0) ReadOnlyBackoff(attempt);
      ASSIGN_OR_RETURN(std::shared_ptr<rocksdb::DB> db,
                       Db(OwnerOf(name), /*fresh=*/true));
      s = GetValue(*db, MetaKey(step, name), &value);
      if (!s.IsNotFound() || (writable_ && OwnerOf(name) == rank_)) break;
    }
    if (s.IsNotFound())
      return absl::NotFoundError(Where(step, name) + " is missing");
    RETURN_IF_ERROR(FromRocks(s, "rocksdb get " + Where(step, name)));
    return value;
  }

  StatusOr<std::vector<int64_t>> Steps() override {
    auto db = Db(0, /*fresh=*/true);
    if (!db.ok()) {
      if (db.status().code() == absl::StatusCode::kNotFound)
        return std::vector<int64_t>{};
      return db.status();
    }
    std::vector<int64_t> steps;
    std::unique_ptr<rocksdb::Iterator> it(
        (*db)->NewIterator(rocksdb::ReadOptions()));
    for (it->Seek("m/"); it->Valid() && it->key().starts_with("m/");
         it->Next()) {
      const std::string key = it->key().ToString();  // m/<step>/<name>
      int64_t step = 0;
      if (key.size() > 14 && key.substr(14) == "/manifest.pb" &&
          absl::SimpleAtoi(key.substr(2, 12), &step)) {
        steps.push_back(step);
      }
    }
    return steps;
  }

  // The pin of a step is an flock on DIR/step-<12 digits>.pin (created by
  // the first reader, removed with the step).
  StatusOr<std::unique_ptr<StepPin>> PinStep(int64_t step) override {
    auto pin = internal::PinFile(PinPath(step), /*create=*/true);
    if (!pin.ok()) {
      if (!absl::IsPermissionDenied(pin.status())) return pin.status();
      // A read-only checkpoint directory: nobody can remove the step.
      pin = std::make_unique<StepPin>();
    }
    // A read-only instance opened while the owner flushed can also show a
    // step retention has just removed (the tombstone went with the WAL it
    // did not read): the step counts as pinned only if a second fresh look,
    // after a pause, still finds it. Once pinned, it cannot be removed.
    auto manifest = GetMeta(step, "manifest.pb");
    if (manifest.ok()) {
      ReadOnlyBackoff(3);
      manifest = GetMeta(step, "manifest.pb");
    }
    if (manifest.ok()) return pin;
    pin->reset();
    if (auto fd = internal::LockExclusive(PinPath(step), false, ""); fd.ok()) {
      unlink(PinPath(step).c_str());
      close(*fd);
    }
    if (absl::IsNotFound(manifest.status())) {
      return absl::NotFoundError(
          absl::StrFormat("no committed checkpoint at step %d (%s missing)",
                          step, Where(step, "manifest.pb")));
    }
    return manifest.status();
  }

  Status RemoveStep(int64_t step) override {
    if (rank_ == 0 && writable_) {
      ASSIGN_OR_RETURN(
          int lock, internal::LockExclusive(PinPath(step), /*create=*/true,
                                            absl::StrFormat("step %d", step)));
      rocksdb::WriteBatch batch;
      batch.Delete(MetaKey(step, "manifest.pb"));
      Status st = own_->Write(batch, /*sync=*/true,
                              "rocksdb delete " + Where(step, "manifest.pb"));
      unlink(PinPath(step).c_str());
      close(lock);
      RETURN_IF_ERROR(st);
    }
    return DeleteOwn(step);
  }

  Status CollectGarbage(int64_t current,
                        const std::set<int64_t>& failed) override {
    if (!writable_) return absl::OkStatus();
    ASSIGN_OR_RETURN(std::vector<int64_t> committed, Steps());
    std::set<int64_t> keep(committed.begin(), committed.end());
    keep.insert(current);
    ASSIGN_OR_RETURN(std::shared_ptr<rocksdb::DB> db, own_->Get());
    // The steps with entries of ours, data streams (a save that failed
    // before its index) included: one seek per step, skipping its keys.
    std::set<int64_t> mine;
    std::unique_ptr<rocksdb::Iterator> it(
        db->NewIterator(rocksdb::ReadOptions()));
    for (const std::string prefix : {"m/", "d/"}) {
      for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);) {
        const std::string key = it->key().ToString();
        int64_t step = 0;
        if (key.size() < 2 + 12 ||
            !absl::SimpleAtoi(key.substr(2, 12), &step)) {
          break;  // "m/root/..." and beyond
        }
        mine.insert(step);
        it->Seek(prefix + key.substr(2, 12) + "0");  // past this step
      }
    }
    RETURN_IF_ERROR(FromRocks(it->status(), "rocksdb scan " + DbPath(rank_)));
    it.reset();
    // A step newer than the newest commit may still be committing (rank 0
    // merges the ranks' indexes after they moved on): garbage only if this
    // rank's own save of it failed.
    const int64_t newest =
        committed.empty()
            ? -1
            : *std::max_element(committed.begin(), committed.end());
    for (int64_t s : mine) {
      if (!keep.count(s) && (s < newest || failed.contains(s))) {
        RETURN_IF_ERROR(DeleteOwn(s));
      }
    }
    return absl::OkStatus();
  }

  std::string Where(int64_t step, const std::string& name) const override {
    return absl::StrCat("rocksdb ", DbPath(OwnerOf(name)), " step ", step, " ",
                        name);
  }

 private:
  // Chunk pieces (1 MiB) go to blob files, keeping the LSM tree small
  // (BlobDB, RocksDB wiki "BlobDB"). Other ranks' instances are read through
  // read-only instances, not secondaries: RocksDB 7.8.3 (Debian 12) crashes
  // in a secondary reading a blob value (null session id in the blob cache
  // key), a read-only instance does not.
  static rocksdb::Options Options() {
    rocksdb::Options o;
    o.create_if_missing = true;
    o.enable_blob_files = true;
    o.min_blob_size = 4096;
    o.blob_file_size = 256 << 20;
    o.compression = rocksdb::kNoCompression;  // tensors do not compress
    o.blob_compression_type = rocksdb::kNoCompression;
    return o;
  }
  std::string PinPath(int64_t step) const {
    return StepDir(dir_, step) + ".pin";
  }
  std::string DbPath(int rank) const {
    return absl::StrFormat("%s/rank-%05d.rocksdb", dir_, rank);
  }

  Status CheckWritable(const std::string& name) const {
    if (!writable_ || OwnerOf(name) != rank_) {
      return absl::FailedPreconditionError("rank " + std::to_string(rank_) +
                                           " cannot write " + name);
    }
    return absl::OkStatus();
  }

  // The instance of `rank`: ours (the primary), or a read-only instance of
  // another rank's database. A read-only instance sees the database as it
  // was when opened (WAL included); `fresh` reopens it to see later writes.
  // Callers share ownership, so a reopen never frees an instance in use.
  StatusOr<std::shared_ptr<rocksdb::DB>> Db(int rank, bool fresh) {
    if (writable_ && rank == rank_) return own_->Get();
    MutexLock lock(mu_);
    auto it = readers_.find(rank);
    if (it != readers_.end() && !fresh) return it->second;
    if (access((DbPath(rank) + "/CURRENT").c_str(), F_OK) != 0) {
      return absl::NotFoundError("no rocksdb checkpoint store at " +
                                 DbPath(rank));
    }
    rocksdb::Options o =
        FailSafeRocksDbOptions(Options(), GetLogger("ROCKSDB"));
    o.create_if_missing = false;
    o.max_open_files = -1;  // hold every file: the primary may delete them
    rocksdb::DB* db = nullptr;
    rocksdb::Status s;
    for (int attempt = 0; attempt < kReadOnlyRetries; ++attempt) {
      if (attempt > 0) ReadOnlyBackoff(attempt);
      s = rocksdb::DB::OpenForReadOnly(o, DbPath(rank), &db);
      // A WAL or table the owner's flush or compaction dropped meanwhile
      // reads as IOError or Corruption ("Can't access ...sst").
      if (s.ok() || !(s.IsIOError() || s.IsCorruption())) break;
    }
    RETURN_IF_ERROR(FromRocks(s, "open rocksdb " + DbPath(rank)));
    std::shared_ptr<rocksdb::DB> shared(db);
    readers_[rank] = shared;
    return shared;
  }

  Status DeleteOwn(int64_t step) {
    if (!writable_) return absl::OkStatus();
    const std::string s = StepKey(step);
    rocksdb::WriteBatch batch;
    batch.DeleteRange("d/" + s + "/", "d/" + s + "0");
    batch.DeleteRange("m/" + s + "/", "m/" + s + "0");
    const std::string what =
        absl::StrCat("rocksdb ", DbPath(rank_), " delete step ", step);
    RETURN_IF_ERROR(own_->Write(batch, /*sync=*/true, what));
    // Frees the disk: without a flush the deleted values stay in the WAL
    // (and the memtable) until 64 MiB of later writes fill it.
    return own_->Flush(what);
  }

  const std::string dir_;
  const int rank_;
  const bool writable_;
  std::unique_ptr<RocksDb> own_;  // this rank's instance when writable
  Mutex mu_;
  // Read-only instances of other ranks' databases.
  std::map<int, std::shared_ptr<rocksdb::DB>> readers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

StatusOr<std::shared_ptr<Storage>> NewRocksDbStorage(const std::string& dir,
                                                     int rank, bool writable) {
  if (writable) {
    std::string cmd = "mkdir -p '" + dir + "'";
    if (std::system(cmd.c_str()) != 0)
      return absl::UnavailableError("cannot create " + dir);
  }
  auto s = std::make_shared<RocksDbStorage>(dir, rank, writable);
  RETURN_IF_ERROR(s->Init());
  return std::shared_ptr<Storage>(std::move(s));
}

StatusOr<std::shared_ptr<Storage>> OpenStorage(const std::string& uri, int rank,
                                               bool writable) {
  if (uri.rfind("rocksdb://", 0) == 0)
    return NewRocksDbStorage(uri.substr(10), rank, writable);
  if (uri.rfind("file://", 0) == 0) return NewFileStorage(uri.substr(7), rank);
  if (uri.rfind("mem://", 0) == 0) return NewMemStorage(uri.substr(6), rank);
  if (uri.find("://") != std::string::npos) {
    return absl::InvalidArgumentError(
        "unsupported checkpoint URI '" + uri +
        "' (use file:///path, rocksdb:///path or mem://)");
  }
  return NewFileStorage(uri, rank);
}

}  // namespace strata::checkpoint
