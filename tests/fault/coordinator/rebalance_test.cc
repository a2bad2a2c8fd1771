// Fault policy `rebalance` on a real job: `strata run` of strata-train
// `small` planned by the planner (--model strata-small) as pp=2 on two
// local workers with one rank each, so each pipeline stage is one node and
// no rank does the same work as another. Worker node-1 is slowed 2x from
// step 3 (strata-inject --children-of: its rank in every attempt). Plan vs
// measured must name stage 1 on node-1, the coordinator must re-plan with
// node-1 at its measured speed (fewer layers on stage 1), and the job must
// resume under the new split and succeed. A job the planner did not plan
// (no --model) cannot be rebalanced and says why.
#include <string>

#include "gtest/gtest.h"
#include "tests/integration/cli/run_command.h"

namespace strata::testing {
namespace {

TEST(RebalanceTest, ASlowStageGetsFewerLayers) {
  const RunResult r = RunStrata(
      "run --nodes 2 --ranks-per-node 1 --pp 2 --model strata-small "
      "--max-restarts 2 --fault straggler=rebalance --fault restart_cost_s=1 "
      "--inject slow-node:node=1,factor=2,step=3 -- " +
      TrainBinary() +
      " --model small --steps 60 --global-batch 8 --micro-batch 1 "
      "--ckpt-every 5 --resume");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("layers_per_stage=4,4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("attempt 0: plan_mismatch: stage 1 on node-1 computes "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("attempt 0: rebalanced: node node-1 after "
                       "plan_mismatch"),
            std::string::npos)
      << r.out;
  // Stage 1 (node-1) gets fewer layers than stage 0.
  EXPECT_TRUE(r.out.find("replanned: tp=1 pp=2 dp=1 layers [5,3] on 2 nodes "
                         "(was tp=1 pp=2 dp=1 layers [4,4] on 2 nodes); node "
                         "speeds: node-1=") != std::string::npos ||
              r.out.find("replanned: tp=1 pp=2 dp=1 layers [6,2] on 2 nodes "
                         "(was tp=1 pp=2 dp=1 layers [4,4] on 2 nodes); node "
                         "speeds: node-1=") != std::string::npos)
      << r.out;
  // A second rebalance may refine the speed when the first split still
  // measures slower than planned (the duty-cycled node's speed is noisy on
  // a loaded machine); either way the job ends well.
  EXPECT_TRUE(r.out.find("SUCCEEDED after 1 restart(s)") != std::string::npos ||
              r.out.find("SUCCEEDED after 2 restart(s)") != std::string::npos)
      << r.out;
}

TEST(RebalanceTest, AJobWithoutAModelIsNotRebalanced) {
  const RunResult r = RunStrata(
      "run --nodes 2 --ranks-per-node 2 --max-restarts 2 "
      "--fault straggler=rebalance --fault restart_cost_s=0 "
      // 3x in 20 ms slices (as strata-bench fault slows ranks): with four
      // ranks time-sliced on two cores a coarser 2x was at times absorbed
      // and nothing was found in 40 steps.
      "--inject slow:rank=3,factor=3,step=3,period_ms=20 -- " +
      TrainBinary() + " --model small --steps 60 --global-batch 8 --micro-batch 1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("straggler: rank 3 on node-1"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("fault_action: report after straggler (rebalance "
                       "refused: the job has no launch.model"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("SUCCEEDED after 0 restart(s)"), std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace strata::testing
