// Export of a committed checkpoint as one consolidated safetensors file
// (https://github.com/huggingface/safetensors: 8-byte little-endian header
// length, a JSON header mapping each tensor to dtype, shape and
// data_offsets relative to the byte buffer after the header, then the
// tensors' bytes back to back, row-major).
#pragma once

#include <string>

#include "checkpoint/storage.h"
#include "common/status.h"

namespace strata::checkpoint {

// Writes `out` (through a temporary file and rename, removed on failure).
// Tensors are loaded one at a time at their full global shape, so memory
// use is the largest tensor. The URI form pins the step for the whole
// export (reader.h OpenStep); with a Storage the caller pins it. The
// reader's errors (DataLoss, NotFound; reader.h), or the write's.
Status ExportSafetensors(const std::string& uri, int64_t step,
                         const std::string& out);
Status ExportSafetensors(Storage& storage, int64_t step,
                         const std::string& out);

}  // namespace strata::checkpoint
