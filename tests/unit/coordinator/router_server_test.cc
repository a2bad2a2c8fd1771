// Real ZeroMQ over ipc: valid calls succeed; garbage, truncated, multi-frame
// and wrong-version messages are rejected and counted without killing the
// server.
#include "coordinator/server/router_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "control/dealer_client.h"

namespace strata::coordinator {
namespace {

class RouterServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = "ipc:///tmp/strata-router-test-" + std::to_string(getpid());
    server_ =
        std::make_unique<RouterServer>(&ctx_, &service_, GetLogger("CTRL"));
    ASSERT_TRUE(server_->Bind(endpoint_).ok());
    thread_ = std::thread([this] { server_->Run(stop_, 20); });
  }
  void TearDown() override {
    stop_ = true;
    thread_.join();
    server_.reset();
  }

  zmq::context_t ctx_;
  SystemClock clock_;
  Service service_{&clock_, {}};
  std::string endpoint_;
  std::unique_ptr<RouterServer> server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(RouterServerTest, CallsAndRejectsBadFrames) {
  control::DealerClient client(&ctx_, endpoint_);
  control::Request reg;
  reg.mutable_register_worker()->set_node_name("n0");
  auto reply = client.Call(reg, 5000);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->register_worker().worker_id(), "w-n0");

  // Raw DEALER sending garbage, a two-frame message and a wrong version.
  zmq::socket_t raw(ctx_, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  raw.connect(endpoint_);
  raw.send(zmq::str_buffer("\xff\xff\xff\xff\xff"), zmq::send_flags::none);
  zmq::message_t msg;
  ASSERT_TRUE(raw.recv(msg));  // error reply, request id 0
  auto err =
      control::DecodeReply(std::string_view(msg.data<char>(), msg.size()));
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->status().code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));

  raw.send(zmq::str_buffer("a"), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("b"), zmq::send_flags::none);

  control::Request old = reg;
  old.set_protocol_version(0);
  old.set_request_id(42);
  std::string bytes = old.SerializeAsString();
  raw.send(zmq::buffer(bytes), zmq::send_flags::none);
  ASSERT_TRUE(raw.recv(msg));
  err = control::DecodeReply(std::string_view(msg.data<char>(), msg.size()));
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->request_id(), 42u);
  EXPECT_NE(err->status().message().find("protocol version 0"),
            std::string::npos);

  // Server still serves.
  control::Request list;
  list.mutable_list_workers();
  reply = client.Call(list, 5000);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->list_workers().workers_size(), 1);
  stop_ = true;
  thread_.join();
  thread_ = std::thread([] {});
  EXPECT_EQ(server_->rejects().malformed, 2u);  // garbage + 2-frame message
  EXPECT_EQ(server_->rejects().wrong_version, 1u);
  EXPECT_EQ(server_->handled(), 2u);
}

TEST_F(RouterServerTest, CallTimesOutWithoutServer) {
  zmq::context_t ctx;
  control::DealerClient client(&ctx, "ipc:///tmp/strata-router-nobody");
  control::Request list;
  list.mutable_list_workers();
  auto reply = client.Call(list, 100);
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace strata::coordinator
