#include "launch/child_env.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace strata::launch {
namespace {

TEST(ChildEnvironmentTest, DropsMpiIdentityAndOverrides) {
  std::vector<std::string> inherited = {"PATH=/usr/bin",
                                        "OMPI_COMM_WORLD_RANK=3",
                                        "PMIX_RANK=3",
                                        "RANK=99",
                                        "STRATA_PLAN=/old.json",
                                        "STRATA_TELEMETRY=ipc:///old",
                                        "STRATA_CKPT_URI=file:///x",
                                        "HOME=/root",
                                        "MALFORMED"};
  auto env = ChildEnvironment(inherited, {{"RANK", "3"}, {"WORLD_SIZE", "4"}});
  auto has = [&](const std::string& kv) {
    return std::find(env.begin(), env.end(), kv) != env.end();
  };
  EXPECT_TRUE(has("PATH=/usr/bin"));
  EXPECT_TRUE(has("HOME=/root"));
  EXPECT_TRUE(has("STRATA_CKPT_URI=file:///x"));
  EXPECT_TRUE(has("RANK=3"));
  EXPECT_TRUE(has("WORLD_SIZE=4"));
  EXPECT_FALSE(has("RANK=99"));
  EXPECT_FALSE(has("OMPI_COMM_WORLD_RANK=3"));
  EXPECT_FALSE(has("PMIX_RANK=3"));
  EXPECT_FALSE(has("STRATA_PLAN=/old.json"));
  EXPECT_FALSE(has("STRATA_TELEMETRY=ipc:///old"));
  EXPECT_FALSE(has("MALFORMED"));
  EXPECT_EQ(env.size(), 5u);
}

}  // namespace
}  // namespace strata::launch
