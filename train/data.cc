#include "train/data.h"

#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "train/splitmix.h"

namespace strata::train {
namespace {
constexpr int kNoisePercent = 10;
constexpr int64_t kTextStride = 997;  // prime, spreads samples over the file
}  // namespace

StatusOr<DataSource> DataSource::Open(const std::string& text_file, int vocab,
                                      int seq, uint64_t seed) {
  DataSource d;
  d.vocab_ = vocab;
  d.seq_ = seq;
  d.seed_ = seed;
  if (text_file.empty()) return d;
  if (vocab < 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data needs byte tokens: the model's vocabulary is ", vocab,
        ", at least 256 is required"));
  }
  std::ifstream in(text_file, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot open --data " + text_file);
  d.text_.assign(std::istreambuf_iterator<char>(in), {});
  if (static_cast<int64_t>(d.text_.size()) < seq + 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data ", text_file, " has ", d.text_.size(),
        " bytes; a sample needs ", seq + 1));
  }
  return d;
}

void DataSource::Sample(int64_t index, int32_t* out) const {
  if (!text_.empty()) {
    const int64_t span = static_cast<int64_t>(text_.size()) - seq_ - 1;
    const int64_t start = (index * kTextStride * seq_) % span;
    for (int t = 0; t <= seq_; ++t) {
      out[t] = static_cast<unsigned char>(text_[start + t]);
    }
    return;
  }
  const uint64_t key = SplitMix64(seed_ ^ SplitMix64(static_cast<uint64_t>(index)));
  const int64_t a0 = static_cast<int64_t>(key % vocab_);
  const int64_t d = 1 + static_cast<int64_t>((key >> 32) % 7);
  for (int t = 0; t <= seq_; ++t) {
    const uint64_t r = SplitMix64(key + static_cast<uint64_t>(t) + 1);
    out[t] = (r % 100) < kNoisePercent
                 ? static_cast<int32_t>((r >> 16) % vocab_)
                 : static_cast<int32_t>((a0 + d * t) % vocab_);
  }
}

}  // namespace strata::train
