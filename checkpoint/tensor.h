// What a rank hands to the checkpointer (docs/checkpoint.md): named tensor
// shards placed in global coordinates, plus small byte blobs. The name and the
// global box — not the rank — identify data, so a checkpoint written under
// one parallelism loads under any other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace strata::checkpoint {

enum class DType { kF32, kF64, kF16, kBF16, kI32, kI64, kU8 };

size_t DTypeSize(DType t);
// safetensors dtype names ("F32", "BF16", ...).
const char* DTypeName(DType t);
StatusOr<DType> ParseDType(const std::string& name);

// A row-major box of a tensor held by this rank. `data` points at
// prod(local_shape) elements. Shards with the same global box on several
// ranks (data-parallel replicas) carry replica_id 0..num_replicas-1; each
// replica writes 1/num_replicas of the rows (fully-parallel save).
struct ShardedTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> global_shape;
  std::vector<int64_t> local_shape;
  std::vector<int64_t> global_offset;
  int replica_id = 0;
  int num_replicas = 1;
  void* data = nullptr;

  int64_t NumElements() const;
  size_t Bytes() const {
    return static_cast<size_t>(NumElements()) * DTypeSize(dtype);
  }
  // InvalidArgument naming the tensor when shapes and offsets disagree.
  Status Validate() const;
};

struct Blob {
  std::string name;      // e.g. "rng", "data_cursor", "step"
  bool per_rank = true;  // stored as "<rank>/<name>"; global blobs by rank 0
  std::string bytes;
};

}  // namespace strata::checkpoint
