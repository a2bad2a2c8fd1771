#include "checkpoint/internal/staging.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "checkpoint/internal/stream_copy.h"

namespace strata::checkpoint::internal {

Part OwnPart(const ShardedTensor& t) {
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

void PlanCopies(Staged& s) {
  s.copies.clear();
  for (size_t i = 0; i < s.parts.size(); ++i) {
    ShardedTensor& t = s.parts[i].tensor;
    if (!s.parts[i].has_chunk || t.Bytes() == 0) continue;
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

void RunCopies(CopyJob& job) {
  const std::vector<Copy>& copies = *job.copies;
  for (size_t i = job.next++; i < copies.size(); i = job.next++) {
    StreamCopy(copies[i].dst, copies[i].src, copies[i].len);
    --job.left;
  }
}

void CopyAll(const Staged& s) {
  for (const Copy& c : s.copies) StreamCopy(c.dst, c.src, c.len);
}

}  // namespace strata::checkpoint::internal
