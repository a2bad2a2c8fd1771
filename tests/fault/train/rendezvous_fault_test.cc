// Rendezvous mistakes with two real strata-train ranks on a TCP store the
// test hosts: each ends within 10 s with a message naming its cause, where
// they used to wait out the 120 s connect timeout in silence.
//  - a store address nothing listens on: progress "waiting for store
//    HOST:PORT (Connection refused)" within seconds;
//  - ranks with different WORLD_SIZE (2 and 4), or job ids: both values named;
//  - the same RANK twice: named, and the other rank stops too;
//  - one rank failing at start (a bad flag): the other stops with
//    "rank 1 failed: <its reason>".
// A correct two-rank start still trains.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <future>

#include "comm/store.h"
#include "tests/fault/train/train_process.h"

namespace {

using strata::testing::RunTrainFor;
using strata::testing::TrainRun;

constexpr double kBoundS = 10;

// A hung rank is killed after this many seconds; STRATA_FAULT_LIMIT_S
// raises it (to measure how long a build without the checks hangs).
int LimitS() {
  const char* v = std::getenv("STRATA_FAULT_LIMIT_S");
  return v != nullptr ? std::atoi(v) : 30;
}

class RendezvousFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = strata::comm::StartTcpStoreServer("127.0.0.1", 0);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    store_ = "STRATA_STORE=tcp://127.0.0.1:" + std::to_string(server_->port());
  }
  // Two ranks at once: (args, env) each.
  std::pair<TrainRun, TrainRun> RunPair(const std::string& args0,
                                        const std::string& env0,
                                        const std::string& args1,
                                        const std::string& env1) {
    auto a = std::async(std::launch::async, [&] {
      return RunTrainFor("--model tiny --steps 2 " + args0, store_ + " " + env0,
                         LimitS());
    });
    auto b = std::async(std::launch::async, [&] {
      return RunTrainFor("--model tiny --steps 2 " + args1, store_ + " " + env1,
                         LimitS());
    });
    std::pair<TrainRun, TrainRun> out{a.get(), b.get()};
    std::printf("  ranks ended after %.2f s (exit %d) and %.2f s (exit %d)\n",
                out.first.seconds, out.first.code, out.second.seconds,
                out.second.code);
    return out;
  }
  std::unique_ptr<strata::comm::TcpStoreServer> server_;
  std::string store_;
};

TEST_F(RendezvousFaultTest, TwoRanksStartAndTrain) {
  auto [r0, r1] = RunPair("", "RANK=0 WORLD_SIZE=2", "", "RANK=1 WORLD_SIZE=2");
  EXPECT_EQ(r0.code, 0) << r0.out;
  EXPECT_EQ(r1.code, 0) << r1.out;
  EXPECT_NE(r0.out.find("step=2 loss="), std::string::npos) << r0.out;
}

TEST(RendezvousNoStoreTest, NothingListeningIsReportedWithinSeconds) {
  const int port = strata::testing::UnusedPort();
  // Killed after 6 s: whatever it said by then is its first output.
  TrainRun r = RunTrainFor("--model tiny --steps 1",
                           "RANK=0 WORLD_SIZE=2 STRATA_STORE=tcp://127.0.0.1:" +
                               std::to_string(port),
                           6);
  EXPECT_NE(r.out.find("waiting for store 127.0.0.1:" + std::to_string(port) +
                       " (Connection refused), "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("s of 120"), std::string::npos) << r.out;
}

TEST_F(RendezvousFaultTest, WorldSizeMismatchIsNamed) {
  auto [r0, r1] = RunPair("", "RANK=0 WORLD_SIZE=2", "", "RANK=1 WORLD_SIZE=4");
  for (const TrainRun* r : {&r0, &r1}) {
    EXPECT_NE(r->code, 0) << r->out;
    EXPECT_NE(r->code, 124) << r->out;
    EXPECT_LT(r->seconds, kBoundS) << r->out;
    EXPECT_NE(r->out.find("WORLD_SIZE mismatch"), std::string::npos) << r->out;
  }
  for (const TrainRun* r : {&r0, &r1}) {
    EXPECT_NE(r->out.find("WORLD_SIZE mismatch: rank 0 ("), std::string::npos)
        << r->out;
    EXPECT_NE(r->out.find("has WORLD_SIZE=2, rank 1 ("), std::string::npos)
        << r->out;
    EXPECT_NE(r->out.find("has WORLD_SIZE=4"), std::string::npos) << r->out;
  }
}

TEST_F(RendezvousFaultTest, JobIdMismatchIsNamed) {
  auto [r0, r1] = RunPair("", "RANK=0 WORLD_SIZE=2 STRATA_JOB_ID=a", "",
                          "RANK=1 WORLD_SIZE=2 STRATA_JOB_ID=b");
  for (const TrainRun* r : {&r0, &r1}) {
    EXPECT_NE(r->code, 0) << r->out;
    EXPECT_LT(r->seconds, kBoundS) << r->out;
    EXPECT_NE(r->out.find("STRATA_JOB_ID mismatch: rank 0 ("),
              std::string::npos)
        << r->out;
    EXPECT_NE(r->out.find("has STRATA_JOB_ID=a, rank 1 ("), std::string::npos)
        << r->out;
    EXPECT_NE(r->out.find("has STRATA_JOB_ID=b"), std::string::npos) << r->out;
  }
}

TEST_F(RendezvousFaultTest, DuplicateRankIsNamed) {
  auto [r0, r1] = RunPair("", "RANK=0 WORLD_SIZE=2", "", "RANK=0 WORLD_SIZE=2");
  for (const TrainRun* r : {&r0, &r1}) {
    EXPECT_NE(r->code, 0) << r->out;
    EXPECT_NE(r->code, 124) << r->out;
    EXPECT_LT(r->seconds, kBoundS) << r->out;
    EXPECT_NE(r->out.find("RANK=0 is used by 2 processes"), std::string::npos)
        << r->out;
  }
}

TEST_F(RendezvousFaultTest, RankFailingAtStartStopsTheOther) {
  auto [r0, r1] = RunPair("", "RANK=0 WORLD_SIZE=2",
                          "--data /tmp --model small", "RANK=1 WORLD_SIZE=2");
  EXPECT_EQ(r1.code, 2) << r1.out;
  EXPECT_NE(r0.code, 0) << r0.out;
  EXPECT_NE(r0.code, 124) << r0.out;
  EXPECT_LT(r0.seconds, kBoundS) << r0.out;
  EXPECT_NE(r0.out.find("rank 1 failed: --data /tmp is a directory"),
            std::string::npos)
      << r0.out;
}

TEST_F(RendezvousFaultTest, RankWithBadFlagStopsTheOther) {
  auto [r0, r1] =
      RunPair("", "RANK=0 WORLD_SIZE=2", "--steps nope", "RANK=1 WORLD_SIZE=2");
  EXPECT_EQ(r1.code, 2) << r1.out;
  EXPECT_LT(r0.seconds, kBoundS) << r0.out;
  EXPECT_NE(r0.out.find("rank 1 failed: "), std::string::npos) << r0.out;
  EXPECT_NE(r0.out.find("--steps"), std::string::npos) << r0.out;
}

}  // namespace
