// JoinRendezvous over one in-memory store, ranks as threads: agreement,
// WORLD_SIZE and job id mismatches named in rank order on both sides, a
// rank claimed twice, a published start failure, a missing rank timing out
// with its name, and attempts and coordinator-hosted jobs kept apart.
#include "runtime/rendezvous.h"

#include <gtest/gtest.h>

#include <future>

namespace strata {
namespace {

using std::chrono::milliseconds;

placement::RankEnv Rank(int rank, int world, std::string job = "j",
                        std::string store = "tcp://127.0.0.1:1") {
  placement::RankEnv e;
  e.rank = rank;
  e.world_size = world;
  e.job_id = std::move(job);
  e.store_uri = std::move(store);
  return e;
}

// Every rank joins at once; their statuses in rank-list order.
std::vector<Status> JoinAll(comm::Store& store,
                            const std::vector<placement::RankEnv>& ranks,
                            milliseconds timeout = milliseconds(5000)) {
  std::vector<std::future<Status>> f;
  for (const auto& r : ranks) {
    f.push_back(std::async(std::launch::async, [&store, r, timeout] {
      return JoinRendezvous(store, r, "test-store", timeout);
    }));
  }
  std::vector<Status> out;
  for (auto& x : f) out.push_back(x.get());
  return out;
}

TEST(RendezvousTest, AgreeingRanksJoin) {
  auto store = comm::NewInMemoryStore();
  for (const Status& s :
       JoinAll(*store, {Rank(0, 3), Rank(1, 3), Rank(2, 3)})) {
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(RendezvousTest, WorldSizeMismatchIsNamedOnBothSides) {
  auto store = comm::NewInMemoryStore();
  for (const Status& st : JoinAll(*store, {Rank(0, 2), Rank(1, 4)})) {
    EXPECT_TRUE(absl::IsInvalidArgument(st) || absl::IsAborted(st)) << st;
    EXPECT_NE(st.message().find("WORLD_SIZE mismatch: rank 0 ("),
              std::string::npos)
        << st;
    EXPECT_NE(st.message().find("has WORLD_SIZE=2, rank 1 ("),
              std::string::npos)
        << st;
    EXPECT_NE(st.message().find("has WORLD_SIZE=4"), std::string::npos) << st;
  }
}

TEST(RendezvousTest, JobIdMismatchIsNamed) {
  auto store = comm::NewInMemoryStore();
  for (const Status& st : JoinAll(*store, {Rank(0, 2, "a"), Rank(1, 2, "b")})) {
    EXPECT_NE(st.message().find("STRATA_JOB_ID mismatch: rank 0 ("),
              std::string::npos)
        << st;
    EXPECT_NE(st.message().find("has STRATA_JOB_ID=b"), std::string::npos)
        << st;
  }
}

TEST(RendezvousTest, DuplicateRankFailsBothProcesses) {
  auto store = comm::NewInMemoryStore();
  for (const Status& st : JoinAll(*store, {Rank(1, 2), Rank(1, 2)})) {
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("RANK=1 is used by 2 processes"),
              std::string::npos)
        << st;
  }
}

TEST(RendezvousTest, PublishedStartFailureStopsTheWaitingRank) {
  auto store = comm::NewInMemoryStore();
  PublishStartFailure(*store, Rank(1, 2), "--data /x is a directory");
  PublishStartFailure(*store, Rank(1, 2), "a later failure is not the cause");
  Status s =
      JoinRendezvous(*store, Rank(0, 2), "test-store", milliseconds(5000));
  EXPECT_TRUE(absl::IsAborted(s)) << s;
  EXPECT_EQ(s.message(), "rank 1 failed: --data /x is a directory");
}

TEST(RendezvousTest, MissingRankTimesOutNamingIt) {
  auto store = comm::NewInMemoryStore();
  Status s =
      JoinRendezvous(*store, Rank(0, 3), "test-store", milliseconds(300));
  // Rank 0 waits for rank 1 first.
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(s.message().find("for rank 1 to join the rendezvous at test-store"),
            std::string::npos)
      << s;
}

TEST(RendezvousTest, AttemptsAndCoordinatorJobsAreApart) {
  auto store = comm::NewInMemoryStore();
  // Attempt 0 aborted; attempt 1 of the same job starts clean.
  PublishStartFailure(*store, Rank(1, 2), "attempt 0 failed");
  auto r0 = Rank(0, 2), r1 = Rank(1, 2);
  r0.restart_count = r1.restart_count = 1;
  for (const Status& s : JoinAll(*store, {r0, r1})) EXPECT_TRUE(s.ok()) << s;
  // Two jobs on the coordinator's store, each with a rank 0 and 1.
  const std::string coord = "strata://127.0.0.1:1";
  for (const Status& s :
       JoinAll(*store, {Rank(0, 2, "x", coord), Rank(1, 2, "x", coord),
                        Rank(0, 2, "y", coord), Rank(1, 2, "y", coord)})) {
    EXPECT_TRUE(s.ok()) << s;
  }
}

}  // namespace
}  // namespace strata
