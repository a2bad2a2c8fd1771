#include "observe/trace_reply.h"

#include "gtest/gtest.h"

namespace strata::observe {
namespace {

constexpr int64_t kEndUs = 1'700'000'000'000'000;  // us since the epoch

control::TraceReply Reply() {
  control::TraceReply r;
  auto* a = r.add_ranks();
  a->set_rank(0);
  a->set_node("a");
  auto* b = r.add_ranks();
  b->set_rank(1);
  b->set_node("b");
  b->mutable_clock()->set_offset_us(-300'000);
  auto* s = r.add_steps();
  s->set_rank(1);
  s->set_step(7);
  s->set_step_seconds(0.010);
  s->set_end_unix_us(kEndUs);
  auto& sec = *s->mutable_section_seconds();
  sec["optimizer"] = 0.001;
  sec["forward"] = 0.003;
  sec["backward"] = 0.005;
  sec["wait"] = 0.002;  // inside forward/backward: not a section
  sec["checkpoint_stall_total"] = 9;
  auto* t = r.add_collectives();
  t->set_rank(1);
  auto* op = t->add_ops();
  op->set_group("dp0");
  op->set_seq(3);
  op->set_op("all_reduce");
  op->set_entered_us(kEndUs - 2000);
  op->set_finished_us(kEndUs - 1000);
  auto* e = r.add_events();
  e->set_kind("straggler");
  e->set_rank(1);
  e->set_unix_ms(kEndUs / 1000 - 300 - 5);  // inside the step, aligned
  auto* far = r.add_events();
  far->set_kind("launched");
  far->set_rank(-1);
  far->set_unix_ms(kEndUs / 1000 - 60'000);  // long before: left out
  return r;
}

TEST(TraceReplyTest, StepSpanHoldsSectionsInStepOrder) {
  const TraceInput in = TraceInputFromReply(Reply(), true);
  ASSERT_EQ(in.sections.size(), 4u);
  const int64_t start = kEndUs * 1000 - 10'000'000;
  EXPECT_EQ(in.sections[0].section, "step 7");
  EXPECT_EQ(in.sections[0].start_ns, start);
  EXPECT_EQ(in.sections[0].dur_ns, 10'000'000);
  EXPECT_EQ(in.sections[1].section, "forward");
  EXPECT_EQ(in.sections[1].start_ns, start);
  EXPECT_EQ(in.sections[2].section, "backward");
  EXPECT_EQ(in.sections[2].start_ns, start + 3'000'000);
  EXPECT_EQ(in.sections[3].section, "optimizer");
  EXPECT_EQ(in.sections[3].start_ns, start + 8'000'000);
}

TEST(TraceReplyTest, SectionsLongerThanTheStepAreCut) {
  control::TraceReply r = Reply();
  (*r.mutable_steps(0)->mutable_section_seconds())["backward"] = 0.050;
  const TraceInput in = TraceInputFromReply(r, true);
  ASSERT_EQ(in.sections.size(), 3u);  // optimizer has no room left
  EXPECT_EQ(in.sections[2].section, "backward");
  EXPECT_EQ(in.sections[2].start_ns + in.sections[2].dur_ns,
            kEndUs * 1000);
}

TEST(TraceReplyTest, OffsetsOnlyWhenAligned) {
  EXPECT_EQ(TraceInputFromReply(Reply(), true).node_offset_ns.at("b"),
            -300'000'000);
  EXPECT_TRUE(TraceInputFromReply(Reply(), false).node_offset_ns.empty());
  // Node a has no estimate: drawn as taken.
  EXPECT_FALSE(TraceInputFromReply(Reply(), true).node_offset_ns.contains("a"));
}

TEST(TraceReplyTest, CollectivesAndEventsInsideTheSteps) {
  const TraceInput in = TraceInputFromReply(Reply(), true);
  ASSERT_EQ(in.collectives.size(), 1u);
  EXPECT_EQ(in.collectives[0].entered_ns, (kEndUs - 2000) * 1000);
  EXPECT_EQ(in.collectives[0].started_ns, 0);
  ASSERT_EQ(in.instants.size(), 1u);
  EXPECT_EQ(in.instants[0].name, "straggler");
  EXPECT_EQ(in.instants[0].rank, 1);
}

TEST(TraceReplyTest, MillisecondReportsStillDraw) {
  control::TraceReply r = Reply();
  r.mutable_steps(0)->clear_end_unix_us();
  r.mutable_steps(0)->set_unix_ms(kEndUs / 1000);
  const TraceInput in = TraceInputFromReply(r, false);
  EXPECT_EQ(in.sections[0].start_ns + in.sections[0].dur_ns, kEndUs * 1000);
}

}  // namespace
}  // namespace strata::observe
