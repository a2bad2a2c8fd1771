#include "coordinator/state/state_store.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/rocksdb_log.h"

namespace strata::coordinator {
namespace {

constexpr int64_t kFirstBackoffMs = 100;
constexpr int64_t kMaxBackoffMs = 2000;
constexpr char kProbeKey[] = "meta/write_probe";
constexpr size_t kProbeBytes = 256 << 10;

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  std::string msg = absl::StrCat(what, ": ", s.ToString());
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsCorruption()) return absl::DataLossError(msg);
  if (s.IsBusy() || s.IsTryAgain()) return absl::UnavailableError(msg);
  return absl::InternalError(msg);
}

// The errno behind a failed write, from RocksDB's status (which keeps the
// strerror text, not the number).
const char* ErrnoName(const rocksdb::Status& s) {
  if (s.IsNoSpace()) return "ENOSPC";
  const std::string text = s.ToString();
  for (auto [name, err] : {std::pair{"EIO", EIO},
                           {"ENOSPC", ENOSPC},
                           {"EDQUOT", EDQUOT},
                           {"EROFS", EROFS},
                           {"EACCES", EACCES}}) {
    if (absl::StrContains(text, std::strerror(err))) return name;
  }
  return "I/O error";
}

}  // namespace

StatusOr<std::unique_ptr<StateStore>> StateStore::Open(const std::string& dir,
                                                       const Clock* clock) {
  static const SystemClock kSystemClock;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create state dir ", dir, ": ", ec.message()));
  }
  rocksdb::DB* db = nullptr;
  RETURN_IF_ERROR(FromRocks(rocksdb::DB::Open(DbOptions(), dir, &db),
                            absl::StrCat("open state db ", dir)));
  return std::unique_ptr<StateStore>(
      new StateStore(db, dir, clock != nullptr ? clock : &kSystemClock));
}

rocksdb::Options StateStore::DbOptions() {
  rocksdb::Options options;
  options.create_if_missing = true;
  return FailSafeRocksDbOptions(options, GetLogger("CTRL"));
}

StateStore::StateStore(rocksdb::DB* db, std::string dir, const Clock* clock)
    : db_(db),
      dir_(std::move(dir)),
      clock_(clock),
      logger_(GetLogger("CTRL")) {}
StateStore::~StateStore() = default;

Status StateStore::Closed() const {
  return absl::UnavailableError(absl::StrCat(
      "the state db in ", dir_, " is being reopened after: ", health_.error));
}

void StateStore::MarkUnwritable(const Status& error) {
  if (health_.writable) {
    health_.writable = false;
    health_.since_unix_ms = clock_->NowMs();
    health_.failed_writes = 0;
    backoff_ms_ = kFirstBackoffMs;
    next_resume_ms_ = clock_->SteadyNowMs() + backoff_ms_;
    logger_->error(
        "state dir {} is not writable: {}. Every change (submit, cancel, job "
        "transitions, KV) is refused until a write succeeds again; retrying "
        "every <= {} ms",
        dir_, std::string(error.message()), kMaxBackoffMs);
  }
  health_.error = std::string(error.message());
  error_ = error;
}

template <typename WriteFn>
Status StateStore::Mutate(const std::string& what, WriteFn write) {
  MaybeResume();
  if (!health_.writable) {
    ++health_.failed_writes;
    return Status(error_.code(),
                  absl::StrCat(what, ": not done: ", error_.message()));
  }
  rocksdb::Status s = write();
  if (s.ok()) return absl::OkStatus();
  if (s.IsNotFound()) return FromRocks(s, what);
  // Disk full or failing: RocksDB keeps a background error and refuses
  // every later write until DB::Resume().
  const std::string err = ErrnoName(s);
  std::string msg =
      absl::StrCat("cannot persist to the coordinator's state dir ", dir_, " (",
                   err, ": ", s.ToString(), ")");
  Status error = err == "ENOSPC" || err == "EDQUOT"
                     ? absl::ResourceExhaustedError(msg)
                     : absl::UnavailableError(msg);
  MarkUnwritable(error);
  return Status(error.code(), absl::StrCat(what, ": not done: ", msg));
}

