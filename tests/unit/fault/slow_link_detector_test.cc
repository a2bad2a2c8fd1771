#include "fault/slow_link_detector.h"

#include <random>

#include "gtest/gtest.h"

namespace strata::fault {
namespace {

// Traffic between every pair of `nodes`, 4 MiB per transfer at 100 MB/s
// with 10% noise; `slow` node's link runs at `factor` of the rate.
void Feed(SlowLinkDetector& d, int nodes, int rounds, const std::string& slow,
          double factor, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(1, 0.1);
  const double rate = 1.0e8;
  for (int i = 0; i < rounds; ++i) {
    for (int a = 0; a < nodes; ++a) {
      for (int b = 0; b < nodes; ++b) {
        if (a == b) continue;
        std::string sa = "h" + std::to_string(a), sb = "h" + std::to_string(b);
        double bw = rate * std::max(0.5, noise(rng));
        if (sa == slow || sb == slow) bw *= factor;
        d.Add({sa, sb, 4 << 20, (4 << 20) / bw});
      }
    }
  }
}

TEST(SlowLinkDetectorTest, NamesEveryPairOfTheSlowNode) {
  SlowLinkDetector d({});
  Feed(d, 3, 20, "h2", 0.25);
  std::vector<FaultEvent> events = d.Check();
  ASSERT_EQ(events.size(), 4u);  // h0<->h2, h1<->h2
  for (const FaultEvent& e : events) {
    EXPECT_EQ(e.kind, EventKind::kSlowLink);
    EXPECT_TRUE(e.node == "h2" || e.peer_node == "h2") << e.evidence;
    EXPECT_NEAR(e.slowdown, 4, 0.8);
  }
}

TEST(SlowLinkDetectorTest, CleanFabricHasNoSlowPair) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SlowLinkDetector d({});
    Feed(d, 4, 50, "", 1, seed);
    EXPECT_TRUE(d.Check().empty()) << "seed " << seed;
  }
}

TEST(SlowLinkDetectorTest, TwoNodesNeedTheExpectedBandwidth) {
  // With one pair each way there is nothing to compare with; the measured
  // topology supplies the reference.
  SlowLinkDetector d({});
  Feed(d, 2, 20, "h1", 0.25);
  EXPECT_TRUE(d.Check().empty());
  d.SetExpected("h0", "h1", 1.0e8);
  d.SetExpected("h1", "h0", 1.0e8);
  EXPECT_EQ(d.Check().size(), 2u);
}

TEST(SlowLinkDetectorTest, TwoNodesFindALinkThatDegrades) {
  // No expected bandwidth and no third node: the pairs' own first windows
  // are the reference.
  SlowLinkDetector d({});
  Feed(d, 2, 40, "", 1);
  EXPECT_TRUE(d.Check().empty());
  Feed(d, 2, 40, "h1", 0.25, 7);  // the window now holds only slow samples
  std::vector<FaultEvent> events = d.Check();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_NEAR(events[0].slowdown, 4, 0.8);
  EXPECT_NE(events[0].evidence.find("own first window"), std::string::npos)
      << events[0].evidence;
  // One pair both ways shares two nodes: no single suspect.
  EXPECT_FALSE(SlowLinkDetector::CommonNode(events).has_value());
}

// A burst of CPU contention makes a link read 2-3x slower for less than a
// window's worth of samples (a 2-node job on a loaded host, docs/fault.md):
// the window alone would call it slow, the long window does not. A link
// that stays slow is found once a third of the long window is slow.
TEST(SlowLinkDetectorTest, ABurstIsNotASlowLink) {
  SlowLinkDetector d({});
  Feed(d, 2, 100, "", 1);
  EXPECT_TRUE(d.Check().empty());
  Feed(d, 2, 32, "h1", 0.35, 3);  // the whole short window 2.9x slower
  EXPECT_TRUE(d.Check().empty());
  Feed(d, 2, 100, "", 1, 5);      // the burst passes
  EXPECT_TRUE(d.Check().empty());
  Feed(d, 2, 50, "h1", 0.25, 9);  // a link that stays 4x slower
  std::vector<FaultEvent> events = d.Check();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_NE(events[0].evidence.find("over the last 128"), std::string::npos)
      << events[0].evidence;
}

TEST(SlowLinkDetectorTest, BusyTimeInClockTicksAveragesOut) {
  // The kernel counts busy time in ticks: a step's 5 ms of sending reads
  // 0 or 16 ms. Over a window the sums still give the rate.
  SlowLinkDetector d({});
  for (int i = 0; i < 32; ++i) {
    for (const char* dst : {"h1", "h2"}) {
      const bool slow = std::string(dst) == "h2";
      // 1 MB at 200 MB/s (5 ms) or 50 MB/s (20 ms), in 16 ms ticks.
      const double ticks = slow ? (i % 4 == 3 ? 2 : 1) : (i % 3 == 0 ? 1 : 0);
      d.Add({"h0", dst, 1000000, ticks * 0.016});
    }
    d.Add({"h1", "h0", 1000000, i % 3 == 0 ? 0.016 : 0});
  }
  std::vector<FaultEvent> events = d.Check();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].peer_node, "h2");
  EXPECT_NEAR(events[0].slowdown, 3.75, 0.5);  // 0.8 MB/tick-s vs 3 MB/tick-s
  EXPECT_EQ(SlowLinkDetector::CommonNode(events), std::nullopt);
}

TEST(SlowLinkDetectorTest, CommonNodeOfTheSlowPairs) {
  SlowLinkDetector d({});
  Feed(d, 3, 20, "h2", 0.25);
  EXPECT_EQ(SlowLinkDetector::CommonNode(d.Check()), "h2");
}

TEST(SlowLinkDetectorTest, IgnoresSmallIntraNodeAndTooFewTransfers) {
  SlowLinkDetector d({});
  for (int i = 0; i < 100; ++i) {
    d.Add({"h0", "h0", 1 << 20, 1.0});     // within a node
    d.Add({"h0", "h1", 100, 1.0});         // latency-bound
  }
  for (int i = 0; i < 7; ++i) d.Add({"h0", "h2", 1 << 20, 1.0});
  d.SetExpected("h0", "h2", 1e9);
  EXPECT_TRUE(d.Check().empty());  // 7 < min_samples
  EXPECT_EQ(d.Matrix().size(), 1u);
}

}  // namespace
}  // namespace strata::fault
