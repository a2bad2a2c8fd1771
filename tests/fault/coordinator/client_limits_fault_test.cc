// Local problems are reported as local problems, at once: a job file over
// the 4 MiB control frame is refused by `strata submit` before sending
// (exit 2, "too large" with the sizes), not after a timeout as "is
// strata-coordinator running?"; so are a malformed --coordinator and a host
// name that does not resolve. Real strata and strata-coordinator processes.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/fault/coordinator/fault_coordinator.h"

namespace strata::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kNotRunning[] = "is strata-coordinator running?";

int64_t Ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::steady_clock::now() - since)
      .count();
}

TEST(ClientLimitsFaultTest, OversizedJobFileIsTooLargeNotUnreachable) {
  FaultCoordinator c;
  c.Start();
  ASSERT_TRUE(c.WaitUp()) << c.Log();
  // 5 MiB of environment: over the frame, under the file pre-check.
  const std::string file = c.dir() + "/big.yaml";
  {
    std::ofstream out(file);
    out << "name: big\nlaunch:\n  command: [/bin/true]\n  env:\n";
    for (int i = 0; i < 80; ++i) {
      out << "    K" << i << ": " << std::string(64 << 10, 'v') << "\n";
    }
  }
  const auto start = std::chrono::steady_clock::now();
  RunResult r = c.Strata("submit " + file);
  const int64_t ms = Ms(start);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("is too large: it encodes to"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("at most 4194304 bytes"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(kNotRunning), std::string::npos) << r.out;
  EXPECT_LT(ms, 4000) << "took " << ms << " ms";
  EXPECT_TRUE(c.Alive());
}

TEST(ClientLimitsFaultTest, LocalEndpointProblemsAreNamed) {
  RunResult r = RunStrata("status --coordinator not-an-endpoint");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("expected tcp://HOST:PORT or ipc://PATH"),
            std::string::npos)
      << r.out;
  r = RunStrata("status --coordinator tcp://no-such-host.invalid:7077");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cannot resolve host 'no-such-host.invalid'"),
            std::string::npos)
      << r.out;
  r = RunStrata("status --coordinator ipc:///nonexistent-strata-dir/sock");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("there is no socket file /nonexistent-strata-dir/sock"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace strata::testing
