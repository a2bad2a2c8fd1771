// Every operation x dtype x size x world size against a serial reference,
// ranks as threads (STYLE.md test tier 2).
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "comm/algorithms/algorithms.h"
#include "gtest/gtest.h"
#include "tests/unit/comm/comm_test_util.h"

namespace strata::comm {
namespace {

using testing::RunRanks;
using testing::Value;

void Store(DataType t, double v, void* dst) {
  switch (t) {
    case DataType::kF32:
      *static_cast<float*>(dst) = static_cast<float>(v);
      break;
    case DataType::kF64:
      *static_cast<double*>(dst) = v;
      break;
    case DataType::kI32:
      *static_cast<int32_t*>(dst) = static_cast<int32_t>(v);
      break;
    case DataType::kI64:
      *static_cast<int64_t*>(dst) = static_cast<int64_t>(v);
      break;
    case DataType::kF16:
      *static_cast<uint16_t*>(dst) = FloatToHalf(static_cast<float>(v));
      break;
    case DataType::kBF16:
      *static_cast<uint16_t*>(dst) = FloatToBf16(static_cast<float>(v));
      break;
  }
}

std::vector<char> Fill(DataType t, int rank, size_t count) {
  const size_t es = ElementSize(t);
  std::vector<char> buf(count * es);
  for (size_t i = 0; i < count; ++i)
    Store(t, Value(rank, i), buf.data() + i * es);
  return buf;
}

std::vector<char> Reference(DataType t, ReduceOp op, int n, size_t count) {
  std::vector<char> acc = Fill(t, 0, count);
  for (int r = 1; r < n; ++r) {
    std::vector<char> in = Fill(t, r, count);
    ReduceInto(acc.data(), in.data(), count, t, op);
  }
  if (op == ReduceOp::kAvg) Divide(acc.data(), count, t, n);
  return acc;
}

struct Param {
  int world;
  size_t count;
  DataType type;
};

class CollectivesTest : public ::testing::TestWithParam<Param> {};

TEST_P(CollectivesTest, MatchSerialReference) {
  const auto [n, count, type] = GetParam();
  const size_t es = ElementSize(type);
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    const std::vector<char> want = Reference(type, op, n, count);
    for (Algorithm algo : {Algorithm::kRing, Algorithm::kRecursiveDoubling}) {
      if (count > 4099 && algo == Algorithm::kRecursiveDoubling && n > 4)
        continue;
      RunRanks(n, [&](int r, Backend& g) {
        std::vector<char> buf = Fill(type, r, count);
        OpOptions o;
        o.algorithm = algo;
        ASSERT_TRUE(g.AllReduce(buf.data(), count, type, op, o)->Wait().ok());
        EXPECT_EQ(0, std::memcmp(buf.data(), want.data(), buf.size()))
            << "all_reduce " << ReduceOpName(op) << " " << AlgorithmName(algo);
      });
    }
    RunRanks(n, [&](int r, Backend& g) {
      std::vector<char> in = Fill(type, r, count);
      const size_t b0 = algorithms::BlockBegin(count, n, r);
      const size_t b1 = algorithms::BlockBegin(count, n, r + 1);
      std::vector<char> out((b1 - b0) * es + 1);
      ASSERT_TRUE(
          g.ReduceScatter(in.data(), out.data(), count, type, op)->Wait().ok());
      EXPECT_EQ(0,
                std::memcmp(out.data(), want.data() + b0 * es, (b1 - b0) * es))
          << "reduce_scatter " << ReduceOpName(op);
    });
  }
  // All-gather: block r of rank r's data.
  RunRanks(n, [&](int r, Backend& g) {
    const std::vector<char> mine = Fill(type, r, count);
    const size_t b0 = algorithms::BlockBegin(count, n, r);
    std::vector<char> out(count * es);
    ASSERT_TRUE(g.AllGather(mine.data() + b0 * es, out.data(), count, type)
                    ->Wait()
                    .ok());
    for (int src = 0; src < n; ++src) {
      const std::vector<char> theirs = Fill(type, src, count);
      const size_t s0 = algorithms::BlockBegin(count, n, src);
      const size_t s1 = algorithms::BlockBegin(count, n, src + 1);
      EXPECT_EQ(0, std::memcmp(out.data() + s0 * es, theirs.data() + s0 * es,
                               (s1 - s0) * es))
          << "all_gather block " << src;
    }
  });
  // Broadcast from every root.
  for (int root = 0; root < n; ++root) {
    RunRanks(n, [&](int r, Backend& g) {
      std::vector<char> buf = Fill(type, r, count);
      ASSERT_TRUE(g.Broadcast(buf.data(), count, type, root)->Wait().ok());
      EXPECT_EQ(buf, Fill(type, root, count)) << "broadcast root " << root;
    });
  }
  // All-to-all with `count` elements per peer (capped to bound memory).
  const size_t per = std::min<size_t>(count, 4099);
  RunRanks(n, [&](int r, Backend& g) {
    std::vector<char> in(n * per * es), out(n * per * es);
    for (int j = 0; j < n; ++j) {
      std::vector<char> block = Fill(type, r * n + j, per);
      std::memcpy(in.data() + j * per * es, block.data(), per * es);
    }
    ASSERT_TRUE(g.AllToAll(in.data(), out.data(), per, type)->Wait().ok());
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(0, std::memcmp(out.data() + i * per * es,
                               Fill(type, i * n + r, per).data(), per * es))
          << "all_to_all from " << i;
    }
  });
  // Send/recv around the ring, then a barrier.
  RunRanks(n, [&](int r, Backend& g) {
    if (n == 1) return;
    std::vector<char> out = Fill(type, r, count), in(count * es);
    auto s = g.Send(out.data(), count, type, (r + 1) % n);
    auto rv = g.Recv(in.data(), count, type, (r - 1 + n) % n);
    ASSERT_TRUE(s->Wait().ok());
    ASSERT_TRUE(rv->Wait().ok());
    EXPECT_EQ(in, Fill(type, (r - 1 + n) % n, count));
    EXPECT_TRUE(g.Barrier()->Wait().ok());
  });
}

