// The shared-memory transport's waiting: a rank that waits for a peer
// sleeps on its futex doorbell instead of spinning or polling, wakes as soon
// as the peer moves data, and an abort wakes it at once.
#include "comm/shm/shm_transport.h"

#include <time.h>

#include <thread>

#include "comm/process_group.h"
#include "gtest/gtest.h"

namespace strata::comm {
namespace {

std::vector<std::unique_ptr<Transport>> Group(int n, ShmOptions o = {}) {
  auto store = NewInMemoryStore();
  std::vector<std::unique_ptr<Transport>> out(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto t = ConnectShmTransport(store, r, n, o);
      ASSERT_TRUE(t.ok()) << t.status();
      out[r] = std::move(*t);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::vector<std::unique_ptr<Transport>> Pair() { return Group(2); }

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

Deadline In(std::chrono::milliseconds ms) { return SteadyClock::now() + ms; }

TEST(ShmTransportTest, AWaitingRankSleepsAndWakesWhenDataArrives) {
  auto t = Pair();
  std::vector<char> got(1024, 0);
  double cpu = 0, waited = 0;
  std::thread receiver([&] {
    const double cpu0 = ThreadCpuSeconds();
    const auto t0 = SteadyClock::now();
    Status st = t[0]->SendRecv(-1, nullptr, 0, 1, got.data(), got.size(),
                               In(std::chrono::seconds(10)));
    waited = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    cpu = ThreadCpuSeconds() - cpu0;
    EXPECT_TRUE(st.ok()) << st;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  std::vector<char> sent(1024, 'x');
  ASSERT_TRUE(t[1]->SendRecv(0, sent.data(), sent.size(), -1, nullptr, 0,
                             In(std::chrono::seconds(10)))
                  .ok());
  receiver.join();
  EXPECT_EQ(got, sent);
  EXPECT_GE(waited, 0.35);
  // Spinning or polling for 400 ms costs most of that in CPU (the old
  // yield-then-sleep loop: 40-400 ms); sleeping on the doorbell costs a
  // brief spin and one wake-up check every 5 ms.
  EXPECT_LT(cpu, 0.025) << "waiting rank used " << cpu * 1000 << " ms of CPU";
}

TEST(ShmTransportTest, AbortWakesASleepingRankAtOnce) {
  auto t = Pair();
  std::vector<char> got(1024);
  Status st;
  double waited = 0;
  std::thread receiver([&] {
    const auto t0 = SteadyClock::now();
    st = t[0]->SendRecv(-1, nullptr, 0, 1, got.data(), got.size(),
                        In(std::chrono::seconds(10)));
    waited = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  t[1]->Abort();
  receiver.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted) << st;
  EXPECT_LT(waited, 0.5);
}

TEST(ShmTransportTest, StreamsLargerThanTheRingBothWays) {
  // Both ranks send and receive 8 MiB at once through 512 KiB rings: each
  // must sleep on room and on data alternately without a lost wake-up.
  auto t = Pair();
  const size_t n = 8 << 20;
  std::vector<std::vector<char>> out(2), in(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    out[r].assign(n, static_cast<char>('a' + r));
    out[r][n - 1] = static_cast<char>('A' + r);
    in[r].assign(n, 0);
    threads.emplace_back([&, r] {
      for (int i = 0; i < 20; ++i) {
        Status st = t[r]->SendRecv(1 - r, out[r].data(), n, 1 - r, in[r].data(),
                                   n, In(std::chrono::seconds(30)));
        ASSERT_TRUE(st.ok()) << st;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(in[0], out[1]);
  EXPECT_EQ(in[1], out[0]);
}

TEST(ShmTransportTest, SharedAllReduceGivesEveryRankTheSameSum) {
  // 64 KiB slots: sizes that are one one-shot chunk (up to 16 KiB), one
  // two-barrier chunk, and several chunks whose last is one-shot or not,
  // one after another so the slots' two buffers alternate across calls.
  ShmOptions o;
  o.slot_bytes = 64 << 10;
  constexpr int kRanks = 4;
  auto t = Group(kRanks, o);
  for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{5000},
                       size_t{16400}, size_t{40000}, size_t{3}}) {
    std::vector<std::vector<float>> buf(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      buf[r].resize(count);
      for (size_t i = 0; i < count; ++i) buf[r][i] = r * 1000.f + i % 977;
      threads.emplace_back([&, r] {
        Status st =
            t[r]->SharedAllReduce(buf[r].data(), count, DataType::kF32,
                                  ReduceOp::kSum, In(std::chrono::seconds(30)));
        EXPECT_TRUE(st.ok()) << st;
      });
    }
    for (auto& th : threads) th.join();
    for (int r = 0; r < kRanks; ++r) {
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(buf[r][i], 6000.f + 4.f * (i % 977))
            << "rank " << r << " count " << count << " element " << i;
      }
    }
  }
}

TEST(ShmTransportTest, SharedAllReduceNamesTheRanksThatNeverCame) {
  auto t = Group(3);
  std::vector<double> buf(100, 1.0);
  const auto t0 = SteadyClock::now();
  Status st =
      t[0]->SharedAllReduce(buf.data(), buf.size(), DataType::kF64,
                            ReduceOp::kMax, In(std::chrono::milliseconds(200)));
  EXPECT_LT(SteadyClock::now() - t0, std::chrono::seconds(2));
  ASSERT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_NE(st.message().find("waiting for rank(s) 1, 2"), std::string::npos)
      << st;
}

TEST(ShmTransportTest, OnlyAViewOfEveryRankSharesTheSlots) {
  auto t = Group(3);
  std::vector<std::unique_ptr<SubTransport>> whole, part;
  for (int r = 0; r < 3; ++r) {
    whole.push_back(
        std::make_unique<SubTransport>(t[r].get(), std::vector<int>{0, 1, 2}));
  }
  part.push_back(
      std::make_unique<SubTransport>(t[0].get(), std::vector<int>{0, 2}));
  part.push_back(
      std::make_unique<SubTransport>(t[0].get(), std::vector<int>{1, 0, 2}));
  EXPECT_TRUE(whole[0]->shares_memory());
  for (auto& p : part) {
    EXPECT_FALSE(p->shares_memory());
    float x = 1;
    Status st = p->SharedAllReduce(&x, 1, DataType::kF32, ReduceOp::kSum,
                                   In(std::chrono::seconds(1)));
    EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
  }
  std::vector<float> buf(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      buf[r] = static_cast<float>(r + 1);
      EXPECT_TRUE(whole[r]
                      ->SharedAllReduce(&buf[r], 1, DataType::kF32,
                                        ReduceOp::kSum,
                                        In(std::chrono::seconds(30)))
                      .ok());
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(buf, (std::vector<float>{6, 6, 6}));
}

TEST(ShmTransportTest, TheTunerPicksSharedSlotsWhereTheyWereFaster) {
  auto four = Group(4);
  ProcessGroup g4(std::move(four[0]), GroupOptions{});
  for (size_t bytes : {size_t{1} << 10, size_t{1} << 20, size_t{256} << 20}) {
    EXPECT_EQ(g4.ChooseAllReduce(bytes), Algorithm::kShared) << bytes;
  }
  auto two = Group(2);
  ProcessGroup g2(std::move(two[0]), GroupOptions{});
  EXPECT_EQ(g2.ChooseAllReduce(1 << 10), Algorithm::kShared);
  EXPECT_EQ(g2.ChooseAllReduce(1 << 20), Algorithm::kRing);
  EXPECT_EQ(g2.ChooseAllReduce(64 << 20), Algorithm::kShared);
}

TEST(ShmTransportTest, ASegmentLargerThanDevShmIsRefusedUpFront) {
  // 1,024 ranks x 1,024 rings of 64 MiB: 64 TiB, more than any /dev/shm.
  ShmOptions o;
  o.ring_bytes = 64 << 20;
  o.connect_timeout = std::chrono::seconds(30);
  const auto t0 = SteadyClock::now();
  auto t = ConnectShmTransport(NewInMemoryStore(), 3, 1024, o);
  EXPECT_LT(SteadyClock::now() - t0, std::chrono::seconds(1));  // no wait
  ASSERT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted)
      << t.status();
  EXPECT_NE(t.status().message().find("/dev/shm has"), std::string::npos)
      << t.status();
}

}  // namespace
}  // namespace strata::comm
