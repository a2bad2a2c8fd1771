// Replays the checked-in fuzz corpus (tests/fuzz/corpus) through the fuzz
// target's checks with the main build's compiler, so every CI run exercises
// the decoder on these inputs even without clang/libFuzzer. File names say
// what each seed must do: req_* decode as requests, reply_* as replies,
// bad_* are rejected; other names (crashers found later, minimized) only
// need to pass the target's checks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "control/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace strata::control {
namespace {

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(EnvelopeCorpusTest, EverySeedPassesTheFuzzTargetAndItsExpectation) {
  const std::filesystem::path dir = STRATA_FUZZ_CORPUS_DIR;
  int seeds = 0, requests = 0, replies = 0, rejected = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const std::string bytes = Slurp(entry.path());
    SCOPED_TRACE(name);
    ++seeds;
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                           bytes.size());
    RejectCounters c;
    if (name.starts_with("req_")) {
      auto r = DecodeRequest(bytes, &c);
      EXPECT_TRUE(r.ok()) << r.status();
      ++requests;
    } else if (name.starts_with("reply_")) {
      auto r = DecodeReply(bytes);
      EXPECT_TRUE(r.ok()) << r.status();
      ++replies;
    } else if (name.starts_with("bad_")) {
      EXPECT_FALSE(DecodeRequest(bytes, &c).ok());
      EXPECT_EQ(c.Total(), 1u);
      ++rejected;
    }
  }
  EXPECT_GE(requests, 5);
  EXPECT_GE(replies, 2);
  EXPECT_GE(rejected, 4);
  EXPECT_GE(seeds, requests + replies + rejected);
}

}  // namespace
}  // namespace strata::control
