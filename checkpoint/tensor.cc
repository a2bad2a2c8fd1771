#include "checkpoint/tensor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace strata::checkpoint {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kU8:
      return 1;
  }
  return 1;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF64:
      return "F64";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
    case DType::kU8:
      return "U8";
  }
  return "?";
}

StatusOr<DType> ParseDType(const std::string& name) {
  for (DType t : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                  DType::kI32, DType::kI64, DType::kU8}) {
    if (name == DTypeName(t)) return t;
  }
  return absl::DataLossError("unknown dtype '" + name + "'");
}

int64_t ShardedTensor::NumElements() const {
  int64_t n = 1;
  for (int64_t s : local_shape) n *= s;
  return n;
}

Status ShardedTensor::Validate() const {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "': ", what));
  };
  if (name.empty()) return absl::InvalidArgumentError("tensor without a name");
  if (local_shape.size() != global_shape.size() ||
      global_offset.size() != global_shape.size()) {
    return bad("global shape, local shape and offset need the same rank");
  }
  for (size_t d = 0; d < global_shape.size(); ++d) {
    if (local_shape[d] < 0 || global_offset[d] < 0 ||
        global_offset[d] + local_shape[d] > global_shape[d]) {
      return bad(absl::StrCat("shard [", absl::StrJoin(global_offset, ","),
                              "] + [", absl::StrJoin(local_shape, ","),
                              "] leaves global shape [",
                              absl::StrJoin(global_shape, ","), "]"));
    }
  }
  if (num_replicas < 1 || replica_id < 0 || replica_id >= num_replicas) {
    return bad(absl::StrCat("replica ", replica_id, " of ", num_replicas));
  }
  if (data == nullptr && NumElements() > 0) return bad("no data");
  return absl::OkStatus();
}

}  // namespace strata::checkpoint
