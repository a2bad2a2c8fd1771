// The collective flight recorder: every operation of a group lands in the
// rank's shared-memory ring with its sequence, op, bytes, times and peers,
// readable from outside while the rank is stuck in an operation.
#include "comm/flight_recorder.h"

#include <unistd.h>

#include <fstream>
#include <thread>

#include "comm/process_group.h"
#include "gtest/gtest.h"

namespace strata::comm {
namespace {

class FlightRecorderTest : public ::testing::Test {
 protected:
  std::string Path(int rank) {
    return testing::TempDir() + "/fr-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() +
           "-" + std::to_string(rank);
  }
  void TearDown() override {
    for (int r = 0; r < 2; ++r) unlink(Path(r).c_str());
  }

  // Two ranks as threads, world ranks 5 and 7, group "dp0".
  std::vector<std::unique_ptr<ProcessGroup>> Groups(int capacity = 2048) {
    auto transports = NewInProcessTransports(2);
    std::vector<std::unique_ptr<ProcessGroup>> groups;
    for (int r = 0; r < 2; ++r) {
      auto rec = FlightRecorder::Create(Path(r), "job-1", r == 0 ? 5 : 7,
                                        capacity);
      EXPECT_TRUE(rec.ok()) << rec.status();
      GroupOptions o;
      o.recorder = *rec;
      o.name = "dp0";
      o.world_ranks = {5, 7};
      o.timeout = std::chrono::milliseconds(1500);
      groups.push_back(
          std::make_unique<ProcessGroup>(std::move(transports[r]), o));
    }
    return groups;
  }
};

TEST_F(FlightRecorderTest, RecordsEveryOperationWithTimesAndPeers) {
  auto groups = Groups();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> v(1 << 18, 1.0f);  // 1 MiB
      for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(groups[r]
                        ->AllReduce(v.data(), v.size(), DataType::kF32,
                                    ReduceOp::kSum)
                        ->Wait()
                        .ok());
      }
      ASSERT_TRUE(
          groups[r]->Broadcast(v.data(), 100, DataType::kF32, 0)->Wait().ok());
    });
  }
  for (auto& t : threads) t.join();

  for (int r = 0; r < 2; ++r) {
    auto dump = ReadFlightRecorder(Path(r));
    ASSERT_TRUE(dump.ok()) << dump.status();
    EXPECT_EQ(dump->rank, r == 0 ? 5 : 7);
    EXPECT_EQ(dump->pid, getpid());
    EXPECT_EQ(dump->job_id, "job-1");
    EXPECT_EQ(dump->recorded, 4u);
    ASSERT_EQ(dump->entries.size(), 4u);
    for (int i = 0; i < 4; ++i) {
      const FrEntry& e = dump->entries[i];
      EXPECT_EQ(e.group, "dp0");
      EXPECT_EQ(e.seq, static_cast<uint64_t>(i + 1));
      EXPECT_EQ(e.op, i < 3 ? "all_reduce" : "broadcast");
      EXPECT_EQ(e.bytes, i < 3 ? (1u << 20) : 400u);
      EXPECT_EQ(e.state, FrState::kFinished);
      EXPECT_GT(e.entered_ns, 0);
      EXPECT_LE(e.entered_ns, e.started_ns);
      EXPECT_LE(e.started_ns, e.finished_ns);
      ASSERT_EQ(e.peers.size(), 1u) << "op " << i;
      EXPECT_EQ(e.peers[0].peer, r == 0 ? 7 : 5);  // world rank of the peer
    }
    // A ring all-reduce of 1 MiB over 2 ranks sends and receives half of it
    // in each of its two phases.
    EXPECT_EQ(dump->entries[0].peers[0].bytes, 2u << 20);
    EXPECT_GT(dump->entries[0].peers[0].ns, 0);
  }
}

TEST_F(FlightRecorderTest, PausedRecordsNothingAndResumes) {
  auto rec = FlightRecorder::Create(Path(0), "job-1", 0, 16);
  ASSERT_TRUE(rec.ok()) << rec.status();
  const int g = (*rec)->AddGroup("dp0");
  (*rec)->Begin(g, 1, "all_reduce", 8).Finish(true);
  (*rec)->SetPaused(true);
  EXPECT_TRUE((*rec)->paused());
  FlightRecorder::Op op = (*rec)->Begin(g, 2, "all_reduce", 8);
  EXPECT_FALSE(op.active());
  op.Started();  // an inactive Op ignores every call
  op.Transfer(1, 8, 10);
  op.Finish(true);
  (*rec)->SetPaused(false);
  (*rec)->Begin(g, 3, "broadcast", 4).Finish(true);
  auto dump = ReadFlightRecorder(Path(0));
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(dump->recorded, 2u);
  ASSERT_EQ(dump->entries.size(), 2u);
  EXPECT_EQ(dump->entries[0].seq, 1u);
  EXPECT_EQ(dump->entries[1].seq, 3u);
}

TEST_F(FlightRecorderTest, AStuckOperationIsReadableFromOutside) {
  auto groups = Groups();
  std::vector<float> v(1024, 1.0f);
  Status st;
  std::thread stuck([&] {  // rank 1 never joins
    st = groups[0]->AllReduce(v.data(), v.size(), DataType::kF32,
                              ReduceOp::kSum)->Wait();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto dump = ReadFlightRecorder(Path(0));
  ASSERT_TRUE(dump.ok()) << dump.status();
  ASSERT_EQ(dump->entries.size(), 1u);
  EXPECT_EQ(dump->entries[0].op, "all_reduce");
  EXPECT_EQ(dump->entries[0].seq, 1u);
  EXPECT_EQ(dump->entries[0].state, FrState::kEntered);  // no peer came
  EXPECT_EQ(dump->entries[0].finished_ns, 0);
  stuck.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  dump = ReadFlightRecorder(Path(0));
  ASSERT_TRUE(dump.ok());
  EXPECT_EQ(dump->entries[0].state, FrState::kFailed);
  // Rank 1's recorder exists and holds nothing: it never entered.
  auto other = ReadFlightRecorder(Path(1));
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->entries.empty());
}

TEST_F(FlightRecorderTest, KeepsTheLastCapacityOperations) {
  auto groups = Groups(/*capacity=*/8);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      for (int i = 0; i < 20; ++i) ASSERT_TRUE(groups[r]->Barrier()->Wait().ok());
    });
  }
  for (auto& t : threads) t.join();
  auto dump = ReadFlightRecorder(Path(0));
  ASSERT_TRUE(dump.ok());
  EXPECT_EQ(dump->recorded, 20u);
  ASSERT_EQ(dump->entries.size(), 8u);
  EXPECT_EQ(dump->entries.front().seq, 13u);
  EXPECT_EQ(dump->entries.back().seq, 20u);
}

TEST_F(FlightRecorderTest, MissingAndForeignFilesAreClearErrors) {
  EXPECT_EQ(ReadFlightRecorder(Path(0)).status().code(),
            absl::StatusCode::kNotFound);
  std::ofstream(Path(0)) << std::string(100000, 'x');
  auto r = ReadFlightRecorder(Path(0));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("not a version 1 flight recorder"),
            std::string::npos)
      << r.status();
  EXPECT_EQ(FlightRecorder::Create(Path(1), "j", 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FlightRecorderPathTest, SanitizesTheJobId) {
  EXPECT_EQ(FlightRecorderPath("job-1", 3, 77), "/dev/shm/strata-fr-job-1-3-77");
  EXPECT_EQ(FlightRecorderPath("../x y", 0, 5),
            "/dev/shm/strata-fr-.._x_y-0-5");
}

}  // namespace
}  // namespace strata::comm
