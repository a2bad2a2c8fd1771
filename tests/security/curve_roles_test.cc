// Finding 1 of issue 30 end to end over real CURVE sockets: the role in the
// coordinator's authorized_keys (and a rank's per-attempt key) reaches the
// access policy through ZAP and libzmq's User-Id, so a key is only worth
// its role.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "control/dealer_client.h"
#include "coordinator/server/router_server.h"
#include "tests/security/security_fixture.h"

namespace strata::coordinator {
namespace {

class CurveRolesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = *control::GenerateCurveKeyPair();
    alice_ = *control::GenerateCurveKeyPair();
    dn1_ = *control::GenerateCurveKeyPair();
    config_.server = server_;
    config_.authorized = {{alice_.public_key, "alice", "user", ""},
                          {dn1_.public_key, "dn1", "worker", "dn1"}};
    ranks_ = std::make_unique<RankKeys>(server_.secret_key);
    f_ = std::make_unique<ControlFixture>(JobOptions{
        .default_worker_wait_ms = 10000,
        .default_grace_ms = 100,
        .limits = {},
        .rank_keys = ranks_.get()});
    endpoint_ = "ipc:///tmp/strata-sec-curve-" + std::to_string(getpid());
    router_ = std::make_unique<RouterServer>(&ctx_, f_->service.get(),
                                             GetLogger("CTRL"), config_,
                                             ranks_.get());
    ASSERT_TRUE(router_->Bind(endpoint_).ok());
    // The server's loop, with Tick() (placement) on request: the fake
    // clock never advances by itself.
    thread_ = std::thread([this] {
      while (!stop_) {
        router_->PollOnce(10);
        if (tick_.exchange(false)) f_->service->Tick();
      }
    });
  }
  void TearDown() override {
    stop_ = true;
    thread_.join();
    router_.reset();
  }
  StatusOr<control::Reply> Call(const control::CurveKeyPair& keys,
                                control::Request r) {
    control::DealerClient client(
        &ctx_, endpoint_, control::CurveClientConfig{server_.public_key, keys});
    return client.Call(std::move(r), 2000);
  }

  std::unique_ptr<ControlFixture> f_;
  zmq::context_t ctx_;
  control::CurveKeyPair server_, alice_, dn1_;
  control::CurveServerConfig config_;
  std::unique_ptr<RankKeys> ranks_;
  std::string endpoint_;
  std::unique_ptr<RouterServer> router_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> tick_{false};
  std::thread thread_;
};

TEST_F(CurveRolesTest, KeysAreWorthTheirRole) {
  control::Request submit;
  JobSpec* spec = submit.mutable_submit_job()->mutable_spec();
  spec->mutable_launch()->add_command("/bin/true");
  spec->mutable_launch()->set_nodes(1);
  spec->mutable_launch()->set_ranks_per_node(1);
  auto submitted = Call(alice_, submit);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_EQ(submitted->status().code(), 0) << submitted->status().message();
  const std::string job = submitted->submit_job().job_id();

  control::Request list;
  list.mutable_list_jobs();
  auto listed = Call(alice_, list);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->jobs().jobs_size(), 1);
  EXPECT_EQ(listed->jobs().jobs(0).owner(), "alice");

  // The worker key lists nothing and registers only as dn1 (DealerClient
  // turns an error reply into its Status).
  auto denied = Call(dn1_, list);
  EXPECT_TRUE(absl::IsPermissionDenied(denied.status())) << denied.status();
  EXPECT_NE(denied.status().message().find("the worker of node dn1"),
            std::string::npos);
  control::Request reg;
  reg.mutable_register_worker()->set_node_name("dn2");
  auto wrong = Call(dn1_, reg);
  EXPECT_TRUE(absl::IsPermissionDenied(wrong.status())) << wrong.status();
  reg.mutable_register_worker()->set_node_name("dn1");
  reg.mutable_register_worker()->mutable_probe()->set_cpu_cores(8);
  reg.mutable_register_worker()->mutable_probe()->set_memory_bytes(64LL << 30);
  auto right = Call(dn1_, reg);
  ASSERT_TRUE(right.ok());
  EXPECT_EQ(right->status().code(), 0) << right->status().message();

  // The rank key the coordinator issued for the job's placed rank: its
  // attempt's KV, nothing else.
  control::Request hb;
  hb.mutable_heartbeat()->set_worker_id("w-dn1");
  // The server's loop places the job at its next tick.
  tick_ = true;
  StatusOr<control::Reply> orders;
  for (int i = 0; i < 100; ++i) {
    orders = Call(dn1_, hb);
    ASSERT_TRUE(orders.ok()) << orders.status();
    if (orders->heartbeat().launch_size() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(orders->heartbeat().launch_size(), 1) << orders->status().message();
  const control::RankLaunch& launch = orders->heartbeat().launch(0);
  EXPECT_EQ(launch.curve_public_key(),
            ranks_->Issue(job, launch.attempt(), 0).public_key);
  const control::CurveKeyPair rank{launch.curve_public_key(),
                                   launch.curve_secret_key()};
  control::Request kv;
  kv.mutable_kv_set()->set_key(job + "/0/rendezvous/a");
  kv.mutable_kv_set()->set_value("1");
  auto set = Call(rank, kv);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->status().code(), 0) << set->status().message();
  auto rank_list = Call(rank, list);
  EXPECT_TRUE(absl::IsPermissionDenied(rank_list.status()))
      << rank_list.status();

  // A key nobody issued does not even connect.
  auto stranger = Call(*control::GenerateCurveKeyPair(), list);
  EXPECT_FALSE(stranger.ok());
}

}  // namespace
}  // namespace strata::coordinator
