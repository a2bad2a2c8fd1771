// Readers pin the step they read: `strata ckpt export` of a live checkpoint
// succeeds while a trainer with retention keep_last=1 saves every step, and
// a pin held by a process that died is released (it is an flock).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "checkpoint/reader.h"
#include "gtest/gtest.h"
#include "tests/integration/cli/run_command.h"

namespace strata::checkpoint {
namespace {

namespace fs = std::filesystem;

class PinTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/ckpt_pin_XXXXXX";
    root_ = mkdtemp(tmpl.data());
    uri_ = GetParam() + root_ + "/ckpt";
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_, uri_;
};

TEST_P(PinTest, ExportOfALiveCheckpointSucceeds) {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> saved{0};
  std::thread trainer([&] {
    CheckpointOptions o;
    o.uri = uri_;
    o.store = comm::NewInMemoryStore();
    o.keep_last = 1;
    Checkpointer ckpt(o);
    std::vector<float> w(2 << 20);  // 8 MiB
    for (int64_t step = 1; !stop; ++step) {
      std::fill(w.begin(), w.begin() + 1024, static_cast<float>(step));
      ShardedTensor t{"w", DType::kF32, {2 << 20}, {2 << 20},
                      {0}, 0,           1,         w.data()};
      auto h = ckpt.SaveAsync(step, {t}, {});
      ASSERT_TRUE(h.ok());
      Status st = h->Wait();
      ASSERT_TRUE(st.ok()) << st;
      saved = step;
    }
  });
  for (int i = 0; i < 6000 && saved < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (saved < 1) {
    stop = true;
    trainer.join();
    FAIL() << "the trainer saved nothing in 30 s";
  }
  int ok = 0;
  for (int i = 0; i < 10; ++i) {
    auto r = strata::testing::RunStrata("ckpt export " + uri_ + " --out " +
                                        root_ + "/out.safetensors");
    EXPECT_EQ(r.code, 0) << r.out;
    ok += r.code == 0;
  }
  const int64_t steps_during = saved;
  // Retention skips a step an export still pins; two more saves after the
  // last export exited (a bounded wait) let it catch up.
  for (int i = 0; i < 3000 && saved < steps_during + 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stop = true;
  trainer.join();
  EXPECT_EQ(ok, 10);
  EXPECT_GT(steps_during, 1);              // the trainer really saved meanwhile
  EXPECT_EQ(ListSteps(uri_)->size(), 1u);  // retention caught up
}

TEST_P(PinTest, APinDiesWithItsProcess) {
  CheckpointOptions o;
  o.uri = uri_;
  o.store = comm::NewInMemoryStore();
  {
    Checkpointer ckpt(o);
    std::vector<float> w(1024, 1.f);
    ShardedTensor t{"w", DType::kF32, {1024}, {1024}, {0}, 0, 1, w.data()};
    ASSERT_TRUE(ckpt.SaveAsync(1, {t}, {}).ok());
    ASSERT_TRUE(ckpt.Wait().ok());
  }
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    auto p = OpenStep(uri_, 1);
    char c = p.ok() ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    pause();  // holds the pin until killed
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto storage = OpenStorage(uri_, 0, /*writable=*/true);
  ASSERT_TRUE(storage.ok());
  EXPECT_EQ((*storage)->RemoveStep(1).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*ListSteps(uri_), std::vector<int64_t>{1});
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  Status st = (*storage)->RemoveStep(1);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_TRUE(ListSteps(uri_)->empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, PinTest,
                         ::testing::Values("file://", "rocksdb://"),
                         [](const auto& info) {
                           return std::string(
                               info.param == "file://" ? "File" : "RocksDb");
                         });

}  // namespace
}  // namespace strata::checkpoint
