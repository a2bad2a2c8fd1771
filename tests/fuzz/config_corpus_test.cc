// Replays tests/fuzz/config_corpus through config_fuzz's checks with the
// main build's compiler, so every CI run exercises config parsing on these
// inputs even without clang/libFuzzer. The first byte of a seed picks the
// file kind (byte % 3: model, cluster, job). File names say what each seed
// must do: model_*, cluster_*, job_* are accepted, bad_* rejected with
// InvalidArgument; other names (crashers found later) only need to pass
// the target's checks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/config.h"
#include "planner/job.h"
#include "planner/model.h"
#include "topology/cluster.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace strata {
namespace {

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status Validate(const std::string& seed) {
  const std::string text = seed.substr(1);
  switch (static_cast<unsigned char>(seed[0]) % 3) {
    case 0: {
      ModelSpec m;
      RETURN_IF_ERROR(ParseConfig(text, "seed", &m, planner::ModelRanges()));
      return planner::NormalizeModel(&m);
    }
    case 1: {
      ClusterSpec c;
      RETURN_IF_ERROR(ParseConfig(text, "seed", &c, topology::ClusterRanges()));
      return topology::ValidateCluster(c);
    }
    default: {
      JobSpec j;
      RETURN_IF_ERROR(ParseConfig(text, "seed", &j, planner::JobRanges()));
      return planner::ValidateJob(j, "seed");
    }
  }
}

TEST(ConfigCorpusTest, EverySeedPassesTheFuzzTargetAndItsExpectation) {
  int seeds = 0, accepted = 0, rejected = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(STRATA_CONFIG_CORPUS_DIR)) {
    const std::string name = entry.path().filename().string();
    const std::string bytes = Slurp(entry.path());
    SCOPED_TRACE(name);
    ASSERT_FALSE(bytes.empty());
    ++seeds;
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                           bytes.size());
    const Status st = Validate(bytes);
    if (name.starts_with("bad_")) {
      EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
      ++rejected;
    } else if (name.starts_with("model_") || name.starts_with("cluster_") ||
               name.starts_with("job_")) {
      EXPECT_TRUE(st.ok()) << st;
      ++accepted;
    }
  }
  EXPECT_GE(accepted, 10);
  EXPECT_GE(rejected, 8);
  EXPECT_GE(seeds, accepted + rejected);
}

}  // namespace
}  // namespace strata
