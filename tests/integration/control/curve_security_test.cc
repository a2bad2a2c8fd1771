// CURVE (RFC 26) + ZAP (RFC 27) on a real RouterServer over loopback TCP:
// an allow-listed client is served; a client with an unknown key, a
// plaintext client and a client with the wrong server key get no reply
// (DeadlineExceeded), are counted in rejects().unauthenticated, and the
// server keeps serving; a key authorized while the server runs gets in.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "control/curve_config.h"
#include "control/dealer_client.h"
#include "coordinator/server/router_server.h"

namespace strata::coordinator {
namespace {

namespace fs = std::filesystem;
constexpr int kRejectTimeoutMs = 300;

control::Request Register(const std::string& node) {
  control::Request r;
  r.mutable_register_worker()->set_node_name(node);
  return r;
}

class CurveSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("strata-curve-it-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    auto curve_dir = control::MakeEphemeralCurveDir(dir_.string());
    ASSERT_TRUE(curve_dir.ok()) << curve_dir.status();
    curve_dir_ = *curve_dir;
    auto server_config = control::LoadCurveServerConfig(curve_dir_);
    ASSERT_TRUE(server_config.ok()) << server_config.status();
    server_ = std::make_unique<RouterServer>(&ctx_, &service_,
                                             GetLogger("CTRL"), *server_config);
    auto bound = server_->Bind("tcp://127.0.0.1:0");
    ASSERT_TRUE(bound.ok()) << bound.status();
    endpoint_ = *bound;
    thread_ = std::thread([this] { server_->Run(stop_, 20); });
  }
  void TearDown() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    server_.reset();
    fs::remove_all(dir_);
  }

  control::CurveClientConfig AuthorizedClient() {
    auto c = control::LoadCurveClientConfig(curve_dir_);
    EXPECT_TRUE(c.ok()) << c.status();
    return *c;
  }

  // Waits up to 5 s for the counter to reach `n` (the ZAP thread and the
  // monitor report asynchronously).
  bool WaitUnauthenticated(uint64_t n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      if (server_->rejects().unauthenticated >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  void ExpectStillServes() {
    zmq::context_t ctx;
    control::DealerClient ok(&ctx, endpoint_, AuthorizedClient());
    control::Request list;
    list.mutable_list_workers();
    auto reply = ok.Call(list, 5000);
    EXPECT_TRUE(reply.ok()) << reply.status();
  }

  fs::path dir_;
  std::string curve_dir_;
  zmq::context_t ctx_;
  SystemClock clock_;
  Service service_{&clock_, {}};
  std::string endpoint_;
  std::unique_ptr<RouterServer> server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(CurveSecurityTest, AuthorizedClientIsServed) {
  ASSERT_TRUE(server_->secure());
  zmq::context_t ctx;
  control::DealerClient client(&ctx, endpoint_, AuthorizedClient());
  auto reply = client.Call(Register("n0"), 5000);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->register_worker().worker_id(), "w-n0");
  EXPECT_EQ(server_->rejects().unauthenticated, 0u);
}

TEST_F(CurveSecurityTest, UnknownClientKeyIsRejectedAndCounted) {
  auto stranger = AuthorizedClient();
  auto keys = control::GenerateCurveKeyPair();
  ASSERT_TRUE(keys.ok());
  stranger.client = *keys;
  zmq::context_t ctx;
  control::DealerClient client(&ctx, endpoint_, stranger);
  auto start = std::chrono::steady_clock::now();
  auto reply = client.Call(Register("intruder"), kRejectTimeoutMs);
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(WaitUnauthenticated(1));
  ExpectStillServes();
  EXPECT_EQ(server_->handled(), 1u);  // only the authorized list call
}

TEST_F(CurveSecurityTest, PlaintextClientIsRejectedAndCounted) {
  zmq::context_t ctx;
  control::DealerClient client(&ctx,
                               endpoint_);  // no CURVE: ZMTP NULL mechanism
  auto reply = client.Call(Register("plain"), kRejectTimeoutMs);
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(WaitUnauthenticated(1));
  ExpectStillServes();
  EXPECT_EQ(server_->handled(), 1u);
}

TEST_F(CurveSecurityTest, WrongServerKeyIsRejected) {
  auto confused = AuthorizedClient();
  auto other = control::GenerateCurveKeyPair();
  ASSERT_TRUE(other.ok());
  confused.server_public_key = other->public_key;
  zmq::context_t ctx;
  control::DealerClient client(&ctx, endpoint_, confused);
  auto reply = client.Call(Register("confused"), kRejectTimeoutMs);
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(WaitUnauthenticated(1));
  ExpectStillServes();
}

TEST_F(CurveSecurityTest, KeyAuthorizedWhileRunningGetsIn) {
  auto keys = control::GenerateCurveKeyPair();
  ASSERT_TRUE(keys.ok());
  const std::string allow = curve_dir_ + "/authorized_keys/late.key";
  ASSERT_TRUE(
      control::WritePublicKeyFile(allow, keys->public_key, "late").ok());
  auto late = AuthorizedClient();
  late.client = *keys;
  zmq::context_t ctx;
  control::DealerClient client(&ctx, endpoint_, late);
  auto reply = client.Call(Register("late"), 5000);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(server_->rejects().unauthenticated, 0u);
}

TEST_F(CurveSecurityTest, SecondCurveServerInOneContextFailsClearly) {
  auto config = control::LoadCurveServerConfig(curve_dir_);
  ASSERT_TRUE(config.ok());
  RouterServer second(&ctx_, &service_, GetLogger("CTRL"), *config);
  auto bound = second.Bind("tcp://127.0.0.1:0");
  EXPECT_EQ(bound.status().code(), absl::StatusCode::kAlreadyExists);
  ExpectStillServes();
}

}  // namespace
}  // namespace strata::coordinator
