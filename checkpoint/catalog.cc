// Keys: "job/<job>/step/<step:012>" -> CatalogEntry (uri, committed,
// manifest); "job/<job>/latest" -> step. Values are protos, so a damaged
// value is reported as DataLoss.
#include "checkpoint/catalog.h"

#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "checkpoint/reader.h"
#include "common/logging.h"
#include "common/rocks_db.h"

namespace strata::checkpoint {
namespace {

std::string StepKey(const std::string& job, int64_t step) {
  return absl::StrFormat("job/%s/step/%012d", job, step);
}
std::string LatestKey(const std::string& job) {
  return "job/" + job + "/latest";
}

}  // namespace

Catalog::Catalog(std::unique_ptr<RocksDb> db) : db_(std::move(db)) {}

StatusOr<std::unique_ptr<Catalog>> Catalog::Open(const std::string& path) {
  rocksdb::Options o;
  o.create_if_missing = true;
  ASSIGN_OR_RETURN(auto db, RocksDb::Open(o, path, GetLogger("ROCKSDB")));
  return std::unique_ptr<Catalog>(new Catalog(std::move(db)));
}

Catalog::~Catalog() = default;

Status Catalog::RecordCommit(const std::string& job, const std::string& uri,
                             const Manifest& manifest) {
  CatalogEntry entry;
  entry.set_uri(uri);
  entry.set_committed(true);
  *entry.mutable_manifest() = manifest;
  rocksdb::WriteBatch batch;
  batch.Put(StepKey(job, manifest.step()), entry.SerializeAsString());
  auto latest = Latest(job);
  if (!latest.ok() || *latest < manifest.step()) {
    batch.Put(LatestKey(job), std::to_string(manifest.step()));
  }
  return db_->Write(batch, /*sync=*/true, "catalog " + db_->path() + " write");
}

Status Catalog::RecordRemoval(const std::string& job, int64_t step) {
  auto e = Get(job, step);
  if (absl::IsNotFound(e.status())) return absl::OkStatus();
  RETURN_IF_ERROR(e.status());
  CatalogEntry entry;
  entry.set_uri(e->uri);
  entry.set_committed(false);
  rocksdb::WriteBatch batch;
  batch.Put(StepKey(job, step), entry.SerializeAsString());
  // Latest moves back to the newest step still committed.
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, Steps(job));
  batch.Delete(LatestKey(job));
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (*it != step) {
      batch.Put(LatestKey(job), std::to_string(*it));
      break;
    }
  }
  return db_->Write(batch, /*sync=*/true, "catalog " + db_->path() + " write");
}

Status Catalog::Reconcile(const std::string& job, const std::string& uri,
                          Storage& storage) {
  ASSIGN_OR_RETURN(std::vector<int64_t> truth, storage.Steps());
  ASSIGN_OR_RETURN(std::vector<int64_t> recorded, Steps(job));
  const std::set<int64_t> in_storage(truth.begin(), truth.end());
  const std::set<int64_t> in_catalog(recorded.begin(), recorded.end());
  auto log = GetLogger("CKPT");
  for (int64_t step : recorded) {
    if (in_storage.count(step)) continue;
    log->warn("catalog {}: job '{}' step {} is no longer in {}; marked removed",
              db_->path(), job, step, uri);
    RETURN_IF_ERROR(RecordRemoval(job, step));
  }
  for (int64_t step : truth) {
    if (in_catalog.count(step)) continue;
    auto manifest = ReadManifest(storage, step);
    if (!manifest.ok()) {
      log->warn("catalog {}: not recording step {} of {}: {}", db_->path(),
                step, uri, std::string(manifest.status().message()));
      continue;
    }
    log->warn("catalog {}: job '{}' missed step {} of {}; recorded now",
              db_->path(), job, step, uri);
    RETURN_IF_ERROR(RecordCommit(job, uri, *manifest));
  }
  // Latest is the newest committed step (a missed commit may have left it
  // behind, a missed removal ahead).
  ASSIGN_OR_RETURN(recorded, Steps(job));
  auto latest = Latest(job);
  if (recorded.empty() && absl::IsNotFound(latest.status()))
    return absl::OkStatus();
  if (!recorded.empty() && latest.ok() && *latest == recorded.back())
    return absl::OkStatus();
  rocksdb::WriteBatch batch;
  if (recorded.empty()) {
    batch.Delete(LatestKey(job));
  } else {
    batch.Put(LatestKey(job), std::to_string(recorded.back()));
  }
  return db_->Write(batch, /*sync=*/true, "catalog " + db_->path() + " write");
}

StatusOr<Catalog::Entry> Catalog::Get(const std::string& job, int64_t step) {
  ASSIGN_OR_RETURN(std::shared_ptr<rocksdb::DB> db, db_->Get());
  std::string value;
  RETURN_IF_ERROR(FromRocks(
      db->Get(rocksdb::ReadOptions(), StepKey(job, step), &value),
      absl::StrFormat("catalog has no step %d of job '%s'", step, job)));
  CatalogEntry entry;
  if (!entry.ParseFromString(value)) {
    return absl::DataLossError(absl::StrFormat(
        "catalog entry of job '%s' step %d is damaged", job, step));
  }
  Entry e;
  e.step = step;
  e.uri = entry.uri();
  e.committed = entry.committed();
  e.manifest = entry.manifest();
  return e;
}

StatusOr<int64_t> Catalog::Latest(const std::string& job) {
  ASSIGN_OR_RETURN(std::shared_ptr<rocksdb::DB> db, db_->Get());
  std::string value;
  RETURN_IF_ERROR(
      FromRocks(db->Get(rocksdb::ReadOptions(), LatestKey(job), &value),
                "catalog has no committed step of job '" + job + "'"));
  int64_t step = 0;
  if (!absl::SimpleAtoi(value, &step))
    return absl::DataLossError("catalog latest is damaged");
  return step;
}

StatusOr<std::vector<int64_t>> Catalog::Steps(const std::string& job) {
  ASSIGN_OR_RETURN(std::shared_ptr<rocksdb::DB> db, db_->Get());
  std::vector<int64_t> steps;
  const std::string prefix = "job/" + job + "/step/";
  std::unique_ptr<rocksdb::Iterator> it(
      db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
       it->Next()) {
    CatalogEntry entry;
    int64_t step = 0;
    if (!entry.ParseFromString(it->value().ToString()) ||
        !absl::SimpleAtoi(it->key().ToString().substr(prefix.size()), &step)) {
      return absl::DataLossError("catalog entry " + it->key().ToString() +
                                 " is damaged");
    }
    if (entry.committed()) steps.push_back(step);
  }
  RETURN_IF_ERROR(FromRocks(it->status(), "catalog " + db_->path() + " scan"));
  return steps;
}

}  // namespace strata::checkpoint
