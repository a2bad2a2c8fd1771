// A rank whose save fails tells the commit leader at once: rank 0's save
// fails within seconds naming that rank, not after its commit timeout (10
// minutes by default; 60 s here).
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "checkpoint/checkpointer.h"
#include "checkpoint/storage.h"
#include "checkpoint/testing/faulty_storage.h"
#include "comm/store.h"
#include "gtest/gtest.h"

namespace strata::checkpoint {
namespace {

TEST(RankFailureTest, LeaderLearnsOfAFailedRankAtOnce) {
  const std::string root =
      ::testing::TempDir() + "/rank-fail-" + std::to_string(getpid());
  std::filesystem::remove_all(root);
  auto store = comm::NewInMemoryStore();
  std::vector<float> w(1024, 1.0f);
  Status results[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      CheckpointOptions o;
      o.uri = "file://" + root;
      o.rank = r;
      o.world_size = 2;
      o.store = store;
      o.commit_timeout = std::chrono::seconds(60);
      if (r == 1) {
        auto target = OpenStorage(o.uri, 1, /*writable=*/true);
        ASSERT_TRUE(target.ok()) << target.status();
        auto faulty = std::make_shared<testing::FaultyStorage>(*target);
        faulty->FailFinish(true);  // rank 1's data never becomes durable
        o.storage = faulty;
      }
      Checkpointer ckpt(o);
      ShardedTensor t{"w", DType::kF32, {2048}, {1024}, {r * 1024}, 0, 1,
                      w.data()};
      auto h = ckpt.SaveAsync(1, {t}, {});
      ASSERT_TRUE(h.ok()) << h.status();
      results[r] = h->Wait();
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& t : ranks) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_FALSE(results[1].ok());
  ASSERT_EQ(results[0].code(), absl::StatusCode::kAborted) << results[0];
  EXPECT_NE(results[0].message().find("rank 1 could not save step 1"),
            std::string::npos)
      << results[0];
  auto steps = ListSteps("file://" + root);
  ASSERT_TRUE(steps.ok());
  EXPECT_TRUE(steps->empty());  // nothing committed
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace strata::checkpoint
