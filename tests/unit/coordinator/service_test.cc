// Handler tests: Service::Handle called directly with a fake clock.
#include "coordinator/server/service.h"

#include <gtest/gtest.h>

#include "tests/unit/coordinator/control_fixture.h"

namespace strata::coordinator {
namespace {

control::Request Register(const std::string& node) {
  control::Request r;
  r.set_request_id(1);
  r.mutable_register_worker()->set_node_name(node);
  r.mutable_register_worker()->mutable_probe()->set_cpu_cores(4);
  return r;
}

control::Request Heartbeat(const std::string& id) {
  control::Request r;
  r.set_request_id(2);
  r.mutable_heartbeat()->set_worker_id(id);
  return r;
}

TEST(ServiceTest, RegisterHeartbeatAndLoss) {
  FakeClock clock;
  Service service(&clock,
                  {.heartbeat_interval_ms = 1000, .lost_after_ms = 3000});
  control::Reply reply = service.Handle(Register("node-a"));
  ASSERT_EQ(reply.status().code(), 0) << reply.status().message();
  EXPECT_EQ(reply.register_worker().worker_id(), "w-node-a");
  EXPECT_EQ(reply.register_worker().heartbeat_interval_ms(), 1000);
  service.Handle(Register("node-b"));

  clock.Advance(2500);
  service.Handle(Heartbeat("w-node-a"));
  clock.Advance(1000);  // node-b silent for 3500 ms > 3000
  EXPECT_EQ(service.registry().CheckLiveness(),
            std::vector<std::string>{"w-node-b"});
  EXPECT_EQ(service.registry().AliveCount(), 1);

  control::Request list;
  list.mutable_list_workers();
  reply = service.Handle(list);
  ASSERT_EQ(reply.list_workers().workers_size(), 2);
  EXPECT_TRUE(reply.list_workers().workers(0).alive());
  EXPECT_FALSE(reply.list_workers().workers(1).alive());
  EXPECT_EQ(reply.list_workers().workers(0).probe().cpu_cores(), 4);

  // A lost worker that heartbeats again is revived.
  service.Handle(Heartbeat("w-node-b"));
  EXPECT_EQ(service.registry().AliveCount(), 2);
}

TEST(ServiceTest, UnknownWorkerIsAskedToReregister) {
  FakeClock clock;
  Service service(&clock, {});
  control::Reply reply = service.Handle(Heartbeat("w-ghost"));
  EXPECT_EQ(reply.status().code(), 0);
  EXPECT_TRUE(reply.heartbeat().reregister());
}

TEST(ServiceTest, RegisterWithoutNameFails) {
  FakeClock clock;
  Service service(&clock, {});
  control::Reply reply = service.Handle(Register(""));
  EXPECT_EQ(reply.status().code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply.status().message().find("node_name"), std::string::npos);
}

TEST(ServiceTest, KvSetGetAdd) {
  ControlFixture f;
  Service& service = *f.service;
  control::Request r;
  r.mutable_kv_get()->set_key("k");
  EXPECT_EQ(service.Handle(r).status().code(),
            static_cast<int>(absl::StatusCode::kNotFound));
  r.mutable_kv_set()->set_key("k");
  r.mutable_kv_set()->set_value("v");
  EXPECT_EQ(service.Handle(r).status().code(), 0);
  r.mutable_kv_get()->set_key("k");
  EXPECT_EQ(service.Handle(r).kv().value(), "v");
  r.mutable_kv_add()->set_key("n");
  r.mutable_kv_add()->set_delta(3);
  EXPECT_EQ(service.Handle(r).kv().counter(), 3);
  r.mutable_kv_add()->set_delta(-1);
  EXPECT_EQ(service.Handle(r).kv().counter(), 2);
  r.mutable_kv_add()->set_key("k");  // "v" is not an integer
  EXPECT_EQ(service.Handle(r).status().code(),
            static_cast<int>(absl::StatusCode::kFailedPrecondition));
  r.mutable_kv_wait()->add_keys("k");
  r.mutable_kv_wait()->add_keys("absent");
  control::Reply w = service.Handle(r);
  ASSERT_EQ(w.kv().missing_size(), 1);
  EXPECT_EQ(w.kv().missing(0), "absent");
  r.mutable_kv_set()->set_key(std::string(5000, 'x'));  // key too long
  EXPECT_EQ(service.Handle(r).status().code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  // Keys survive a coordinator restart (ranks that already rendezvoused).
  f.Restart();
  r.mutable_kv_get()->set_key("n");
  EXPECT_EQ(f.service->Handle(r).kv().value(), "2");
}

}  // namespace
}  // namespace strata::coordinator

namespace strata::coordinator {
namespace {

TEST(ServiceJobsTest, JobRequestsWithoutManagerAreUnimplemented) {
  FakeClock clock;
  Service service(&clock, {});
  control::Request r;
  r.mutable_job_status()->set_job_id("job-1");
  EXPECT_EQ(service.Handle(r).status().code(),
            static_cast<int>(absl::StatusCode::kUnimplemented));
}

}  // namespace
}  // namespace strata::coordinator
