// Keys: "job/<job>/step/<step:012>" -> CatalogEntry (uri, committed,
// manifest); "job/<job>/latest" -> step. Values are protos, so a damaged
// value is reported as DataLoss.
#include "checkpoint/catalog.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"

namespace strata::checkpoint {
namespace {

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  if (s.IsNotFound()) return absl::NotFoundError(what);
  if (s.IsCorruption()) return absl::DataLossError(what + ": " + s.ToString());
  return absl::UnavailableError(what + ": " + s.ToString());
}

std::string StepKey(const std::string& job, int64_t step) {
  return absl::StrFormat("job/%s/step/%012d", job, step);
}
std::string LatestKey(const std::string& job) {
  return "job/" + job + "/latest";
}

}  // namespace

StatusOr<std::unique_ptr<Catalog>> Catalog::Open(const std::string& path) {
  rocksdb::Options o;
  o.create_if_missing = true;
  rocksdb::DB* db = nullptr;
  RETURN_IF_ERROR(
      FromRocks(rocksdb::DB::Open(o, path, &db), "open catalog " + path));
  return std::unique_ptr<Catalog>(new Catalog(db));
}

Catalog::~Catalog() { delete db_; }

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
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(db_->Write(wo, &batch), "catalog write");
}

Status Catalog::RecordRemoval(const std::string& job, int64_t step) {
  ASSIGN_OR_RETURN(Entry e, Get(job, step));
  CatalogEntry entry;
  entry.set_uri(e.uri);
  entry.set_committed(false);
  rocksdb::WriteBatch batch;
  batch.Put(StepKey(job, step), entry.SerializeAsString());
  // Latest moves back to the newest step still committed.
  auto steps = Steps(job);
  batch.Delete(LatestKey(job));
  if (steps.ok()) {
    for (auto it = steps->rbegin(); it != steps->rend(); ++it) {
      if (*it != step) {
        batch.Put(LatestKey(job), std::to_string(*it));
        break;
      }
    }
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(db_->Write(wo, &batch), "catalog write");
}

StatusOr<Catalog::Entry> Catalog::Get(const std::string& job, int64_t step) {
  std::string value;
  RETURN_IF_ERROR(FromRocks(
      db_->Get(rocksdb::ReadOptions(), StepKey(job, step), &value),
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
  std::string value;
  RETURN_IF_ERROR(
      FromRocks(db_->Get(rocksdb::ReadOptions(), LatestKey(job), &value),
                "catalog has no committed step of job '" + job + "'"));
  int64_t step = 0;
  if (!absl::SimpleAtoi(value, &step))
    return absl::DataLossError("catalog latest is damaged");
  return step;
}

StatusOr<std::vector<int64_t>> Catalog::Steps(const std::string& job) {
  std::vector<int64_t> steps;
  const std::string prefix = "job/" + job + "/step/";
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions()));
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
  return steps;
}

}  // namespace strata::checkpoint
