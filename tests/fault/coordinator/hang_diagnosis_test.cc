// A hung rank is found, diagnosed from the flight recorders and the attempt
// restarted: `strata run` of two strata-train ranks (two local workers)
// where strata-inject SIGSTOPs rank 1 once strata run sees step 5. The hang
// event must name rank 1 and the collective rank 0 waits in, and the job
// must succeed in its second attempt from its checkpoint. `tiny` steps in
// ~3 ms: 30 steps could end between two of strata run's status polls,
// before the injection, so the job is 400 steps long.
#include <string>

#include "gtest/gtest.h"
#include "tests/integration/cli/run_command.h"

namespace strata::testing {
namespace {

TEST(HangDiagnosisTest, AStoppedRankIsNamedAndTheJobRestarts) {
  const std::string dir =
      ::testing::TempDir() + "/hang_diag_" + std::to_string(getpid());
  const RunResult r = RunStrata(
      "run --nodes 2 --ranks-per-node 1 --max-restarts 1 "
      "--fault hang_floor_s=2 --inject hang:rank=1,step=5 --state-dir " +
      dir + " -- " + TrainBinary() +
      " --model tiny --steps 400 --global-batch 4 --micro-batch 1 "
      "--ckpt-every 5 --resume");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("fault injection at step"), std::string::npos) << r.out;
  // Where SIGSTOP catches rank 1 decides the wording. Stopped between
  // collectives, rank 1 never entered the one rank 0 waits in; stopped
  // inside it, both entered and rank 1's process is stopped; stopped inside
  // one rank 0 already finished, rank 0 waits in the next.
  const bool outside =
      r.out.find(
          "attempt 0: hang: rank(s) 1 never entered the collective "
          "the others wait in (group dp0 stuck in ") != std::string::npos &&
      r.out.find("waiting 0; never entered 1") != std::string::npos;
  const bool inside =
      r.out.find(
          "attempt 0: hang: rank(s) 1 stopped inside the collective "
          "the others wait in (group dp0 stuck in ") != std::string::npos &&
      r.out.find("waiting 0,1; every member entered") != std::string::npos;
  // Stopped inside a collective rank 0 finished (rank 0 waits in the next,
  // or outside any, e.g. for a checkpoint commit).
  const bool earlier =
      r.out.find(
          "attempt 0: hang: rank(s) 1 stopped inside a collective the "
          "others finished (group dp0 stuck in ") != std::string::npos &&
      (r.out.find("waiting 0; still inside an earlier one 1") !=
           std::string::npos ||
       r.out.find("waiting 1; finished by 0") != std::string::npos);
  // Stopped while rank 0 waits for a checkpoint commit: no collective.
  const bool elsewhere =
      r.out.find(
          "attempt 0: hang: rank(s) 1 stopped outside any collective "
          "(no group is inside a collective") != std::string::npos;
  EXPECT_TRUE(outside || inside || earlier || elsewhere) << r.out;
  EXPECT_NE(r.out.find("fault_action: restart after hang"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("SUCCEEDED after 1 restart(s)"), std::string::npos)
      << r.out;
  // The hang event carries the stopped rank's backtrace (eu-stack is installed
  // by deploy/install-deps.sh), or, on a machine so loaded that the debugger
  // missed its 3 s budget, says so (stack_dump_test checks the backtraces
  // themselves).
  const RunResult log = RunCommand("cat " + dir + "/coordinator.log");
  EXPECT_TRUE(log.out.find("stack: #0 ") != std::string::npos ||
              log.out.find("stack: debugger gave no backtrace within") !=
                  std::string::npos)
      << log.out;
  RunCommand("rm -rf " + dir);
}

// An injection whose step the job never reaches is reported, not passed
// over as if the job had survived it.
TEST(HangDiagnosisTest, AnInjectionThatNeverRanIsReported) {
  const RunResult r = RunStrata(
      "run --nodes 1 --ranks-per-node 1 --inject hang:rank=0,step=1000 -- " +
      TrainBinary() + " --model tiny --steps 3");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("fault injection did not run: hang:rank=0,step=1000 "
                       "(the newest step seen was "),
            std::string::npos)
      << r.out;
}

TEST(HangDiagnosisTest, BadFaultSettingsAreRefusedBeforeAnythingRuns) {
  RunResult r = RunStrata("run --fault hang_k=0 -- /bin/true");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("fault.hang_k"), std::string::npos) << r.out;
  r = RunStrata("run --fault hang_timeout=5 -- /bin/true");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown fault key 'hang_timeout'"), std::string::npos)
      << r.out;
  r = RunStrata("run --inject hang:rank=1,when=3 -- /bin/true");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown key 'when'"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace strata::testing
