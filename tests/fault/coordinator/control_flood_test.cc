// A flood on the control socket cannot grow the coordinator without bound
// (control/codec.h kControlHwm): clients that send requests with 1 MiB
// replies and read none, clients that send garbage as fast as they can,
// and clients that send oversized frames, all at once for a few seconds;
// meanwhile an ordinary client is still answered, and the coordinator's
// resident memory grows by far less than the queued replies would take
// (libzmq's default high-water mark of 1000 frames per connection let each
// non-reading client park 1000 MiB of replies in the coordinator). Real
// strata-coordinator process.
#include <gtest/gtest.h>

#include <random>

#include "control/codec.h"
#include "tests/fault/coordinator/fault_coordinator.h"

namespace strata::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kValueBytes = 1 << 20;  // the KV's largest value
constexpr int kReaders = 4;        // clients asking for it, reading nothing
constexpr int kRequestsEach = 300;   // 300 MiB of replies each
constexpr int64_t kMaxGrowthKiB = 160 << 10;

std::string Encode(control::Request req, uint64_t id) {
  req.set_protocol_version(control::PROTOCOL_VERSION_CURRENT);
  req.set_request_id(id);
  return req.SerializeAsString();
}

TEST(ControlFloodTest, FloodsLeaveTheCoordinatorServingInBoundedMemory) {
  FaultCoordinator c;
  c.LimitMemory(int64_t{3} << 30);  // a regression dies alone
  c.Start();
  ASSERT_TRUE(c.WaitUp()) << c.Log();
  control::Request set;
  set.mutable_kv_set()->set_key("big");
  set.mutable_kv_set()->set_value(std::string(kValueBytes, 'v'));
  ASSERT_TRUE(c.Call(set).ok()) << c.Log();
  const int64_t rss_before = c.RssKiB();

  zmq::context_t ctx;
  std::vector<zmq::socket_t> flooders;
  auto dealer = [&] {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::sndhwm, 100000);  // the flooder queues freely
    s.set(zmq::sockopt::rcvhwm, 1);       // ... and reads (almost) nothing
    s.set(zmq::sockopt::rcvbuf, 4096);
    s.connect(c.endpoint());
    return s;
  };
  control::Request get;
  get.mutable_kv_get()->set_key("big");
  const std::string get_bytes = Encode(get, 7);
  for (int i = 0; i < kReaders; ++i) {
    flooders.push_back(dealer());
    for (int k = 0; k < kRequestsEach; ++k) {
      flooders.back().send(zmq::buffer(get_bytes), zmq::send_flags::dontwait);
    }
  }
  std::mt19937 rng(34);
  std::string garbage(512, '\0');
  for (char& ch : garbage) ch = static_cast<char>(rng());
  const std::string oversized(control::kMaxFrameBytes + 1, 'x');
  zmq::socket_t junk = dealer(), big = dealer();
  const auto end = std::chrono::steady_clock::now() + seconds(3);
  int answered = 0, calls = 0;
  int64_t peak = 0;
  while (std::chrono::steady_clock::now() < end) {
    for (int k = 0; k < 200; ++k) {
      junk.send(zmq::buffer(garbage), zmq::send_flags::dontwait);
    }
    big.send(zmq::buffer(oversized), zmq::send_flags::dontwait);
    control::Request list;
    list.mutable_list_workers();
    ++calls;
    answered += c.Call(list, 10).ok() ? 1 : 0;  // 200 ms a try
    peak = std::max(peak, c.RssKiB());
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_TRUE(c.Alive()) << c.Log();
  std::printf("coordinator RSS %lld KiB before the flood, peak %lld KiB; "
              "%d of %d calls answered during it\n",
              static_cast<long long>(rss_before),
              static_cast<long long>(peak), answered, calls);
  EXPECT_EQ(answered, calls);
  EXPECT_LT(peak - rss_before, kMaxGrowthKiB)
      << "the flooders' queued replies stayed in the coordinator";
  flooders.clear();
  control::Request list;
  list.mutable_list_jobs();
  EXPECT_TRUE(c.Call(list).ok()) << c.Log();
}

}  // namespace
}  // namespace strata::testing
