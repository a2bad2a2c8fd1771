// Storage::CollectGarbage may only drop a rank's leftovers that can no
// longer commit: a step this rank moved past may still be merging on rank 0
// (ranks other than 0 do not wait for the commit), so deleting it made rank
// 0's commit fail with "cannot read rank index" (seen with the torch DDP
// example, whose rank 1 saves again before rank 0 commits).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "checkpoint/storage.h"
#include "gtest/gtest.h"

namespace strata::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string StepDir(const std::string& root, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%012lld",
                static_cast<long long>(step));
  return root + "/" + name;
}

void Touch(const std::string& path) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << "x";
}

TEST(CollectGarbageTest, KeepsStepsThatMayStillCommit) {
  const std::string root = testing::TempDir() + "/gc-" + std::to_string(getpid());
  fs::remove_all(root);
  Touch(StepDir(root, 3) + "/manifest.pb");            // committed
  Touch(StepDir(root, 3) + "/rank-00001.index");
  Touch(StepDir(root, 2) + "/rank-00001.index");       // older, uncommitted
  Touch(StepDir(root, 5) + "/rank-00001.index");       // rank 0 still merging
  Touch(StepDir(root, 7) + "/rank-00001.index");       // this rank's failure
  auto storage = OpenStorage("file://" + root, /*rank=*/1, /*writable=*/true);
  ASSERT_TRUE(storage.ok()) << storage.status();
  ASSERT_TRUE((*storage)->CollectGarbage(/*current=*/10, /*failed=*/{7}).ok());
  EXPECT_TRUE(fs::exists(StepDir(root, 3) + "/rank-00001.index"));
  EXPECT_FALSE(fs::exists(StepDir(root, 2) + "/rank-00001.index"));
  EXPECT_TRUE(fs::exists(StepDir(root, 5) + "/rank-00001.index"));
  EXPECT_FALSE(fs::exists(StepDir(root, 7) + "/rank-00001.index"));
  fs::remove_all(root);
}

}  // namespace
}  // namespace strata::checkpoint
