// Deterministic training data: global sample i is a pure function
// of (source, i), so every data-parallel split sees the same global batch
// (sample step*B + j is the j-th sequence of step `step`).
//
// Generated stream: each sample is an arithmetic progression modulo the
// vocabulary, a_t = (a_0 + d t) mod V, with start a_0 and stride d in
// [1, 7] drawn from (seed, i), and 10% of positions replaced by random
// tokens — learnable (the model must infer d from the context) yet noisy,
// so the loss falls smoothly towards the noise floor.
// Text file: byte tokens (vocab >= 256), sample i starts at byte
// (i * 997 * seq) mod (size - seq - 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace strata::train {

class DataSource {
 public:
  // Whether Open would accept `text_file`, without reading it: empty, or a
  // readable regular file of at least seq + 2 bytes with vocab >= 256.
  // InvalidArgument naming --data and the path.
  static Status Check(const std::string& text_file, int vocab, int seq);
  // Empty `text_file`: the generated stream. Errors as Check, or
  // Unavailable when reading fails.
  static StatusOr<DataSource> Open(const std::string& text_file, int vocab,
                                   int seq, uint64_t seed);
  // seq + 1 tokens: inputs are [0, seq), targets [1, seq].
  void Sample(int64_t index, int32_t* out) const;

 private:
  std::string text_;
  int vocab_ = 0, seq_ = 0;
  uint64_t seed_ = 0;
};

}  // namespace strata::train
