#include "worker/node_identity.h"

#include <map>

#include "gtest/gtest.h"

namespace strata::worker {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  auto m =
      std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [m](const char* name) -> const char* {
    auto it = m->find(name);
    return it == m->end() ? nullptr : it->second.c_str();
  };
}

TEST(NodeIdentityTest, FlagWins) {
  EXPECT_EQ(*NodeIdentity("n7", "host", Env({{"SLURMD_NODENAME", "s1"}})),
            "n7");
}

TEST(NodeIdentityTest, SlurmNodeNameThenNodeId) {
  EXPECT_EQ(*NodeIdentity(
                "", "host",
                Env({{"SLURMD_NODENAME", "gpu-03"}, {"SLURM_NODEID", "2"}})),
            "gpu-03");
  EXPECT_EQ(*NodeIdentity("", "host", Env({{"SLURM_NODEID", "2"}})),
            "slurm-node-2");
  EXPECT_EQ(
      *NodeIdentity("", "host",
                    Env({{"SLURMD_NODENAME", ""}, {"SLURM_NODEID", "0"}})),
      "slurm-node-0");
}

TEST(NodeIdentityTest, HostnameOutsideSlurm) {
  EXPECT_EQ(*NodeIdentity("", "host", Env({})), "host");
}

TEST(NodeIdentityTest, BadNodeIdIsRejectedByName) {
  for (const char* bad : {"x", "-1", "3a"}) {
    auto id = NodeIdentity("", "host", Env({{"SLURM_NODEID", bad}}));
    ASSERT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(id.status().message().find("SLURM_NODEID"), std::string::npos);
  }
}

}  // namespace
}  // namespace strata::worker
