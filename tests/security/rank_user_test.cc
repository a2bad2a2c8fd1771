// Ranks as a less privileged user (issue 30, "Ranks never receive a
// worker's secret key"): a root worker started with --rank-user runs its
// ranks as that user. The rank tries to read the worker's secret key (a
// root 0600 file) and fails, while what it needs still works: its plan, a
// directory of its own ($TMPDIR) and the telemetry socket, whose reports
// the worker accepts from it. Root only (skips otherwise); uses `nobody`.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "placement/rank_env.h"
#include "worker/private_dir.h"
#include "worker/rank_supervisor.h"
#include "worker/telemetry.h"

namespace strata::worker {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

TEST(RankUserTest, UsersThatCannotRunRanksAreRefused) {
  auto none = LookUpRankUser("no-such-user-strata");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no user 'no-such-user-strata'"),
            std::string::npos)
      << none.status();
  auto root = LookUpRankUser("root");
  ASSERT_FALSE(root.ok());
  EXPECT_NE(root.status().message().find("is root"), std::string::npos);
  if (geteuid() != 0) {
    auto nobody = LookUpRankUser("nobody");
    ASSERT_FALSE(nobody.ok());
    EXPECT_EQ(nobody.status().code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST(RankUserTest, ARankCannotReadTheWorkersKey) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  auto user = LookUpRankUser("nobody");
  if (!user.ok()) GTEST_SKIP() << user.status();
  const std::string base =
      absl::StrCat(::testing::TempDir(), "/rank_user_", getpid());
  const std::string dir = base + "/work";
  // The worker's key as deployed: a root file of mode 0600 in a directory
  // anyone may traverse (the file mode alone protects it).
  const std::string keys = base + "/keys";
  ASSERT_EQ(system(("mkdir -p " + keys + " && chmod 755 " + base + " " + keys)
                       .c_str()),
            0);
  const std::string secret = keys + "/client.key_secret";
  ASSERT_TRUE(WritePrivateFile(secret, "worker-secret-key\n", 0600).ok());
  ASSERT_TRUE(MakePrivateDir(dir).ok());

  const std::string ep = absl::StrCat("ipc://", dir, "/telemetry.sock");
  zmq::context_t ctx;
  TelemetrySink sink(&ctx);
  ASSERT_TRUE(sink.Bind(ep).ok());
  SystemClock clock;
  RankSupervisor ranks(&clock, dir, {{placement::kTelemetry, ep}});
  sink.SetRanks(&ranks);
  ASSERT_TRUE(ranks.SetRankUser(*user).ok());

  control::RankLaunch o;
  o.set_job_id("job-u");
  o.set_attempt(0);
  o.set_rank(0);
  o.set_plan_json("{\"plan\": 1}");
  o.add_command("/bin/sh");
  o.add_command("-c");
  o.add_command(absl::StrCat(
      "echo uid=$(id -u); "
      "if cat ", secret, "; then echo KEY-READ; else echo KEY-DENIED; fi; "
      "grep -q plan \"$STRATA_PLAN\" && echo PLAN-OK; "
      "echo x > \"$TMPDIR/scratch\" && echo TMP-OK; ",
      STRATA_TELEMETRY_PUSH, " job-u 0 1 200 && echo PUSHED"));
  ranks.Launch(o);
  bool exited = false;
  bool reported = false;
  for (int i = 0; i < 250 && !(exited && reported); ++i) {
    ranks.Poll();
    for (const auto& s : sink.TakeChanged()) {
      reported = reported || (s.job_id() == "job-u" && s.step() == 1);
    }
    exited = ranks.running() == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(exited);
  const std::string out = Slurp(dir + "/job-u/attempt-0/rank-0.stdout");
  const std::string err = Slurp(dir + "/job-u/attempt-0/rank-0.stderr");
  EXPECT_NE(out.find(absl::StrCat("uid=", user->uid)), std::string::npos)
      << out << err;
  EXPECT_NE(out.find("KEY-DENIED"), std::string::npos) << out << err;
  EXPECT_EQ(out.find("worker-secret-key"), std::string::npos) << out;
  EXPECT_NE(err.find("Permission denied"), std::string::npos) << err;
  EXPECT_NE(out.find("PLAN-OK"), std::string::npos) << out << err;
  EXPECT_NE(out.find("TMP-OK"), std::string::npos) << out << err;
  EXPECT_NE(out.find("PUSHED"), std::string::npos) << out << err;
  EXPECT_TRUE(reported) << "the worker did not accept the rank's report; "
                        << sink.last_refusal();
  // The worker's files stay its own.
  struct stat st;
  ASSERT_EQ(stat(secret.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ranks.StopAll(1000);
  ASSERT_EQ(system(("rm -rf " + base).c_str()), 0);
}

}  // namespace
}  // namespace strata::worker
