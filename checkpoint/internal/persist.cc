#include "checkpoint/internal/persist.h"

#include <xxhash.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/location.h"
#include "common/logging.h"

namespace strata::checkpoint::internal {
namespace {

// Appends `n` bytes to the data stream, recording their place and block
// checksums in `chunk`.
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

// Appends the tensors' chunks to `out` and describes them in `index`.
Status WriteParts(DataSink& out, const std::string& data_name,
                  size_t block_bytes, const std::vector<Part>& parts,
                  RankIndex& index) {
  for (const Part& part : parts) {
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
    RETURN_IF_ERROR(AppendChunk(out, static_cast<const char*>(t.data),
                                t.Bytes(), block_bytes, chunk));
  }
  return absl::OkStatus();
}

// Appends the blobs this rank stores to `out` and describes them in `index`.
Status WriteBlobs(DataSink& out, const std::string& data_name, int rank,
                  size_t block_bytes, const std::vector<Blob>& blobs,
                  RankIndex& index) {
  for (const Blob& b : blobs) {
    if (!b.per_rank && rank != 0) continue;
    BlobMeta* meta = index.add_blobs();
    meta->set_name(b.per_rank ? absl::StrCat(rank, "/", b.name) : b.name);
    meta->set_file(data_name);
    meta->set_offset(out.size());
    meta->set_length(b.bytes.size());
    meta->set_xxh3(XXH3_64bits(b.bytes.data(), b.bytes.size()));
    ChunkMeta scratch;
    RETURN_IF_ERROR(AppendChunk(out, b.bytes.data(), b.bytes.size(),
                                block_bytes, &scratch));
  }
  return absl::OkStatus();
}

std::string DoneKey(int64_t step, int rank) {
  return absl::StrCat("ckpt/", step, "/done/", rank);
}

// Adds the tensors and blobs of rank `rank`'s index to `manifest`;
// `by_name` maps tensor names to their place in it.
Status MergeIndex(const RankIndex& index, int rank, Manifest& manifest,
                  std::map<std::string, int>& by_name) {
  for (const TensorMeta& t : index.tensors()) {
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
          "' saved with different dtype or global shape by rank ", rank));
    }
    for (const ChunkMeta& c : t.chunks()) *m->add_chunks() = c;
  }
  for (const BlobMeta& b : index.blobs()) *manifest.add_blobs() = b;
  return absl::OkStatus();
}

}  // namespace

std::string RankFile(int rank, const char* ext) {
  return absl::StrFormat("rank-%05d.%s", rank, ext);
}

StatusOr<RankIndex> WriteRankData(Storage& storage, int64_t step, int rank,
                                  size_t block_bytes,
                                  const std::vector<Part>& parts,
                                  const std::vector<Blob>& blobs) {
  const std::string data_name = RankFile(rank, "data");
  ASSIGN_OR_RETURN(std::unique_ptr<DataSink> out,
                   storage.CreateData(step, data_name));
  RankIndex index;
  index.set_rank(rank);
  RETURN_IF_ERROR(WriteParts(*out, data_name, block_bytes, parts, index));
  RETURN_IF_ERROR(WriteBlobs(*out, data_name, rank, block_bytes, blobs, index));
  RETURN_IF_ERROR(out->Finish());
  return index;
}

Status WriteRankIndex(Storage& storage, int64_t step, const RankIndex& index) {
  return storage.PutMeta(step, RankFile(index.rank(), "index"),
                         index.SerializeAsString());
}

Status ReportDurable(comm::Store& store, int64_t step, int rank) {
  return store.Set(DoneKey(step, rank), "1");
}

void ReportFailed(comm::Store& store, int64_t step, int rank,
                  const Status& error) {
  (void)store.Set(DoneKey(step, rank),
                  absl::StrCat("failed: ", error.message()));
}

Status WaitForRanks(comm::Store& store, int64_t step, int world_size,
                    std::chrono::milliseconds timeout) {
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(DoneKey(step, r));
  RETURN_IF_ERROR(store.Wait(keys, timeout));
  for (int r = 0; r < world_size; ++r) {
    ASSIGN_OR_RETURN(std::string v, store.Get(keys[r], timeout));
    if (v.starts_with("failed: ")) {
      return absl::AbortedError(absl::StrCat("rank ", r, " could not save step ",
                                             step, ": ", v.substr(8)));
    }
  }
  return absl::OkStatus();
}

StatusOr<Manifest> MergeRankIndexes(Storage& storage, int64_t step,
                                    int world_size) {
  Manifest manifest;
  manifest.set_step(step);
  manifest.set_world_size(world_size);
  manifest.set_created_by("strata");
  std::map<std::string, int> by_name;
  for (int r = 0; r < world_size; ++r) {
    const std::string name = RankFile(r, "index");
    auto bytes = storage.GetMeta(step, name);
    RankIndex index;
    if (!bytes.ok() || !index.ParseFromString(*bytes)) {
      return absl::DataLossError("cannot read rank index " +
                                 storage.Where(step, name));
    }
    RETURN_IF_ERROR(MergeIndex(index, r, manifest, by_name));
  }
  return manifest;
}

Status PublishCommit(Storage& storage, Catalog* catalog, const std::string& job,
                     const std::string& uri, const Manifest& manifest) {
  const int64_t step = manifest.step();
  if (manifest.tensors_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", step, " not committed: no rank saved a tensor"));
  }
  RETURN_IF_ERROR(
      storage.PutMeta(step, "manifest.pb", manifest.SerializeAsString()));
  RETURN_IF_ERROR(storage.PutMeta(-1, "LATEST", std::to_string(step)));
  if (catalog != nullptr) {
    RETURN_IF_ERROR(catalog->RecordCommit(job, uri, manifest));
    // Repairs what earlier failed catalog writes missed.
    RETURN_IF_ERROR(catalog->Reconcile(job, uri, storage));
  }
  return absl::OkStatus();
}

Status ApplyRetention(Storage& storage, Catalog* catalog,
                      const std::string& job, int keep_last,
                      int64_t keep_every) {
  if (keep_last <= 0) return absl::OkStatus();
  auto steps = storage.Steps();
  if (!steps.ok() || static_cast<int>(steps->size()) <= keep_last) {
    return absl::OkStatus();
  }
  for (size_t i = 0; i + keep_last < steps->size(); ++i) {
    const int64_t s = (*steps)[i];
    if (keep_every > 0 && s % keep_every == 0) continue;
    Status removed = storage.RemoveStep(s);
    if (absl::IsFailedPrecondition(removed)) {  // pinned by a reader
      GetLogger("CKPT")->info("retention keeps step {} for now: {}", s,
                              std::string(removed.message()));
      continue;
    }
    RETURN_IF_ERROR(removed);
    if (catalog != nullptr) RETURN_IF_ERROR(catalog->RecordRemoval(job, s));
  }
  return absl::OkStatus();
}

Status DescribeSaveFailure(const Status& st, int64_t step,
                           const std::string& uri) {
  std::string msg =
      absl::StrCat("checkpoint step ", step, " at ", uri, ": ", st.message());
  absl::StrAppend(&msg, "; ", FreeSpace(CheckpointDir(uri).value_or("")));
  return Status(st.code(), msg);
}

}  // namespace strata::checkpoint::internal