void StateStore::MaybeResume() {
  if (health_.writable) return;
  const int64_t now = clock_->SteadyNowMs();
  if (now < next_resume_ms_) return;
  backoff_ms_ = std::min(backoff_ms_ * 2, kMaxBackoffMs);
  next_resume_ms_ = now + backoff_ms_;
  rocksdb::Status s =
      db_ != nullptr ? db_->Resume() : rocksdb::Status::Busy("closed");
  if (!s.ok()) {
    // RocksDB 7.8 does not resume after a failed WAL append (Busy); closing
    // and reopening does, keeping every acknowledged write.
    db_.reset();
    rocksdb::DB* db = nullptr;
    s = rocksdb::DB::Open(DbOptions(), dir_, &db);
    if (s.ok()) {
      db_.reset(db);
      ++generation_;
    }
  }
  if (s.ok()) {
    // A probe as large as a big job record: a few bytes still fitting in
    // the last page of a full disk's WAL must not count as recovered.
    rocksdb::WriteOptions w;
    w.sync = true;
    s = db_->Put(w, kProbeKey, std::string(kProbeBytes, '\0'));
    if (s.ok()) s = db_->Delete(w, kProbeKey);
  }
  if (!s.ok()) {
    health_.error =
        absl::StrCat("cannot persist to the coordinator's state dir ", dir_,
                     " (", ErrnoName(s), ": ", s.ToString(), ")");
    error_ = Status(error_.code(), health_.error);
    return;
  }
  logger_->info(
      "state dir {} is writable again after {} ms ({} changes were refused)",
      dir_, clock_->NowMs() - health_.since_unix_ms, health_.failed_writes);
  health_ = StoreHealth();
  error_ = absl::OkStatus();
}

Status StateStore::Put(const std::string& key, const std::string& value,
                       bool sync) {
  return Mutate(absl::StrCat("put ", key), [&] {
    rocksdb::WriteOptions w;
    w.sync = sync;
    return db_->Put(w, key, value);
  });
}

Status StateStore::Delete(const std::string& key, bool sync) {
  return Mutate(absl::StrCat("delete ", key), [&] {
    rocksdb::WriteOptions w;
    w.sync = sync;
    return db_->Delete(w, key);
  });
}

Status StateStore::Write(const std::vector<Mutation>& mutations, bool sync) {
  if (mutations.empty()) return absl::OkStatus();
  return Mutate(absl::StrCat("write ", mutations.front().first, " (+",
                             mutations.size() - 1, ")"),
                [&] {
                  rocksdb::WriteBatch batch;
                  for (const auto& [key, value] : mutations) {
                    rocksdb::Status s = value.has_value()
                                            ? batch.Put(key, *value)
                                            : batch.Delete(key);
                    if (!s.ok()) return s;
                  }
                  rocksdb::WriteOptions w;
                  w.sync = sync;
                  return db_->Write(w, &batch);
                });
}

StatusOr<std::string> StateStore::Get(const std::string& key) {
  if (db_ == nullptr) return Closed();
  std::string value;
  RETURN_IF_ERROR(FromRocks(db_->Get(rocksdb::ReadOptions(), key, &value),
                            absl::StrCat("get ", key)));
  return value;
}

StatusOr<std::vector<std::pair<std::string, std::string>>> StateStore::Scan(
    const std::string& prefix) {
  if (db_ == nullptr) return Closed();
  std::vector<std::pair<std::string, std::string>> out;
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
       it->Next()) {
    out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  RETURN_IF_ERROR(FromRocks(it->status(), absl::StrCat("scan ", prefix)));
  return out;
}

}  // namespace strata::coordinator
