// The restart backoff on tables: delays per consecutive failure, the cap,
// and the reset after a healthy attempt.
#include "fault/restart_backoff.h"

#include <vector>

#include "gtest/gtest.h"

namespace strata::fault {
namespace {

TEST(RestartBackoffTest, DelaysDoubleUpToTheCap) {
  const RestartBackoffOptions o;  // 1 immediate, 1 s, x2, cap 300 s
  const std::vector<std::pair<int, int64_t>> table = {
      {0, 0},        {1, 0},        {2, 1000},     {3, 2000},
      {4, 4000},     {5, 8000},     {9, 128000},   {10, 256000},
      {11, 300000},  {12, 300000},  {1000, 300000}, {-3, 0}};
  for (const auto& [n, want] : table) {
    EXPECT_EQ(RestartDelayMs(n, o), want) << "failure " << n;
  }
}

TEST(RestartBackoffTest, OtherOptionsOnATable) {
  struct Case {
    RestartBackoffOptions o;
    int n;
    int64_t want;
  };
  for (const Case& c : std::vector<Case>{
           {{.immediate_restarts = 0, .initial_ms = 10000}, 1, 10000},
           {{.immediate_restarts = 0, .initial_ms = 10000}, 3, 40000},
           {{.immediate_restarts = 3}, 3, 0},
           {{.immediate_restarts = 3}, 4, 1000},
           {{.multiplier = 3.0}, 4, 9000},
           {{.multiplier = 0.5}, 5, 1000},  // never shrinks
           {{.max_ms = 2500}, 4, 2500},
       }) {
    EXPECT_EQ(RestartDelayMs(c.n, c.o), c.want) << c.n;
  }
}

// A command that exits 1 at once: each failure waits longer; an attempt
// that then runs for the healthy period starts the count again.
TEST(RestartBackoffTest, AStreakAndItsReset) {
  RestartBackoff b;
  int64_t now = 0;
  struct Step {
    int64_t ran_ms;
    int consecutive;
    int64_t delay_ms;
    bool reset;
  };
  for (const Step& s : std::vector<Step>{{0, 1, 0, false},
                                         {10, 2, 1000, false},
                                         {10, 3, 2000, false},
                                         {599999, 4, 4000, false},
                                         {600000, 1, 0, true},
                                         {5, 2, 1000, false}}) {
    const auto d = b.OnFailure(s.ran_ms, false, now);
    EXPECT_EQ(d.consecutive, s.consecutive) << now;
    EXPECT_EQ(d.delay_ms, s.delay_ms) << now;
    EXPECT_EQ(d.reset, s.reset) << now;
    EXPECT_EQ(d.not_before_ms, now + s.delay_ms);
    EXPECT_EQ(b.Ready(now), s.delay_ms == 0);
    EXPECT_TRUE(b.Ready(now + s.delay_ms));
    now += s.delay_ms + s.ran_ms + 1;
  }
}

// A long job's faults minutes apart: each attempt trained before it
// failed, so each failure is the first in a row and restarts at once (an
// ETTR run with a fault every 2 minutes loses no time to the backoff).
TEST(RestartBackoffTest, AnAttemptThatTrainedResetsTheCount) {
  RestartBackoff b;
  EXPECT_EQ(b.OnFailure(0, false, 0).delay_ms, 0);
  EXPECT_EQ(b.OnFailure(5, false, 10).delay_ms, 1000);
  for (int i = 0; i < 5; ++i) {
    const auto d = b.OnFailure(120000, true, 2000 + i * 120000);
    EXPECT_EQ(d.consecutive, 1);
    EXPECT_EQ(d.delay_ms, 0);
  }
  EXPECT_EQ(b.OnFailure(5, false, 900000).delay_ms, 1000);  // storm again
}

TEST(RestartBackoffTest, Describes) {
  RestartBackoff b;
  EXPECT_EQ(b.OnFailure(0, false, 0).Describe(), "restart at once (failure 1 in a row)");
  EXPECT_EQ(b.OnFailure(0, false, 0).Describe(),
            "next attempt in 1.0 s (backoff: failure 2 in a row)");
}

// 1,000 failures in a row (the issue's storm) take hours, not minutes:
// the sum of the delays is at least 990 x the 5-minute cap.
TEST(RestartBackoffTest, TheIssuesStormIsSpreadOut) {
  RestartBackoff b;
  int64_t total = 0;
  for (int i = 0; i < 1000; ++i) total += b.OnFailure(100, false, total).delay_ms;
  EXPECT_GE(total, int64_t{990} * 300000);
}

}  // namespace
}  // namespace strata::fault
