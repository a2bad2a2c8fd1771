// `strata ckpt` against a real checkpoint written by the library by two
// "ranks"; safetensors export checked by Python's json + struct.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "checkpoint/checkpointer.h"
#include "gtest/gtest.h"
#include "tests/integration/cli/run_command.h"

namespace strata {
namespace {

using testing::RunCommand;
using testing::RunResult;

std::string Strata() { return testing::StrataBinary(); }

// Two ranks each save half of "w" [4, 6] (rows) and all of "b" [6] as DP
// replicas; values are the flat global index.
std::string MakeCheckpoint(const std::string& scheme = "") {
  std::string tmpl = ::testing::TempDir() + "/ckptcli_XXXXXX";
  const std::string dir = scheme + mkdtemp(tmpl.data());
  auto store = comm::NewInMemoryStore();
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      std::vector<float> w(12), b(6);
      for (int i = 0; i < 12; ++i) w[i] = static_cast<float>(r * 12 + i);
      for (int i = 0; i < 6; ++i) b[i] = 100.0f + i;
      checkpoint::ShardedTensor tw{
          "w",     checkpoint::DType::kF32, {4, 6}, {2, 6}, {2 * r, 0}, 0, 1,
          w.data()};
      checkpoint::ShardedTensor tb{
          "b", checkpoint::DType::kF32, {6}, {6}, {0}, r, 2, b.data()};
      checkpoint::CheckpointOptions o;
      o.uri = dir;
      o.rank = r;
      o.world_size = 2;
      o.store = store;
      checkpoint::Checkpointer c(o);
      ASSERT_TRUE(c.SaveAsync(5, {tw, tb}, {}).ok());
      ASSERT_TRUE(c.Wait().ok());
    });
  }
  for (auto& t : ranks) t.join();
  return dir;
}

TEST(CkptCliTest, LsInspectVerifyExport) {
  const std::string dir = MakeCheckpoint();
  RunResult ls = RunCommand(Strata() + " ckpt ls file://" + dir);
  ASSERT_EQ(ls.code, 0) << ls.out;
  EXPECT_NE(ls.out.find("           5        2        2"), std::string::npos)
      << ls.out;
  RunResult inspect = RunCommand(Strata() + " ckpt inspect " + dir);
  ASSERT_EQ(inspect.code, 0) << inspect.out;
  EXPECT_NE(inspect.out.find("[2,6] x2"), std::string::npos)
      << inspect.out;  // w: two row halves
  EXPECT_NE(inspect.out.find("[3] x2"), std::string::npos)
      << inspect.out;  // b: split over replicas
  RunResult verify = RunCommand(Strata() + " ckpt verify " + dir + " --step 5");
  EXPECT_EQ(verify.code, 0) << verify.out;
  const std::string out = dir + "/model.safetensors";
  RunResult exp = RunCommand(Strata() + " ckpt export " + dir +
                             " --step 5 --format safetensors --out " + out);
  ASSERT_EQ(exp.code, 0) << exp.out;
  const char* src = std::getenv("STRATA_SOURCE_DIR");
  RunResult py = RunCommand(
      std::string("/usr/bin/python3 ") + (src ? src : ".") +
      "/tests/integration/cli/check_safetensors.py " + out +
      " '{\"w\":{\"dtype\":\"F32\",\"shape\":[4,6],\"first\":0,\"last\":23},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[6],\"first\":100,\"last\":105}}'");
  EXPECT_EQ(py.code, 0) << py.out;
  EXPECT_NE(py.out.find("OK 2 tensors"), std::string::npos) << py.out;
}

TEST(CkptCliTest, CorruptionAndBadInputExitNonZero) {
  const std::string dir = MakeCheckpoint();
  {
    std::fstream f(dir + "/step-000000000005/rank-00001.data",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4);
    f.put('\x7f');
  }
  RunResult verify = RunCommand(Strata() + " ckpt verify " + dir);
  EXPECT_EQ(verify.code, 2) << verify.out;
  EXPECT_NE(verify.out.find("checksum mismatch"), std::string::npos)
      << verify.out;
  RunResult bad = RunCommand(Strata() + " ckpt ls s3://bucket/x");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("unsupported checkpoint URI"), std::string::npos)
      << bad.out;
  RunResult missing =
      RunCommand(Strata() + " ckpt inspect " + dir + " --step 99");
  EXPECT_EQ(missing.code, 2) << missing.out;
  EXPECT_NE(missing.out.find("step 99"), std::string::npos) << missing.out;
}

TEST(CkptCliTest, RocksDbCheckpointsWorkThroughTheSameCommands) {
  const std::string uri = MakeCheckpoint("rocksdb://");
  RunResult ls = RunCommand(Strata() + " ckpt ls " + uri);
  ASSERT_EQ(ls.code, 0) << ls.out;
  EXPECT_NE(ls.out.find("           5        2        2"), std::string::npos)
      << ls.out;
  RunResult verify = RunCommand(Strata() + " ckpt verify " + uri);
  EXPECT_EQ(verify.code, 0) << verify.out;
  const std::string out = ::testing::TempDir() + "/rocks_model.safetensors";
  RunResult exp = RunCommand(Strata() + " ckpt export " + uri +
                             " --format safetensors --out " + out);
  EXPECT_EQ(exp.code, 0) << exp.out;
  RunResult gc = RunCommand(Strata() + " ckpt gc " + uri + " --keep 1");
  EXPECT_EQ(gc.code, 0) << gc.out;
  EXPECT_NE(gc.out.find("removed 0 checkpoint(s), kept 1"), std::string::npos)
      << gc.out;
}

}  // namespace
}  // namespace strata
