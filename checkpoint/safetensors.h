// Export of a committed checkpoint as one consolidated safetensors file
// (https://github.com/huggingface/safetensors: 8-byte little-endian header
// length, a JSON header mapping each tensor to dtype, shape and
// data_offsets relative to the byte buffer after the header, then the
// tensors' bytes back to back, row-major).
#pragma once

#include <string>

#include "common/status.h"

namespace strata::checkpoint {

// Writes `out` (through a temporary file and rename). Tensors are loaded one
// at a time at their full global shape, so memory use is the largest tensor.
Status ExportSafetensors(const std::string& dir, int64_t step,
                         const std::string& out);

}  // namespace strata::checkpoint
