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

// Thousands of peers beating every second, checked 20 times a second as
// the coordinator does: only the one that fell silent is lost, at the first
// check past its window, and a lost peer that beats again is alive and can
// be lost again.
TEST(LivenessTest, ManyPeersOnlyTheSilentOneIsLostOnTime) {
  FakeClock clock;
  Liveness l(clock, 3000);
  std::vector<std::string> lost;
  for (int ms = 0; ms < 20000; ms += 50) {
    for (int p = ms % 1000 / 50; p < 4000; p += 20) {
      const std::string id = "w" + std::to_string(p);
      // w7 stops at 5 s and comes back at 12 s.
      if (p == 7 && ms >= 5000 && ms < 12000) continue;
      l.Beat(id);
    }
    clock.Advance(50);
    for (auto& id : l.Check()) lost.push_back(id + "@" + std::to_string(ms));
  }
  // w7's last beat was at 4,350 ms (it beats at ms % 1000 == 350); lost
  // once 3,000 ms more have passed, at the check ending at 7,400 ms.
  EXPECT_EQ(lost, std::vector<std::string>{"w7@7350"});
  EXPECT_TRUE(l.Alive("w7"));
}

}  // namespace
}  // namespace strata::fault
