// Loading with resharding: every target box is intersected with the saved
// chunks of its tensor; only the checksum blocks that hold part of an
// intersection are read (coalesced, in parallel pieces) and verified before
// use.
#include "checkpoint/reader.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/internal/box.h"
#include "common/logging.h"

namespace strata::checkpoint {
namespace {

using internal::Box;
using internal::Intersect;
using internal::RegionByteRuns;

// Parallel reads: pieces of 2 MiB on 4 threads per rank keep several
// requests in flight (a local NVMe or a Lustre/GPFS client needs that depth
// to reach its bandwidth; one 1 MiB stream does not), and a piece is small
// enough to stay in cache between its read, its copy into the target and
// its checksum (2 MiB pieces loaded ~25% faster than 8 MiB ones here, 1 MiB
// no faster; docs/checkpoint.md).
constexpr uint64_t kReadPieceBytes = 2 << 20;
constexpr size_t kReadThreads = 4;

// Other copies a reader tries after a checksum mismatch (a bound on a
// storage that keeps offering them).
constexpr int kMaxOtherCopies = 8;

Box ChunkBox(const ChunkMeta& c) {
  return Box{{c.global_offset().begin(), c.global_offset().end()},
             {c.shape().begin(), c.shape().end()}};
}

// Reads blocks [first, last] of `chunk` and checks their checksums; chunk
// byte o lands at buf[o - origin].
Status ReadBlocks(Storage& storage, int64_t step, const std::string& tensor,
                  int chunk_index, const ChunkMeta& chunk, uint64_t first,
                  uint64_t last, char* buf, uint64_t origin,
                  LoadStats* stats = nullptr) {
  const uint64_t bb = chunk.block_bytes();
  if (bb == 0 || chunk.block_xxh3_size() !=
                     static_cast<int>((chunk.length() + bb - 1) / bb)) {
    return absl::DataLossError(absl::StrCat("tensor '", tensor, "' chunk ",
                                            chunk_index,
                                            ": malformed block table"));
  }
  const uint64_t begin = first * bb,
                 end = std::min<uint64_t>((last + 1) * bb, chunk.length());
  Status st = storage.ReadData(step, chunk.file(), chunk.offset() + begin,
                               buf + (begin - origin), end - begin);
  if (stats) stats->bytes_read += end - begin;
  if (!st.ok()) {
    return absl::DataLossError(absl::StrCat("tensor '", tensor, "' chunk ",
                                            chunk_index, ": ", st.message()));
  }
  // The first block failing its checksum, or -1.
  auto bad_block = [&]() -> int64_t {
    for (uint64_t b = first; b <= last; ++b) {
      const uint64_t o = b * bb, n = std::min<uint64_t>(bb, chunk.length() - o);
      if (XXH3_64bits(buf + (o - origin), n) !=
          chunk.block_xxh3(static_cast<int>(b))) {
        return static_cast<int64_t>(b);
      }
    }
    return -1;
  };
  const int64_t bad = bad_block();
  if (bad < 0) return absl::OkStatus();
  const uint64_t o = static_cast<uint64_t>(bad) * bb,
                 n = std::min<uint64_t>(bb, chunk.length() - o);
  Status mismatch = absl::DataLossError(absl::StrCat(
      "tensor '", tensor, "' chunk ", chunk_index, " (",
      storage.Where(step, chunk.file()), " bytes ", chunk.offset() + o, "-",
      chunk.offset() + o + n, "): checksum mismatch"));
  // Another copy of the same bytes (the memory tier: a peer's replica),
  // before the caller falls back to another tier.
  std::string tried;
  for (int k = 0; k < kMaxOtherCopies; ++k) {
    Status other =
        storage.ReadOtherCopy(step, chunk.file(), chunk.offset() + begin,
                              buf + (begin - origin), end - begin, k);
    if (absl::IsOutOfRange(other)) break;
    if (other.ok() && bad_block() < 0) {
      GetLogger("CKPT")->warn("{}; read another copy (#{}) that verifies",
                              std::string(mismatch.message()), k);
      return absl::OkStatus();
    }
    absl::StrAppend(&tried, "; other copy #", k, ": ",
                    other.ok() ? "checksum mismatch too" : other.message());
  }
  return Status(mismatch.code(), absl::StrCat(mismatch.message(), tried));
}

// One contiguous run of a region: `len` bytes at chunk byte `src` go to
// target byte `dst`.
struct Segment {
  uint64_t src, dst, len;
};

// The region's runs in the chunk and in the target, paired up (both lists
// walk the region's elements in row-major order; their run boundaries
// differ where one box is wider than the other).
std::vector<Segment> Segments(const Box& region, const Box& chunk_box,
                              const Box& target_box, size_t es) {
  auto src = RegionByteRuns(region, chunk_box, es);
  auto dst = RegionByteRuns(region, target_box, es);
  std::vector<Segment> out;
  size_t i = 0, j = 0;
  uint64_t si = src.empty() ? 0 : src[0].first,
           dj = dst.empty() ? 0 : dst[0].first;
  while (i < src.size() && j < dst.size()) {
    const uint64_t n = std::min(src[i].second - si, dst[j].second - dj);
    out.push_back({si, dj, n});
    si += n;
    dj += n;
    if (si == src[i].second && ++i < src.size()) si = src[i].first;
    if (dj == dst[j].second && ++j < dst.size()) dj = dst[j].first;
  }
  return out;
}

// Reads `pieces` (block ranges of one chunk) with up to kReadThreads
// threads — into the target when a piece lies inside one run, else through
// the thread's own piece-sized buffer, copying the parts of `segments` it
// holds into `target` (docs/checkpoint.md: "reads only the
// overlapping byte ranges, in parallel"). Never materialises the chunk: a
// fresh chunk-sized buffer costs as much in page faults as the read. The
// first error wins.
Status ReadPieces(Storage& storage, int64_t step, const std::string& tensor,
                  int chunk_index, const ChunkMeta& chunk,
                  const std::vector<std::pair<uint64_t, uint64_t>>& pieces,
                  const std::vector<Segment>& segments, char* target,
                  LoadStats* stats) {
  const uint64_t bb = chunk.block_bytes();
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> bytes{0};
  std::mutex mu;
  Status first_error;
  auto work = [&] {
    LoadStats mine;
    std::vector<char> buf;
    for (size_t i = next++; i < pieces.size(); i = next++) {
      const uint64_t pb = pieces[i].first * bb;
      const uint64_t pe =
          std::min<uint64_t>((pieces[i].second + 1) * bb, chunk.length());
      // Segments are sorted by src: start at the first one ending after pb.
      auto seg = std::partition_point(
          segments.begin(), segments.end(),
          [pb](const Segment& x) { return x.src + x.len <= pb; });
      // A piece wholly inside one run (row splits, flat partitions) is read
      // straight into the target and verified there: no buffer of its own.
      const bool direct =
          seg != segments.end() && seg->src <= pb && pe <= seg->src + seg->len;
      char* dst = direct ? target + seg->dst + (pb - seg->src) : nullptr;
      if (!direct && buf.size() < pe - pb) buf.resize(pe - pb);
      Status s =
          ReadBlocks(storage, step, tensor, chunk_index, chunk, pieces[i].first,
                     pieces[i].second, direct ? dst : buf.data(), pb, &mine);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = s;
        next = pieces.size();
        break;
      }
      if (direct) continue;
      for (; seg != segments.end() && seg->src < pe; ++seg) {
        const uint64_t b = std::max(seg->src, pb);
        const uint64_t e = std::min(seg->src + seg->len, pe);
        if (b < e) {
          std::memcpy(target + seg->dst + (b - seg->src), buf.data() + (b - pb),
                      e - b);
        }
      }
    }
    bytes += mine.bytes_read;
  };
  std::vector<std::thread> threads;
  const size_t n = std::min<size_t>(kReadThreads, pieces.size());
  for (size_t t = 1; t < n; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (stats) stats->bytes_read += bytes;
  return first_error;
}

// InvalidArgument unless `target` asks for the saved dtype and global shape.
Status CheckTarget(const TensorMeta& meta, const ShardedTensor& target) {
  if (meta.dtype() == DTypeName(target.dtype) &&
      std::equal(meta.global_shape().begin(), meta.global_shape().end(),
                 target.global_shape.begin(), target.global_shape.end())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("tensor '", target.name, "': saved as ", meta.dtype(), " [",
                   absl::StrJoin(meta.global_shape(), ","), "], asked as ",
                   DTypeName(target.dtype), " [",
                   absl::StrJoin(target.global_shape, ","), "]"));
}

// The checksum blocks of a chunk holding `region`'s byte runs, coalesced
// into ranges and cut into pieces of at most kReadPieceBytes: [first, last]
// block pairs, ascending.
std::vector<std::pair<uint64_t, uint64_t>> BlockPieces(const Box& region,
                                                       const Box& chunk_box,
                                                       size_t es,
                                                       uint64_t block_bytes) {
  std::set<uint64_t> blocks;
  for (auto [b, e] : RegionByteRuns(region, chunk_box, es)) {
    for (uint64_t k = b / block_bytes; k <= (e - 1) / block_bytes; ++k) {
      blocks.insert(k);
    }
  }
  const uint64_t piece_blocks =
      std::max<uint64_t>(1, kReadPieceBytes / block_bytes);
  std::vector<std::pair<uint64_t, uint64_t>> pieces;
  for (auto k = blocks.begin(); k != blocks.end();) {
    uint64_t first = *k, last = first;
    while (++k != blocks.end() && *k == last + 1) last = *k;
    for (uint64_t b = first; b <= last; b += piece_blocks) {
      pieces.emplace_back(b, std::min(last, b + piece_blocks - 1));
    }
  }
  return pieces;
}

// Copies the part of chunk `ci` of `meta` that overlaps `target` into it;
// returns the number of elements copied (0 when they do not overlap).
// DataLoss when the chunk's length or block size is malformed or a read
// fails.
StatusOr<int64_t> LoadChunk(Storage& storage, int64_t step,
                            const TensorMeta& meta, int ci,
                            ShardedTensor& target, LoadStats* stats) {
  const ChunkMeta& chunk = meta.chunks(ci);
  const size_t es = DTypeSize(target.dtype);
  const Box want{target.global_offset, target.local_shape};
  const Box have = ChunkBox(chunk);
  const std::optional<Box> region = Intersect(want, have);
  if (!region) return 0;
  if (static_cast<uint64_t>(have.NumElements()) * es != chunk.length()) {
    return absl::DataLossError(
        absl::StrCat("tensor '", target.name, "' chunk ", ci,
                     ": length does not match its shape"));
  }
  if (chunk.block_bytes() == 0) {
    return absl::DataLossError(absl::StrCat("tensor '", target.name, "' chunk ",
                                            ci, ": block size is 0"));
  }
  RETURN_IF_ERROR(
      ReadPieces(storage, step, target.name, ci, chunk,
                 BlockPieces(*region, have, es, chunk.block_bytes()),
                 Segments(*region, have, want, es),
                 static_cast<char*>(target.data), stats));
  return region->NumElements();
}

// Fills one target from the chunks of its saved tensor `meta`; DataLoss when
// the chunks do not cover the whole target box.
Status LoadTarget(Storage& storage, int64_t step, const TensorMeta& meta,
                  ShardedTensor& target, LoadStats* stats) {
  RETURN_IF_ERROR(CheckTarget(meta, target));
  if (stats) stats->bytes_needed += target.Bytes();
  int64_t covered = 0;
  for (int ci = 0; ci < meta.chunks_size(); ++ci) {
    ASSIGN_OR_RETURN(int64_t n,
                     LoadChunk(storage, step, meta, ci, target, stats));
    covered += n;
  }
  const int64_t wanted = target.NumElements();
  if (covered != wanted) {
    return absl::DataLossError(
        absl::StrCat("tensor '", target.name, "': ", wanted - covered, " of ",
                     wanted, " requested elements were never saved"));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<Manifest> ReadManifest(Storage& storage, int64_t step) {
  auto bytes = storage.GetMeta(step, "manifest.pb");
  if (!bytes.ok()) {
    return absl::NotFoundError(
        absl::StrCat("no committed checkpoint at step ", step, " (",
                     storage.Where(step, "manifest.pb"), " missing)"));
  }
  const std::string where = storage.Where(step, "manifest.pb");
  Manifest m;
  if (bytes->empty() || !m.ParseFromString(*bytes)) {
    return absl::DataLossError(absl::StrCat("corrupt manifest ", where,
                                            bytes->empty() ? " (empty)" : ""));
  }
  if (m.tensors_size() == 0) {
    return absl::DataLossError("corrupt manifest " + where +
                               ": it holds no tensor");
  }
  if (m.step() != step) {
    return absl::DataLossError(
        absl::StrCat("corrupt manifest ", where, ": it is step ", m.step()));
  }
  auto bad_file = [&](const std::string& file, const std::string& of) {
    return absl::DataLossError(
        absl::StrCat("corrupt manifest ", where, ": ", of, " names data file '",
                     file, "', not a file of the step directory"));
  };
  for (const TensorMeta& t : m.tensors()) {
    for (const ChunkMeta& c : t.chunks()) {
      if (!ValidName(c.file()))
        return bad_file(c.file(), "tensor '" + t.name() + "'");
    }
  }
  for (const BlobMeta& b : m.blobs()) {
    if (!ValidName(b.file()))
      return bad_file(b.file(), "blob '" + b.name() + "'");
  }
  return m;
}

StatusOr<Manifest> ReadManifest(const std::string& uri, int64_t step) {
  ASSIGN_OR_RETURN(PinnedStep p, OpenStep(uri, step));
  return ReadManifest(*p.storage, step);
}

Status CheckStep(Storage& storage, int64_t step) {
  ASSIGN_OR_RETURN(Manifest m, ReadManifest(storage, step));
  char last = 0;
  for (const TensorMeta& t : m.tensors()) {
    for (int ci = 0; ci < t.chunks_size(); ++ci) {
      const ChunkMeta& c = t.chunks(ci);
      if (c.length() == 0) continue;
      Status st = storage.ReadData(step, c.file(), c.offset() + c.length() - 1,
                                   &last, 1);
      if (!st.ok()) {
        return absl::DataLossError(absl::StrCat(
            "tensor '", t.name(), "' chunk ", ci, ": ", st.message()));
      }
    }
  }
  for (const BlobMeta& b : m.blobs()) {
    if (b.length() == 0) continue;
    Status st =
        storage.ReadData(step, b.file(), b.offset() + b.length() - 1, &last, 1);
    if (!st.ok()) {
      return absl::DataLossError(
          absl::StrCat("blob '", b.name(), "': ", st.message()));
    }
  }
  return absl::OkStatus();
}

StatusOr<int64_t> NewestUsableStep(Storage& storage,
                                   std::unique_ptr<StepPin>* pin) {
  // With a pin, each candidate is pinned before it is checked, so retention
  // cannot remove it in between; one retention removed between listing and
  // pinning is skipped quietly, and when all listed steps went that way the
  // steps are listed again (a trainer with keep_last 1 commits every few
  // tens of milliseconds).
  constexpr int kRelists = 20;
  std::vector<std::string> skipped;
  for (int attempt = 0; attempt < kRelists; ++attempt) {
    ASSIGN_OR_RETURN(std::vector<int64_t> steps, storage.Steps());
    bool vanished = false;
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      if (pin != nullptr) {
        auto p = storage.PinStep(*it);
        if (absl::IsNotFound(p.status())) {
          vanished = true;
          continue;
        }
        if (!p.ok()) return p.status();
        *pin = std::move(*p);
      }
      Status st = CheckStep(storage, *it);
      if (st.ok()) return *it;
      if (pin != nullptr) pin->reset();
      GetLogger("CKPT")->warn("skipping checkpoint step {}: {}", *it,
                              std::string(st.message()));
      skipped.push_back(absl::StrCat("step ", *it, ": ", st.message()));
    }
    if (!vanished) break;
  }
  std::string msg =
      "no usable committed checkpoint in " + storage.Where(-1, "");
  if (!skipped.empty())
    absl::StrAppend(&msg, " (", absl::StrJoin(skipped, "; "), ")");
  return absl::NotFoundError(msg);
}

StatusOr<PinnedStep> OpenStep(const std::string& uri, int64_t step) {
  PinnedStep p;
  ASSIGN_OR_RETURN(p.storage, OpenStorage(uri));
  if (step < 0) {
    ASSIGN_OR_RETURN(p.step, NewestUsableStep(*p.storage, &p.pin));
    return p;
  }
  p.step = step;
  ASSIGN_OR_RETURN(p.pin, p.storage->PinStep(step));
  return p;
}

Status Load(Storage& storage, int64_t step, std::vector<ShardedTensor>& targets,
            LoadStats* stats) {
  ASSIGN_OR_RETURN(Manifest m, ReadManifest(storage, step));
  std::map<std::string, const TensorMeta*> by_name;
  for (const TensorMeta& t : m.tensors()) by_name[t.name()] = &t;
  for (ShardedTensor& target : targets) {
    RETURN_IF_ERROR(target.Validate());
    auto it = by_name.find(target.name);
    if (it == by_name.end()) {
      return absl::NotFoundError(
          absl::StrCat("tensor '", target.name, "' is not in step ", step));
    }
    RETURN_IF_ERROR(LoadTarget(storage, step, *it->second, target, stats));
  }
  return absl::OkStatus();
}

StatusOr<std::string> LoadBlob(Storage& storage, int64_t step,
                               const std::string& name) {
  ASSIGN_OR_RETURN(Manifest m, ReadManifest(storage, step));
  for (const BlobMeta& b : m.blobs()) {
    if (b.name() != name) continue;
    std::string out(b.length(), '\0');
    RETURN_IF_ERROR(
        storage.ReadData(step, b.file(), b.offset(), out.data(), out.size()));
    for (int k = 0; k < kMaxOtherCopies &&
                    XXH3_64bits(out.data(), out.size()) != b.xxh3();
         ++k) {
      if (absl::IsOutOfRange(storage.ReadOtherCopy(
              step, b.file(), b.offset(), out.data(), out.size(), k))) {
        break;
      }
    }
    if (XXH3_64bits(out.data(), out.size()) != b.xxh3()) {
      return absl::DataLossError(absl::StrCat("blob '", name, "' (",
                                              storage.Where(step, b.file()),
                                              "): checksum mismatch"));
    }
    return out;
  }
  return absl::NotFoundError(
      absl::StrCat("blob '", name, "' is not in step ", step));
}

Status Verify(Storage& storage, int64_t step) {
  ASSIGN_OR_RETURN(Manifest m, ReadManifest(storage, step));
  std::vector<char> buf;
  for (const TensorMeta& t : m.tensors()) {
    for (int ci = 0; ci < t.chunks_size(); ++ci) {
      const ChunkMeta& c = t.chunks(ci);
      if (c.length() == 0) continue;
      if (buf.size() < c.length()) buf.resize(c.length());
      RETURN_IF_ERROR(
          ReadBlocks(storage, step, t.name(), ci, c, 0,
                     (c.length() - 1) / std::max<uint64_t>(1, c.block_bytes()),
                     buf.data(), /*origin=*/0));
    }
  }
  for (const BlobMeta& b : m.blobs()) {
    RETURN_IF_ERROR(LoadBlob(storage, step, b.name()).status());
  }
  return absl::OkStatus();
}

Status Load(const std::string& uri, int64_t step,
            std::vector<ShardedTensor>& targets, LoadStats* stats) {
  ASSIGN_OR_RETURN(PinnedStep p, OpenStep(uri, step));
  return Load(*p.storage, step, targets, stats);
}

StatusOr<std::string> LoadBlob(const std::string& uri, int64_t step,
                               const std::string& name) {
  ASSIGN_OR_RETURN(PinnedStep p, OpenStep(uri, step));
  return LoadBlob(*p.storage, step, name);
}

Status Verify(const std::string& uri, int64_t step) {
  ASSIGN_OR_RETURN(PinnedStep p, OpenStep(uri, step));
  return Verify(*p.storage, step);
}

}  // namespace strata::checkpoint
