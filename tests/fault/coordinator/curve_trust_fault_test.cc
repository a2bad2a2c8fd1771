// CURVE trust files that someone else could write are refused:
//  - a world-writable authorized_keys directory, a world-writable curve dir
//    or an allow-listed key file owned by another user stop
//    strata-coordinator at start (exit 2, naming the path and mode/owner);
//  - while it runs, a key planted by user nobody in an authorized_keys
//    directory made world-writable does not get in (the re-read is refused
//    and logged, the last good list stays: the real client still works);
//  - the client refuses a curve dir whose server.key others can write.
// Real strata-coordinator and strata processes; needs root (chown).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/curve_config.h"
#include "tests/fault/coordinator/fault_coordinator.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr uid_t kNobody = 65534;

class CurveTrustFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to chown to nobody";
    auto dir = control::MakeEphemeralCurveDir(c_.dir());
    ASSERT_TRUE(dir.ok()) << dir.status();
    curve_ = *dir;
    allow_ = curve_ + "/authorized_keys";
  }
  int StartAndWaitExit() {
    c_.Start({"--curve-dir", curve_});
    return c_.WaitExit(seconds(5));
  }

  FaultCoordinator c_;
  std::string curve_, allow_;
};

TEST_F(CurveTrustFaultTest, WorldWritableAllowListDirStopsStart) {
  ASSERT_EQ(chmod(allow_.c_str(), 0777), 0);
  EXPECT_EQ(StartAndWaitExit(), 2) << c_.Log();
  EXPECT_NE(c_.Log().find(allow_), std::string::npos) << c_.Log();
  EXPECT_NE(c_.Log().find("0777"), std::string::npos) << c_.Log();
}

TEST_F(CurveTrustFaultTest, WorldWritableCurveDirStopsStart) {
  ASSERT_EQ(chmod(curve_.c_str(), 0777), 0);
  EXPECT_EQ(StartAndWaitExit(), 2) << c_.Log();
  EXPECT_NE(c_.Log().find(curve_ + ": writable by group or others (mode 0777)"),
            std::string::npos)
      << c_.Log();
}

TEST_F(CurveTrustFaultTest, ForeignOwnedKeyFileStopsStart) {
  const std::string key = allow_ + "/client.key";
  ASSERT_EQ(chown(key.c_str(), kNobody, kNobody), 0);
  EXPECT_EQ(StartAndWaitExit(), 2) << c_.Log();
  EXPECT_NE(c_.Log().find(key + ": owned by uid 65534"), std::string::npos)
      << c_.Log();
}

TEST_F(CurveTrustFaultTest, KeyPlantedWhileRunningIsRefused) {
  c_.Start({"--curve-dir", curve_});
  auto client_config = control::LoadCurveClientConfig(curve_);
  ASSERT_TRUE(client_config.ok()) << client_config.status();
  zmq::context_t ctx;
  control::DealerClient good(&ctx, c_.endpoint(), *client_config);
  control::Request list;
  list.mutable_list_jobs();
  StatusOr<control::Reply> reply = absl::UnavailableError("not called");
  for (int i = 0; i < 50 && !reply.ok(); ++i) reply = good.Call(list, 200);
  ASSERT_TRUE(reply.ok()) << reply.status() << c_.Log();

  // An administrator's slip, then the attack: nobody plants a key.
  ASSERT_EQ(chmod(allow_.c_str(), 0777), 0);
  auto evil = control::GenerateCurveKeyPair();
  ASSERT_TRUE(evil.ok());
  const std::string planted = allow_ + "/evil.key";
  ASSERT_TRUE(
      control::WritePublicKeyFile(planted, evil->public_key, "planted").ok());
  ASSERT_EQ(chown(planted.c_str(), kNobody, kNobody), 0);

  control::CurveClientConfig evil_config = *client_config;
  evil_config.client = *evil;
  control::DealerClient attacker(&ctx, c_.endpoint(), evil_config);
  control::Request submit;
  auto* launch = submit.mutable_submit_job()->mutable_spec()->mutable_launch();
  launch->add_command("/bin/true");
  launch->set_nodes(1);
  // Re-reads happen at most once a second: 2.5 s covers two of them.
  bool got_in = false;
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(2500);
  while (!got_in && std::chrono::steady_clock::now() < deadline) {
    got_in = attacker.Call(submit, 300).ok();
  }
  EXPECT_FALSE(got_in) << "a key planted by nobody was accepted";
  EXPECT_NE(
      c_.Log().find("keeping the last good allow-list; refusing " + allow_),
      std::string::npos)
      << c_.Log();
  // The last good list still admits the real client.
  reply = good.Call(list, 2000);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->jobs().jobs_size(), 0);
}

TEST_F(CurveTrustFaultTest, ClientRefusesServerKeyOthersCanWrite) {
  const std::string server_key = curve_ + "/server.key";
  ASSERT_EQ(chmod(server_key.c_str(), 0666), 0);
  RunResult r = c_.Strata("status --curve-dir " + curve_);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(server_key + ": writable by group or others (mode "
                                    "0666)"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace strata::testing
