// Per-thread scratch buffers for the trainer's kernels, so a steady-state
// step allocates nothing: each slot grows to the largest size asked of it
// and is then reused. Ranks run as threads in tests and strata-bench, so
// the buffers are thread_local. A pointer is valid until the same slot is
// asked for again on the same thread; kernels that call each other use
// distinct slots.
#pragma once

#include <cstddef>
#include <vector>

namespace strata::train {

enum class Slot {
  kAttnA,        // attention: one head's padded operands (attention.cc)
  kAttnB,
  kAttnC,
  kAttnD,
  kAttnS,        // attention: s x s scores or probabilities
  kAttnDs,       // attention backward: dP, then dS
  kLogits,       // cross-entropy logits
  kBlockDa,      // block backward buffers, see block.cc
  kBlockDu,
  kBlockDln,
  kBlockDx2,
  kBlockDatt,
  kBlockDq,
  kBlockDk,
  kBlockDv,
  kCount
};

inline float* Scratch(Slot slot, size_t n) {
  thread_local std::vector<float> buffers[static_cast<int>(Slot::kCount)];
  std::vector<float>& b = buffers[static_cast<int>(slot)];
  if (b.size() < n) b.resize(n);
  return b.data();
}

}  // namespace strata::train
