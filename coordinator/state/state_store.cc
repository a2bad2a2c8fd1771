#include "coordinator/state/state_store.h"

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/rocks_db.h"

namespace strata::coordinator {
namespace {

constexpr int64_t kFirstBackoffMs = 100;
constexpr int64_t kMaxBackoffMs = 2000;
constexpr char kProbeKey[] = "meta/write_probe";
constexpr size_t kProbeBytes = 256 << 10;

// "cannot persist to the coordinator's state dir D (ENOSPC: <error>)", with
// the error's code.
Status PersistError(const std::string& dir, const Status& error) {
  const std::string msg = absl::StrCat(
      "cannot persist to the coordinator's state dir ", dir, " (",
      RocksErrnoName(std::string(error.message())), ": ", error.message(), ")");
  return absl::IsResourceExhausted(error) ? absl::ResourceExhaustedError(msg)
                                          : absl::UnavailableError(msg);
}

}  // namespace

StatusOr<std::unique_ptr<StateStore>> StateStore::Open(const std::string& dir,
                                                       const Clock* clock) {
  static const SystemClock kSystemClock;
  rocksdb::Options options;
  options.create_if_missing = true;
  // The coordinator writes small records (a job, an event, a KV key: ~0.1-
  // 2 KB) and must hold bounded memory for months: a memtable of
  // kMemtableBytes (RocksDB's default, 64 MB, suits bulk loads) flushed to
  // an SST when full, so its memory does not grow with the jobs run.
  options.write_buffer_size = kMemtableBytes;
  // Reads (status of a job that left memory, a calibration) go through a
  // kBlockCacheBytes cache that also holds the SST files' index blocks,
  // which would otherwise stay in memory per file and grow with the data.
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(kBlockCacheBytes);
  table.cache_index_and_filter_blocks = true;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  ASSIGN_OR_RETURN(std::unique_ptr<RocksDb> db,
                   RocksDb::Open(options, dir, GetLogger("CTRL")));
  return std::unique_ptr<StateStore>(new StateStore(
      std::move(db), dir, clock != nullptr ? clock : &kSystemClock));
}

StateStore::StateStore(std::unique_ptr<RocksDb> db, std::string dir,
                       const Clock* clock)
    : db_(std::move(db)),
      dir_(std::move(dir)),
      clock_(clock),
      logger_(GetLogger("CTRL")) {}
StateStore::~StateStore() = default;

StateStore::Memory StateStore::MemoryUsage() {
  Memory m;
  auto db = db_->GetForRead();
  if (!db.ok()) return m;
  (void)(*db)->GetIntProperty("rocksdb.cur-size-all-mem-tables", &m.memtables);
  (void)(*db)->GetIntProperty("rocksdb.block-cache-usage", &m.block_cache);
  (void)(*db)->GetIntProperty("rocksdb.estimate-table-readers-mem",
                              &m.table_readers);
  return m;
}

int64_t StateStore::generation() const { return db_->reopens(); }

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

Status StateStore::Mutate(const std::string& what, rocksdb::WriteBatch& batch,
                          bool sync) {
  MaybeResume();
  if (!health_.writable) {
    ++health_.failed_writes;
    return Status(error_.code(),
                  absl::StrCat(what, ": not done: ", error_.message()));
  }
  Status st = db_->Write(batch, sync, what);
  if (st.ok() || absl::IsNotFound(st)) return st;
  // Disk full or failing: RocksDB refuses every later write until the
  // database is recovered (MaybeResume).
  const Status error = PersistError(dir_, st);
  MarkUnwritable(error);
  return Status(error.code(),
                absl::StrCat(what, ": not done: ", error.message()));
}

void StateStore::MaybeResume() {
  if (health_.writable) return;
  const int64_t now = clock_->SteadyNowMs();
  if (now < next_resume_ms_) return;
  backoff_ms_ = std::min(backoff_ms_ * 2, kMaxBackoffMs);
  next_resume_ms_ = now + backoff_ms_;
  // A probe as large as a big job record: a few bytes still fitting in the
  // last page of a full disk's WAL must not count as recovered. Get()
  // recovers the database first when the last write broke it.
  rocksdb::WriteBatch probe;
  probe.Put(kProbeKey, std::string(kProbeBytes, '\0'));
  probe.Delete(kProbeKey);
  Status st = db_->Write(probe, /*sync=*/true, "probe write");
  if (!st.ok()) {
    error_ = PersistError(dir_, st);
    health_.error = std::string(error_.message());
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
  rocksdb::WriteBatch batch;
  batch.Put(key, value);
  return Mutate(absl::StrCat("put ", key), batch, sync);
}

Status StateStore::Delete(const std::string& key, bool sync) {
  rocksdb::WriteBatch batch;
  batch.Delete(key);
  return Mutate(absl::StrCat("delete ", key), batch, sync);
}

Status StateStore::Write(const std::vector<Mutation>& mutations, bool sync) {
  if (mutations.empty()) return absl::OkStatus();
  rocksdb::WriteBatch batch;
  for (const auto& [key, value] : mutations) {
    if (value.has_value()) {
      batch.Put(key, *value);
    } else {
      batch.Delete(key);
    }
  }
  return Mutate(absl::StrCat("write ", mutations.front().first, " (+",
                             mutations.size() - 1, ")"),
                batch, sync);
}

StatusOr<std::string> StateStore::Get(const std::string& key) {
  ASSIGN_OR_RETURN(std::shared_ptr<rocksdb::DB> db, db_->GetForRead());
  std::string value;
  RETURN_IF_ERROR(FromRocks(db->Get(rocksdb::ReadOptions(), key, &value),
                            absl::StrCat("get ", key)));
  return value;
}

StatusOr<std::vector<std::pair<std::string, std::string>>> StateStore::Scan(
    const std::string& prefix) {
  ASSIGN_OR_RETURN(std::shared_ptr<rocksdb::DB> db, db_->GetForRead());
  std::vector<std::pair<std::string, std::string>> out;
  std::unique_ptr<rocksdb::Iterator> it(
      db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
       it->Next()) {
    out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  RETURN_IF_ERROR(FromRocks(it->status(), absl::StrCat("scan ", prefix)));
  return out;
}

}  // namespace strata::coordinator
