// Liveness on a fake clock: silence past the window loses a peer once, a
// beat revives it, and the watcher's own pause (or creation) gives every
// peer a full window before it can be lost.
#include "fault/liveness.h"

#include "gtest/gtest.h"

namespace strata::fault {
namespace {

TEST(LivenessTest, SilencePastTheWindowLosesOnceAndABeatRevives) {
  FakeClock clock;
  Liveness l(clock, 3000);
  l.Beat("a");
  l.Beat("b");
  clock.Advance(2000);
  l.Beat("b");
  EXPECT_TRUE(l.Check().empty());
  clock.Advance(1500);  // a: 3.5 s silent, b: 1.5 s
  EXPECT_EQ(l.Check(), std::vector<std::string>{"a"});
  EXPECT_FALSE(l.Alive("a"));
  EXPECT_TRUE(l.Alive("b"));
  EXPECT_TRUE(l.Check().empty());  // reported once
  l.Beat("a");
  EXPECT_TRUE(l.Alive("a"));
  EXPECT_FALSE(l.Alive("never-seen"));
}

TEST(LivenessTest, APauseOrARestartGivesEveryPeerAFullWindow) {
  FakeClock clock;
  clock.Advance(10000);
  Liveness l(clock, 3000);
  EXPECT_TRUE(l.Settling());
  l.Beat("a");
  clock.Advance(2900);
  EXPECT_TRUE(l.Check().empty());
  // The watcher was stopped for 10 s: a's beats may be waiting unread.
  clock.Advance(10000);
  l.GraceAfterPause();
  EXPECT_TRUE(l.Settling());
  EXPECT_TRUE(l.Check().empty());
  clock.Advance(3001);
  EXPECT_FALSE(l.Settling());
  EXPECT_EQ(l.Check(), std::vector<std::string>{"a"});
}

}  // namespace
}  // namespace strata::fault
