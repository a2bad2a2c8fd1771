// The strata-train command: impossible splits and bad flags exit 2 with one
// line naming the problem; a single process trains on the generated stream
// and on a text file (--data); a run checkpoints and --resume continues.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/integration/cli/run_command.h"

namespace {

using strata::testing::RunCommand;
using strata::testing::RunResult;

RunResult RunTrain(const std::string& args, const std::string& env = "") {
  const char* bin = std::getenv("STRATA_BINARY_DIR");
  return RunCommand(env + " " + std::string(bin ? bin : ".") +
                    "/runtime/strata-train " + args);
}

TEST(StrataTrainCliTest, BadInputExitsTwoWithOneLine) {
  struct Case {
    const char* args;
    const char* env;
    const char* says;
  } cases[] = {
      {"--model huge", "", "unknown model"},
      {"--tp 2", "", "tp=2 x pp=1 x cp=1 does not divide WORLD_SIZE=1"},
      {"--tp 3", "RANK=0 WORLD_SIZE=3 STRATA_STORE=file:///nonexistent",
       "tp=3 does not divide the 8 heads"},
      {"--pp 3", "RANK=0 WORLD_SIZE=3 STRATA_STORE=file:///nonexistent",
       "pp=3 does not divide the 8 layers"},
      {"--global-batch 6 --micro-batch 4", "", "not divisible"},
      {"--dp 2", "", "--dp 2 but world size 1"},
      {"--steps x", "", "steps"},
      {"", "RANK=5 WORLD_SIZE=2", "RANK=5 is not below WORLD_SIZE=2"},
      {"", "RANK=0 WORLD_SIZE=2", "STRATA_STORE is not set"},
      // A flag that contradicts the launcher's placement.
      {"--tp 2", "STRATA_TP=1", "tp=2 was asked for but STRATA_TP=1"},
      // ... and says how to fix it.
      {"--tp 2", "STRATA_TP=1", "launch with `strata run --tp 2 ...`"},
      // Two nodes and no address to bind: named, not a loopback bind.
      {"", "RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 STRATA_STORE=file:///tmp",
       "STRATA_NODE_ADDR is not set, but the job spans 2 nodes"},
      {"--data /nonexistent/file --model small", "", "cannot open --data"},
  };
  for (const auto& c : cases) {
    RunResult r = RunTrain(c.args, c.env);
    EXPECT_EQ(r.code, 2) << c.args << " -> " << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos)
        << c.args << " -> " << r.out;
  }
}

TEST(StrataTrainCliTest, UnresolvableNodeAddressIsNamed) {
  const std::string dir =
      "/tmp/strata-train-cli-store-" + std::to_string(getpid());
  RunResult r =
      RunTrain("--model tiny --steps 1",
               "RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 STRATA_STORE=file://" +
                   dir + " STRATA_NODE_ADDR=no-such-host.invalid");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("STRATA_NODE_ADDR 'no-such-host.invalid' does not "
                       "resolve"),
            std::string::npos)
      << r.out;
}

TEST(StrataTrainCliTest, TrainsResumesAndReadsText) {
  const std::string dir =
      "/tmp/strata-train-cli-ckpt-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  RunResult a =
      RunTrain("--model tiny --steps 6 --ckpt-every 3 --ckpt file://" + dir);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("step=6 loss="), std::string::npos) << a.out;
  RunResult b =
      RunTrain("--model tiny --steps 8 --resume --ckpt file://" + dir);
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("resumed step=6"), std::string::npos) << b.out;
  EXPECT_EQ(b.out.find("step=1 "), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("step=8 loss="), std::string::npos) << b.out;
  std::filesystem::remove_all(dir);

  const std::string text =
      "/tmp/strata-train-cli-text-" + std::to_string(getpid());
  {
    std::ofstream f(text);
    for (int i = 0; i < 200; ++i)
      f << "the quick brown fox jumps over the lazy dog. ";
  }
  RunResult c =
      RunTrain("--model small --steps 2 --global-batch 2 --data " + text);
  std::filesystem::remove(text);
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("step=2 loss="), std::string::npos) << c.out;
}

}  // namespace
