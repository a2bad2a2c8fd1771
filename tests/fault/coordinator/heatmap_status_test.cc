// `strata heatmap` and `strata status` progress on a real running job: a
// coordinator and a worker of this build run strata-train `tiny` on 2 ranks;
// once it has reported steps, the heat map is an SVG with both ranks and
// the steps so far, and status shows step/total with an ETA. Bad output
// names, bad step ranges and unknown jobs are refused with exit 2. And
// `strata run`'s live progress line on a terminal.
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tests/fault/coordinator/fault_coordinator.h"

namespace strata::testing {
namespace {

using std::chrono::seconds;

TEST(HeatmapStatusTest, RunningJobHeatmapAndProgress) {
  FaultCoordinator c;
  c.Start();
  c.StartWorker("node-0");
  ASSERT_TRUE(c.WaitWorkers(1, seconds(10))) << c.Log();
  const std::string file = c.dir() + "/train.yaml";
  std::ofstream(file) << "name: train\nlaunch:\n  command: [" << TrainBinary()
                      << ", --model, tiny, --steps, \"100000\", "
                         "--global-batch, \"4\", --micro-batch, \"1\"]\n"
                         "  nodes: 1\n  ranks_per_node: 2\n";
  RunResult r = c.Strata("submit " + file);
  ASSERT_EQ(r.code, 0) << r.out;

  // Until at least 30 steps are in (bounded).
  std::string svg = c.dir() + "/map.svg";
  for (int i = 0; i < 120; ++i) {
    r = c.Strata("heatmap job-1 -o " + svg);
    if (r.code == 0 && r.out.find(" 2 ranks x ") != std::string::npos) {
      const size_t x = r.out.find(" ranks x ") + 9;
      if (std::stoi(r.out.substr(x)) >= 30) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ASSERT_EQ(r.code, 0) << r.out << c.Strata("status job-1").out
                       << c.Strata("events job-1").out << c.Log();
  EXPECT_NE(r.out.find("map.svg: 2 ranks x "), std::string::npos) << r.out;
  std::stringstream content;
  content << std::ifstream(svg).rdbuf();
  EXPECT_EQ(content.str().rfind("<svg", 0) == 0 ||
                content.str().find("<svg") != std::string::npos,
            true);
  EXPECT_NE(content.str().find("job-1 attempt 0: compute seconds per step"),
            std::string::npos);
  EXPECT_NE(content.str().find("</svg>"), std::string::npos);

  r = c.Strata("heatmap job-1 --what wait --steps 10:20 -o " + svg);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 ranks x 11 steps (10-20)"), std::string::npos)
      << r.out;

  r = c.Strata("status job-1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("progress  step "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/100000 ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" tokens/s, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", ETA "), std::string::npos) << r.out;

  EXPECT_NE(r.out.find("goodput   "), std::string::npos) << r.out;

  r = c.Strata("heatmap job-1 -o " + c.dir() + "/map.png");
  EXPECT_EQ(r.code, 0) << r.out;
  std::stringstream png;
  png << std::ifstream(c.dir() + "/map.png", std::ios::binary).rdbuf();
  EXPECT_EQ(png.str().substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(png.str().substr(12, 4), "IHDR");
  EXPECT_NE(png.str().find("IEND"), std::string::npos);
  r = c.Strata("heatmap job-1 -o " + c.dir() + "/map.gif");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("write .svg or .png"), std::string::npos) << r.out;
  r = c.Strata("heatmap job-1 --steps 9:3 -o " + svg);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--steps '9:3' is not A:B"), std::string::npos) << r.out;
  r = c.Strata("heatmap job-9 -o " + svg);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no job 'job-9'"), std::string::npos) << r.out;
  (void)c.Strata("cancel job-1");
}

// `strata run` on a terminal (a pseudo-terminal from script(1)): one live
// progress line instead of the per-step lines, which stay in the logs; off
// a terminal every step line is printed.
TEST(HeatmapStatusTest, RunOnATerminalShowsOneLiveProgressLine) {
  const std::string run = StrataBinary() + " run --nodes 1 -- " +
                          TrainBinary() +
                          " --model tiny --steps 600 --global-batch 2 "
                          "--micro-batch 1";
  RunResult r = RunCommand("script -qec '" + run + "' /dev/null");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("step=200 loss="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\r\033[K[strata] job-1 attempt 0: step "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("SUCCEEDED"), std::string::npos) << r.out;
  r = RunCommand(run);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("step=200 loss="), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\033[K"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace strata::testing
