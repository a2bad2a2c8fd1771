// A steady-state step of the trainer allocates nothing (docs/train.md,
// "Performance"): every global operator new is counted, and steps after
// the first two (which size the buffers and scratch) must not call it.
// One rank, no checkpoints: collectives of groups of size 1 return at
// once, so only the trainer's own code runs.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "train/trainer.h"

namespace {
std::atomic<long> g_allocs{0};
}  // namespace

void* operator new(size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

extern "C" void openblas_set_num_threads(int);

namespace strata::train {
namespace {

TEST(StepAllocTest, SteadyStateStepDoesNotAllocate) {
  openblas_set_num_threads(1);
  TrainOptions o;
  o.model = *ModelPreset("tiny");
  o.global_batch = 8;
  o.micro_batch = 2;
  auto trainer = Trainer::Create(o, TrainGroups{});
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*trainer)->Step().ok());
  const long before = g_allocs.load();
  ASSERT_GT(before, 0) << "the counting operator new is not in use";
  for (int i = 0; i < 3; ++i) {
    auto r = (*trainer)->Step();
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_EQ(g_allocs.load() - before, 0) << "allocations in 3 steady steps";
}

}  // namespace
}  // namespace strata::train
