#include "train/data.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "train/splitmix.h"

namespace strata::train {
namespace {
constexpr int kNoisePercent = 10;
constexpr int64_t kTextStride = 997;  // prime, spreads samples over the file
}  // namespace

Status DataSource::Check(const std::string& text_file, int vocab, int seq) {
  if (text_file.empty()) return absl::OkStatus();
  if (vocab < 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data needs byte tokens: the model's vocabulary is ",
                     vocab, ", at least 256 is required"));
  }
  struct stat st;
  if (stat(text_file.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot open --data ", text_file, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data ", text_file, " is ",
                     S_ISDIR(st.st_mode) ? "a directory" : "not a regular file",
                     "; give a text file"));
  }
  if (access(text_file.c_str(), R_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot open --data ", text_file, ": ", std::strerror(errno)));
  }
  if (st.st_size < seq + 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data ", text_file, " has ", st.st_size,
                     " bytes; a sample needs ", seq + 2));
  }
  return absl::OkStatus();
}

StatusOr<DataSource> DataSource::Open(const std::string& text_file, int vocab,
                                      int seq, uint64_t seed) {
  RETURN_IF_ERROR(Check(text_file, vocab, seq));
  DataSource d;
  d.vocab_ = vocab;
  d.seq_ = seq;
  d.seed_ = seed;
  if (text_file.empty()) return d;
  int fd = open(text_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot open --data ", text_file, ": ", std::strerror(errno)));
  }
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return absl::UnavailableError(
          absl::StrCat("reading --data ", text_file, ": ", std::strerror(err)));
    }
    d.text_.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (static_cast<int64_t>(d.text_.size()) < seq + 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data ", text_file, " has ", d.text_.size(),
                     " bytes; a sample needs ", seq + 2));
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
  const uint64_t key =
      SplitMix64(seed_ ^ SplitMix64(static_cast<uint64_t>(index)));
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
