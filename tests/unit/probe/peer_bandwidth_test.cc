// The probe's peer bandwidth measurement over loopback: a sink thread and a
// sender; an absent peer is a clear Unavailable.
#include "topology/probe/peer_bandwidth.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace strata::probe {
namespace {

std::atomic<int> g_port{0};

TEST(PeerBandwidthTest, MeasuresLoopback) {
  std::thread sink([] {
    ASSERT_TRUE(ServePeerSink(0, 1, [](int port) { g_port = port; }).ok());
  });
  for (int i = 0; i < 500 && g_port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto gbps = MeasurePeerGbps("127.0.0.1", g_port, 32 << 20);
  sink.join();
  ASSERT_TRUE(gbps.ok()) << gbps.status();
  EXPECT_GT(*gbps, 0.1);  // loopback moves at least 100 Mb/s
}

TEST(PeerBandwidthTest, AbsentPeerIsUnavailable) {
  auto gbps = MeasurePeerGbps("127.0.0.1", 1, 1 << 20);
  EXPECT_EQ(gbps.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(gbps.status().message().find("127.0.0.1:1"), std::string::npos);
}

}  // namespace
}  // namespace strata::probe
