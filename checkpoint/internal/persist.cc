#include "checkpoint/internal/persist.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/location.h"
#include "common/logging.h"

namespace strata::checkpoint::internal {
namespace {

// Chunks of at least kAlignFromBytes start at a multiple of kChunkAlign in
// the data stream (zero padding before them; readers go by each chunk's
// offset), so the file storage writes one from page-aligned memory without
// copying it (direct_writer.h: O_DIRECT needs the file offset and the
// memory aligned to the 4 KiB block). Smaller chunks are packed: the
// padding would outweigh the copy.
constexpr size_t kChunkAlign = 4096;
constexpr size_t kAlignFromBytes = 1 << 20;

// The block checksums of every chunk of a save, computed by kHashThreads
// helper threads (and the caller, once its writes are done) while the
// chunks are written: XXH3-64 runs at 1.5-2.7 GB/s per core on the 2-core
// VM of docs/results.md, no faster than its disk, so checksumming before
// writing, on the writing thread, halved the persist rate. Work goes in
// items of kItemBytes, in stream order. Checksums the staged data, which
// stays unchanged during the save (persist.h).
class ChunkSums {
 public:
  static constexpr int kHashThreads = 2;
  static constexpr size_t kItemBytes = 8 << 20;
  // Below this many bytes in all, no helper thread is started.
  static constexpr size_t kThreadsFromBytes = 4 << 20;

  ChunkSums(const std::vector<Part>& parts, size_t block) : block_(block) {
    sums_.resize(parts.size());
    size_t total = 0;
    const size_t item = std::max(block, kItemBytes / block * block);
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!parts[i].has_chunk) continue;
      const ShardedTensor& t = parts[i].tensor;
      const size_t n = t.Bytes();
      sums_[i].resize((n + block - 1) / block);
      for (size_t o = 0; o < n; o += item) {
        items_.push_back({static_cast<const char*>(t.data) + o,
                          std::min(item, n - o), sums_[i].data() + o / block});
      }
      total += n;
    }
    if (total < kThreadsFromBytes) return;
    for (int k = 0; k < kHashThreads; ++k) threads_.emplace_back([this] { Run(); });
  }
  ~ChunkSums() { Join(); }
  ChunkSums(const ChunkSums&) = delete;
  ChunkSums& operator=(const ChunkSums&) = delete;

  // Checksums what is left on the calling thread, then waits for the
  // helpers. After it, Of() is complete.
  void Join() {
    Run();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  const std::vector<uint64_t>& Of(size_t part) const { return sums_[part]; }

 private:
  struct Item {
    const char* data;
    size_t n;
    uint64_t* out;  // the sums of its blocks
  };
  void Run() {
    for (size_t i = next_++; i < items_.size(); i = next_++) {
      const Item& it = items_[i];
      for (size_t b = 0, k = 0; b < it.n; b += block_, ++k) {
        it.out[k] = XXH3_64bits(it.data + b, std::min(block_, it.n - b));
      }
    }
  }

  const size_t block_;
  std::vector<std::vector<uint64_t>> sums_;  // by part
  std::vector<Item> items_;
  std::atomic<size_t> next_{0};
  std::vector<std::thread> threads_;
};

// Appends `n` bytes to the data stream, recording their place in `chunk`
// (not their checksums).
Status AppendChunk(DataSink& out, const char* data, size_t n, size_t block,
                   ChunkMeta* chunk) {
  if (n >= kAlignFromBytes && out.size() % kChunkAlign != 0) {
    static const char kZeros[kChunkAlign] = {};
    RETURN_IF_ERROR(out.Append(kZeros, kChunkAlign - out.size() % kChunkAlign));
  }
  chunk->set_offset(out.size());
  chunk->set_length(n);
  chunk->set_block_bytes(block);
  return out.Append(data, n);
}

// Appends the tensors' chunks to `out` and describes them in `index`, with
// their checksums (computed meanwhile by ChunkSums).
Status WriteParts(DataSink& out, const std::string& data_name,
                  size_t block_bytes, const std::vector<Part>& parts,
                  RankIndex& index) {
  ChunkSums sums(parts, block_bytes);  // on failure its destructor joins
  std::vector<ChunkMeta*> chunks(parts.size(), nullptr);
  for (size_t i = 0; i < parts.size(); ++i) {
    const ShardedTensor& t = parts[i].tensor;
    TensorMeta* meta = index.add_tensors();
    meta->set_name(t.name);
    meta->set_dtype(DTypeName(t.dtype));
    for (int64_t d : t.global_shape) meta->add_global_shape(d);
    if (!parts[i].has_chunk) continue;
    ChunkMeta* chunk = chunks[i] = meta->add_chunks();
    for (int64_t d : t.global_offset) chunk->add_global_offset(d);
    for (int64_t d : t.local_shape) chunk->add_shape(d);
    chunk->set_file(data_name);
    RETURN_IF_ERROR(AppendChunk(out, static_cast<const char*>(t.data),
                                t.Bytes(), block_bytes, chunk));
  }
  sums.Join();
  for (size_t i = 0; i < parts.size(); ++i) {
    if (chunks[i] == nullptr) continue;
    for (uint64_t s : sums.Of(i)) chunks[i]->add_block_xxh3(s);
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
