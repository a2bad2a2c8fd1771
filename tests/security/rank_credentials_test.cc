// Finding 1 of issue 30, the worker's side: "every rank gets the node's
// client secret key through STRATA_CURVE_DIR". A rank now gets a private
// curve dir holding only the per-attempt key of its launch order; the
// worker's own curve dir (from its environment or the job's) never reaches
// it.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/clock.h"
#include "control/curve_config.h"
#include "worker/rank_supervisor.h"

namespace strata::worker {
namespace {

namespace fs = std::filesystem;

TEST(RankCredentialsTest, RankGetsItsOwnKeyNeverTheWorkers) {
  const fs::path dir = fs::temp_directory_path() /
                       ("strata-sec-rank-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  setenv(control::kCurveDirEnv, "/etc/strata/worker-keys", 1);
  auto server = *control::GenerateCurveKeyPair();
  auto rank_keys = *control::GenerateCurveKeyPair();
  SystemClock clock;
  {
    RankSupervisor sup(&clock, (dir / "work").string(), {});
    sup.SetCurveServerKey(server.public_key);
    control::RankLaunch order;
    order.set_job_id("job-1");
    order.set_attempt(0);
    order.set_rank(0);
    order.add_command("/usr/bin/env");
    (*order.mutable_env())[control::kCurveDirEnv] = "/etc/strata/worker-keys";
    order.set_curve_public_key(rank_keys.public_key);
    order.set_curve_secret_key(rank_keys.secret_key);
    sup.Launch(order);
    for (int i = 0; i < 500 && sup.running() > 0; ++i) {
      sup.Poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  unsetenv(control::kCurveDirEnv);
  const fs::path attempt = dir / "work/job-1/attempt-0";
  std::ifstream in(attempt / "rank-0.stdout");
  std::string out((std::istreambuf_iterator<char>(in)), {});
  const std::string curve_dir = (attempt / "rank-0.curve").string();
  EXPECT_NE(out.find("STRATA_CURVE_DIR=" + curve_dir + "\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("worker-keys"), std::string::npos) << out;
  // The dir is a client curve dir of the rank's key, private to its user.
  auto loaded = control::LoadCurveClientConfig(curve_dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->client.public_key, rank_keys.public_key);
  EXPECT_EQ(loaded->server_public_key, server.public_key);
  struct stat st;
  ASSERT_EQ(stat(curve_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::worker