std::vector<Param> AllParams() {
  std::vector<Param> out;
  for (int n : {1, 2, 3, 4, 8}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4096 + 3},
                         size_t{(1 << 20) + 5}}) {
      for (DataType t : {DataType::kF32, DataType::kF64, DataType::kF16,
                         DataType::kBF16, DataType::kI32, DataType::kI64}) {
        out.push_back({n, count, t});
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Sweep, CollectivesTest,
                         ::testing::ValuesIn(AllParams()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return absl::StrCat("n", info.param.world, "_c",
                                               info.param.count, "_",
                                               DataTypeName(info.param.type));
                         });

class HierarchicalTest : public ::testing::TestWithParam<size_t> {};

// 1 MiB runs the three phases once; 20 MiB pipelines five 4 MiB segments.
INSTANTIATE_TEST_SUITE_P(Sizes, HierarchicalTest,
                         ::testing::Values((1 << 18) + 3, (5 << 20) + 3));

TEST_P(HierarchicalTest, TwoByTwoEqualsRing) {
  GroupOptions options;
  options.node_of = {0, 0, 1, 1};
  const size_t count = GetParam();
  std::vector<std::vector<float>> ring(4), hier(4);
  testing::RunRanks(
      4,
      [&](int r, Backend& g) {
        std::vector<float> a(count), b(count);
        for (size_t i = 0; i < count; ++i)
          a[i] = b[i] = 0.25f * r + 1e-3f * (i % 97);
        OpOptions o;
        o.algorithm = Algorithm::kRing;
        ASSERT_TRUE(
            g.AllReduce(a.data(), count, DataType::kF32, ReduceOp::kSum, o)
                ->Wait()
                .ok());
        o.algorithm = Algorithm::kHierarchical;
        ASSERT_TRUE(
            g.AllReduce(b.data(), count, DataType::kF32, ReduceOp::kSum, o)
                ->Wait()
                .ok());
        ring[r] = a;
        hier[r] = b;
      },
      options);
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(hier[r], hier[0]);  // every rank holds the same bits
    for (size_t i = 0; i < count; i += 997)
      ASSERT_NEAR(hier[r][i], ring[r][i], 1e-5);
  }
}

