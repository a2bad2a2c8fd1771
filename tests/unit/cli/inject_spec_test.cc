// `strata run --inject` specs.
#include "cli/inject_spec.h"

#include <string>

#include "gtest/gtest.h"

namespace strata::cli {
namespace {

TEST(InjectSpecTest, ParsesEachKind) {
  auto s = ParseInjectSpec("slow:rank=1,factor=1.3,step=20,duration=30");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind, InjectSpec::Kind::kSlow);
  EXPECT_EQ(s->rank, 1);
  EXPECT_DOUBLE_EQ(s->factor, 1.3);
  EXPECT_EQ(s->step, 20);
  EXPECT_EQ(InjectArgs(*s, 4242),
            (std::vector<std::string>{"slow", "--pid", "4242",
                                      "--factor", "1.3", "--period-ms", "100",
                                      "--duration", "30"}));
  s = ParseInjectSpec("hang:rank=0");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->step, 1);
  EXPECT_EQ(InjectArgs(*s, 7),
            (std::vector<std::string>{"hang", "--pid", "7"}));
  s = ParseInjectSpec("kill-rank:rank=2,step=5");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(InjectArgs(*s, 7)[0], "kill");
  s = ParseInjectSpec("kill-worker:node=1,step=60");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->node, 1);
}

TEST(InjectSpecTest, BadSpecsNameTheProblem) {
  for (auto [text, words] : std::vector<std::pair<std::string, std::string>>{
           {"melt:rank=1", "unknown kind 'melt'"},
           {"slow:rank=1", "slow needs factor"},
           {"slow:rank=1,factor=1", "factor=1 is out of range"},
           {"slow:factor=2", "needs rank=R"},
           {"hang:rank=-1", "rank=-1 is out of range"},
           {"hang:rank=1.5", "rank=1.5 is out of range"},
           {"hang:rank=x", "rank=x is not a number"},
           {"hang:rank=1e300", "rank=1e300 is out of range"},
           {"hang:rank=nan", "rank=nan is out of range"},
           {"hang:rank=1,colour=red", "unknown key 'colour'"},
           {"hang:rank", "'rank' is not key=value"},
           {"kill-worker:rank=1", "kill-worker needs node=K"},
           {"slow:rank=1,factor=2,period_ms=1", "period_ms=1 is out of range"},
       }) {
    auto s = ParseInjectSpec(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_TRUE(absl::IsInvalidArgument(s.status()));
    EXPECT_NE(std::string(s.status().message()).find(words), std::string::npos)
        << s.status().message();
  }
}

}  // namespace
}  // namespace strata::cli
