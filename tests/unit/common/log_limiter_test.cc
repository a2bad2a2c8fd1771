// LogLimiter on a FakeClock, logging into a captured sink: the burst per
// (peer, category), the summary when the window ends (by the next line, by
// Flush, by FlushAll), the key bound, and levels the logger drops.
#include "common/log_limiter.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "spdlog/sinks/ostream_sink.h"

namespace strata {
namespace {

class LogLimiterTest : public ::testing::Test {
 protected:
  LogLimiterTest()
      : sink_(std::make_shared<spdlog::sinks::ostream_sink_st>(out_)),
        logger_(std::make_shared<spdlog::logger>("limiter-test", sink_)) {
    logger_->set_pattern("%v");
    logger_->set_level(spdlog::level::info);
  }
  // Lines logged since the last call.
  std::vector<std::string> Take() {
    std::vector<std::string> lines;
    std::istringstream in(out_.str());
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    out_.str("");
    return lines;
  }

  FakeClock clock_;
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_st> sink_;
  Logger logger_;
};

TEST_F(LogLimiterTest, BurstPerPeerAndCategoryThenOneSummary) {
  LogLimiter limiter(logger_, {.burst = 2, .interval_ms = 1000}, &clock_);
  for (int i = 0; i < 5; ++i) {
    limiter.Warn("10.0.0.1", "bad frame", "bad frame {} from 10.0.0.1", i);
  }
  EXPECT_TRUE(limiter.Warn("10.0.0.2", "bad frame", "from .2"));  // own quota
  EXPECT_TRUE(limiter.Warn("10.0.0.1", "timeout", "timeout"));    // own kind
  EXPECT_EQ(Take(), (std::vector<std::string>{"bad frame 0 from 10.0.0.1",
                                              "bad frame 1 from 10.0.0.1",
                                              "from .2", "timeout"}));
  EXPECT_EQ(limiter.suppressed_total(), 3u);
  clock_.Advance(999);
  EXPECT_FALSE(limiter.Warn("10.0.0.1", "bad frame", "still suppressed"));
  clock_.Advance(1);  // the window has ended: the next line brings the count
  EXPECT_TRUE(limiter.Warn("10.0.0.1", "bad frame", "bad frame again"));
  EXPECT_EQ(Take(),
            (std::vector<std::string>{
                "suppressed 4 similar messages from 10.0.0.1 (bad frame) in "
                "1 s",
                "bad frame again"}));
}

TEST_F(LogLimiterTest, FlushSummarizesAFloodThatStopped) {
  LogLimiter limiter(logger_, {.burst = 1, .interval_ms = 60000}, &clock_);
  for (int i = 0; i < 10; ++i) limiter.Warn("peer", "junk", "junk {}", i);
  Take();
  limiter.Flush();  // window still open: nothing yet
  EXPECT_TRUE(Take().empty());
  clock_.Advance(60000);
  limiter.Flush();
  EXPECT_EQ(Take(), (std::vector<std::string>{
                        "suppressed 9 similar messages from peer (junk) in "
                        "60 s"}));
  limiter.Flush();  // said once
  EXPECT_TRUE(Take().empty());
  EXPECT_TRUE(limiter.Warn("peer", "junk", "fresh window"));
}

TEST_F(LogLimiterTest, FlushAllSummarizesOpenWindows) {
  LogLimiter limiter(logger_, {.burst = 1, .interval_ms = 60000}, &clock_);
  limiter.Warn("a", "x", "one");
  limiter.Warn("a", "x", "two");
  limiter.Warn("b", "x", "only");  // nothing suppressed: no summary
  Take();
  clock_.Advance(1500);
  limiter.FlushAll();
  EXPECT_EQ(Take(), (std::vector<std::string>{
                        "suppressed 1 similar messages from a (x) in 2 s"}));
}

TEST_F(LogLimiterTest, ManyPeersShareOneOverflowQuota) {
  LogLimiter limiter(logger_, {.burst = 1, .interval_ms = 1000, .max_keys = 3},
                     &clock_);
  for (int i = 0; i < 100; ++i) {
    limiter.Warn("10.0.0." + std::to_string(i), "junk", "from {}", i);
  }
  // Three peers get their line, the 97 others share "other peers".
  EXPECT_EQ(Take().size(), 4u);
  EXPECT_EQ(limiter.suppressed_total(), 96u);
  clock_.Advance(1000);
  limiter.Flush();
  EXPECT_EQ(Take(), (std::vector<std::string>{
                        "suppressed 96 similar messages from other peers "
                        "(junk) in 1 s"}));
}

TEST_F(LogLimiterTest, LinesTheLoggerDropsAreNotCounted) {
  LogLimiter limiter(logger_, {.burst = 1}, &clock_);
  EXPECT_FALSE(limiter.Log(spdlog::level::debug, "p", "c", "debug"));
  EXPECT_TRUE(limiter.Warn("p", "c", "warn"));
  EXPECT_EQ(limiter.suppressed_total(), 0u);
}

}  // namespace
}  // namespace strata