TEST(TunerTest, SmallMessagesUseRecursiveDoublingLargeOnesTheTopology) {
  auto t = NewInProcessTransports(4);
  GroupOptions flat;
  ProcessGroup g(std::move(t[0]), flat);
  EXPECT_EQ(g.ChooseAllReduce(1024), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(g.ChooseAllReduce(64 << 20), Algorithm::kRing);
  auto t2 = NewInProcessTransports(4);
  GroupOptions two_nodes;
  two_nodes.node_of = {0, 0, 1, 1};
  ProcessGroup h(std::move(t2[0]), two_nodes);
  EXPECT_EQ(h.ChooseAllReduce(64 << 20), Algorithm::kHierarchical);
}

TEST(TunerTest, TheSharedAlgorithmNeedsATransportWhoseRanksShareMemory) {
  auto t = NewInProcessTransports(1);
  ProcessGroup g(std::move(t[0]), GroupOptions{});
  std::vector<float> buf(4, 1.f);
  OpOptions o;
  o.algorithm = Algorithm::kShared;
  Status st =
      g.AllReduce(buf.data(), buf.size(), DataType::kF32, ReduceOp::kSum, o)
          ->Wait();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
  EXPECT_NE(st.message().find("no memory shared"), std::string::npos) << st;
}

TEST(FaultTest, MissingPeerGivesDeadlineExceededNamingIt) {
  auto t = NewInProcessTransports(2);
  GroupOptions o;
  o.timeout = std::chrono::milliseconds(50);
  ProcessGroup g(std::move(t[0]), o);  // rank 1 never joins
  std::vector<float> buf(1000, 1.f);
  Status st =
      g.AllReduce(buf.data(), buf.size(), DataType::kF32, ReduceOp::kSum)
          ->Wait();
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st;
  // The group is broken afterwards.
  EXPECT_EQ(g.Barrier()->Wait().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(FaultTest, AbortUnblocksEveryone) {
  auto t = NewInProcessTransports(2);
  ProcessGroup g(std::move(t[0]), GroupOptions{});
  std::vector<float> buf(10);
  auto w = g.AllReduce(buf.data(), buf.size(), DataType::kF32, ReduceOp::kSum);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(w->IsCompleted());
  w->Abort();
  EXPECT_EQ(w->Wait().code(), absl::StatusCode::kAborted);
}

TEST(ReduceTest, HalfAndBfloatConversionsRoundToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.f), 0x7bff);
  EXPECT_EQ(FloatToHalf(1e6f), 0x7c00);           // overflow to inf
  EXPECT_EQ(FloatToHalf(5.9604645e-8f), 0x0001);  // smallest subnormal
  EXPECT_FLOAT_EQ(HalfToFloat(0x0001), 5.9604645e-8f);
  EXPECT_FLOAT_EQ(HalfToFloat(0x3555), 0.33325195f);
  for (uint32_t h = 0; h < 0x7c00; h += 7) {
    EXPECT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h);
  }
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(1.00390625f), 0x3f80);  // tie -> even
  EXPECT_EQ(FloatToBf16(1.01171875f), 0x3f82);  // tie -> even (up)
  EXPECT_FLOAT_EQ(Bf16ToFloat(0x4049), 3.140625f);
}

}  // namespace
}  // namespace strata::comm
