#include "comm/tcp/tcp_transport.h"

#include <unistd.h>

#include <thread>

#include "comm/process_group.h"
#include "comm/tcp/socket.h"
#include "gtest/gtest.h"

namespace strata::comm {
namespace {

// Connects `n` TCP transports over loopback, ranks as threads.
std::vector<std::unique_ptr<Transport>> Mesh(int n, int streams) {
  auto store = NewInMemoryStore();
  std::vector<std::unique_ptr<Transport>> out(n);
  std::vector<std::thread> threads;
  TcpOptions opts;
  opts.streams = streams;
  opts.stripe_threshold = 64 * 1024;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto t = ConnectTcpTransport(store, r, n, opts);
      ASSERT_TRUE(t.ok()) << t.status();
      out[r] = std::move(*t);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// The kernel's counters of each connection (TCP_INFO): what a rank sent to
// a peer shows as bytes the peer acknowledged, on the streams it went over,
// with the time the connections were busy sending.
TEST(TcpTransportTest, LinkCountersCountWhatWasSent) {
  auto mesh = Mesh(2, 2);
  std::vector<char> out(8 << 20, 'x'), in(8 << 20);
  const Deadline d = SteadyClock::now() + std::chrono::seconds(30);
  std::thread rx([&] { ASSERT_TRUE(mesh[1]->Recv(0, in.data(), in.size(), d).ok()); });
  ASSERT_TRUE(mesh[0]->Send(1, out.data(), out.size(), d).ok());
  rx.join();
  int64_t acked = 0, busy = 0;
  const std::vector<LinkCounter> c = mesh[0]->LinkCounters();
  ASSERT_EQ(c.size(), 2u);  // one per stream to the one peer
  for (const LinkCounter& l : c) {
    EXPECT_EQ(l.peer, 1);
    acked += l.bytes_acked;
    busy = std::max(busy, l.busy_us);
  }
  // The last bytes may still be unacknowledged when Send returns.
  EXPECT_GE(acked, static_cast<int64_t>(out.size()) / 2);
  EXPECT_LE(acked, static_cast<int64_t>(out.size()) + 64);  // + the hellos
  EXPECT_GE(busy, 0);
  for (const LinkCounter& l : mesh[1]->LinkCounters()) {
    EXPECT_EQ(l.peer, 0);
    EXPECT_LE(l.bytes_acked, 64);  // rank 1 sent only its hellos
  }
}

TEST(TcpTransportTest, AllReduceOverLoopbackWithStripedStreams) {
  for (int n : {2, 3, 4}) {
    auto mesh = Mesh(n, 3);
    std::vector<std::unique_ptr<ProcessGroup>> groups;
    for (auto& t : mesh)
      groups.push_back(
          std::make_unique<ProcessGroup>(std::move(t), GroupOptions{}));
    const size_t count = (1 << 20) + 5;  // 4 MiB: striped over 3 streams
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        std::vector<int32_t> buf(count);
        for (size_t i = 0; i < count; ++i)
          buf[i] = static_cast<int32_t>(r * 1000 + i % 1000);
        for (Algorithm a : {Algorithm::kRing, Algorithm::kRecursiveDoubling}) {
          std::vector<int32_t> b = buf;
          OpOptions o;
          o.algorithm = a;
          ASSERT_TRUE(groups[r]
                          ->AllReduce(b.data(), count, DataType::kI32,
                                      ReduceOp::kSum, o)
                          ->Wait()
                          .ok());
          for (size_t i = 0; i < count; i += 4099) {
            ASSERT_EQ(b[i], static_cast<int32_t>(1000 * n * (n - 1) / 2 +
                                                 n * (i % 1000)));
          }
        }
      });
    }
    for (auto& t : threads) t.join();
  }
}

TEST(TcpTransportTest, ClosedPeerIsUnavailableNamingIt) {
  auto mesh = Mesh(2, 1);
  mesh[1].reset();  // rank 1 goes away: its sockets close
  std::vector<char> buf(1 << 20);
  Status st = mesh[0]->Recv(1, buf.data(), buf.size(),
                            SteadyClock::now() + std::chrono::seconds(5));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st;
}

TEST(TcpTransportTest, SilentPeerTimesOutNamingIt) {
  auto mesh = Mesh(2, 1);
  char c;
  Status st =
      mesh[0]->Recv(1, &c, 1, SteadyClock::now() + std::chrono::milliseconds(50));
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st;
}

TEST(TcpTransportTest, MissingRankFailsConnectWithItsName) {
  auto store = NewInMemoryStore();
  TcpOptions opts;
  opts.connect_timeout = std::chrono::milliseconds(100);
  auto t = ConnectTcpTransport(store, 0, 2, opts);  // rank 1 never comes
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(t.status().message().find("1"), std::string::npos) << t.status();
}

TEST(TcpTransportTest, SilentConnectionsDoNotHoldUpThePeers) {
  // Ten connections that never send a hello reach rank 0 before rank 1:
  // each used to hold the accept loop for 5 s.
  auto store = NewInMemoryStore();
  TcpOptions opts;
  opts.connect_timeout = std::chrono::seconds(60);
  StatusOr<std::unique_ptr<Transport>> t0, t1;
  std::thread rank0([&] { t0 = ConnectTcpTransport(store, 0, 2, opts); });
  auto addr = store->Get("tcp/addr/0", std::chrono::seconds(10));
  ASSERT_TRUE(addr.ok()) << addr.status();
  const size_t colon = addr->rfind(':');
  const int port = std::stoi(addr->substr(colon + 1));
  std::vector<int> silent;
  for (int i = 0; i < 10; ++i) {
    auto fd = tcp::Connect(addr->substr(0, colon), port, 1000);
    ASSERT_TRUE(fd.ok()) << fd.status();
    silent.push_back(*fd);
  }
  const auto start = SteadyClock::now();
  t1 = ConnectTcpTransport(store, 1, 2, opts);
  rank0.join();
  EXPECT_LT(SteadyClock::now() - start, std::chrono::seconds(3));
  ASSERT_TRUE(t0.ok()) << t0.status();
  ASSERT_TRUE(t1.ok()) << t1.status();
  for (int fd : silent) close(fd);
}

}  // namespace
}  // namespace strata::comm
