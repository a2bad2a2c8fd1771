#include "worker/clock_sync.h"

#include "gtest/gtest.h"

namespace strata::worker {
namespace {

TEST(ClockSyncTest, NoEstimateBeforeASample) {
  ClockSync sync;
  EXPECT_FALSE(sync.Estimate().has_value());
  sync.Add(1000, 0, 1200);  // a coordinator that sent no time
  sync.Add(1000, 5000, 900);  // received before sent: a clock step
  EXPECT_FALSE(sync.Estimate().has_value());
}

TEST(ClockSyncTest, SmallestRoundTripWins) {
  ClockSync sync;
  // The coordinator is 300 ms ahead; replies answered at mid round trip.
  sync.Add(1'000'000, 1'300'000 + 5'000, 1'010'000);  // rtt 10 ms
  sync.Add(2'000'000, 2'300'000 + 100, 2'000'200);    // rtt 200 us
  auto e = sync.Estimate();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->offset_us(), 300'000);
  EXPECT_EQ(e->error_us(), 100);
}

TEST(ClockSyncTest, CoordinatorTimeBetweenStampsIsNotNetwork) {
  ClockSync sync;
  // 300 ms ahead, 50 us each way, 900 us spent between the two stamps.
  sync.Add(1'000'000, 1'300'000 + 950, 1'001'000, 1'300'000 + 50);
  auto e = sync.Estimate();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->offset_us(), 300'000);
  EXPECT_EQ(e->error_us(), 50);
}

TEST(ClockSyncTest, OldSamplesLeaveTheWindow) {
  ClockSync sync;
  sync.Add(0, 1'000'000 + 50, 100);  // rtt 100 us, offset +1 s
  for (int i = 1; i <= ClockSync::kSamples; ++i) {
    const int64_t t = i * 1'000'000;
    sync.Add(t, t + 2'000'000 + 500, t + 1000);  // rtt 1 ms, offset +2 s
  }
  EXPECT_EQ(sync.Estimate()->offset_us(), 2'000'000);
}

}  // namespace
}  // namespace strata::worker
