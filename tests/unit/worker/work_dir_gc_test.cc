// WorkDirGc over a real temporary directory, with a fake clock and a fake
// rank runner: ended jobs' dirs go after the retention time or beyond the
// count cap, oldest first; held jobs, non-job entries and symlinks stay.
#include "worker/work_dir_gc.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"

namespace strata::worker {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kHour = 3600 * 1000;

class HeldJobs : public RankRunner {
 public:
  std::set<std::string> jobs;
  void Launch(const control::RankLaunch&) override {}
  void Stop(const std::string&, int64_t) override {}
  void Poll() override {}
  std::vector<control::RankReport> Reports() const override {
    std::vector<control::RankReport> out;
    for (const auto& j : jobs) {
      out.emplace_back().set_job_id(j);
    }
    return out;
  }
  std::vector<control::LogChunk> CollectLogs(size_t) override { return {}; }
  void CommitLogs() override {}
  bool TakeDirty() override { return false; }
  int running() const override { return static_cast<int>(jobs.size()); }
};

class WorkDirGcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("strata-gc-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // <dir>/<job>/attempt-0/rank-0.stdout, every part last modified at
  // `wall_ms` (the fake clock's wall time scale).
  void MakeJob(const std::string& job, int64_t wall_ms) {
    const fs::path a = dir_ / job / "attempt-0";
    fs::create_directories(a);
    std::ofstream(a / "rank-0.stdout") << "out\n";
    for (const fs::path& p : {a / "rank-0.stdout", a, dir_ / job}) SetMtime(p, wall_ms);
  }
  static void SetMtime(const fs::path& p, int64_t wall_ms) {
    timespec t[2];
    t[0].tv_sec = t[1].tv_sec = wall_ms / 1000;
    t[0].tv_nsec = t[1].tv_nsec = (wall_ms % 1000) * 1000000;
    ASSERT_EQ(utimensat(AT_FDCWD, p.c_str(), t, AT_SYMLINK_NOFOLLOW), 0) << p;
  }
  bool Exists(const std::string& name) {
    return fs::exists(fs::symlink_status(dir_ / name));
  }

  fs::path dir_;
  FakeClock clock_{1'000'000'000'000};  // wall ms, a date in 2001
  HeldJobs runner_;
};

TEST_F(WorkDirGcTest, EndedJobsGoAfterTheRetentionHeldOnesNever) {
  const int64_t now = clock_.NowMs();
  MakeJob("job-1", now - 30 * kHour);  // ended, old
  MakeJob("job-2", now - 1 * kHour);   // ended, recent
  MakeJob("job-3", now - 40 * kHour);  // old but still held
  runner_.jobs = {"job-3"};
  std::ostringstream lines;
  auto logger = std::make_shared<spdlog::logger>(
      "gc-test", std::make_shared<spdlog::sinks::ostream_sink_mt>(lines));
  logger->set_level(spdlog::level::info);
  WorkDirGc gc(&clock_, dir_.string(), &runner_,
               {.retention_ms = 24 * kHour, .max_ended_jobs = 100}, logger);
  EXPECT_EQ(gc.Tick(), 1);
  EXPECT_FALSE(Exists("job-1"));
  EXPECT_NE(lines.str().find("removed " + (dir_ / "job-1").string() +
                             " (ended job, last written 108000 s ago; "
                             "retention 86400 s)"),
            std::string::npos)
      << lines.str();
  EXPECT_TRUE(Exists("job-2"));
  EXPECT_TRUE(Exists("job-3"));
  // Within the sweep interval nothing is looked at, even once job-2 ages.
  clock_.Advance(30 * 1000);
  clock_.AdvanceWall(24 * kHour);
  EXPECT_EQ(gc.Tick(), 0);
  EXPECT_TRUE(Exists("job-2"));
  clock_.Advance(31 * 1000);
  EXPECT_EQ(gc.Tick(), 1);
  EXPECT_FALSE(Exists("job-2"));
  // job-3 ends: it goes at the next sweep (its files are older than the
  // retention).
  runner_.jobs.clear();
  EXPECT_EQ(gc.Sweep(), 1);
  EXPECT_FALSE(Exists("job-3"));
}

TEST_F(WorkDirGcTest, BeyondTheCountCapTheOldestGoFirst) {
  const int64_t now = clock_.NowMs();
  for (int j = 1; j <= 6; ++j) MakeJob("job-" + std::to_string(j), now - j * 1000);
  runner_.jobs = {"job-6"};  // the oldest, but held
  WorkDirGc gc(&clock_, dir_.string(), &runner_,
               {.retention_ms = 24 * kHour, .max_ended_jobs = 2},
               GetLogger("WORKER"));
  EXPECT_EQ(gc.Sweep(), 3);
  for (const char* kept : {"job-1", "job-2", "job-6"}) EXPECT_TRUE(Exists(kept)) << kept;
  for (const char* gone : {"job-3", "job-4", "job-5"}) EXPECT_FALSE(Exists(gone)) << gone;
}

TEST_F(WorkDirGcTest, OnlyRealJobDirectoriesAndNeverThroughSymlinks) {
  const int64_t old = clock_.NowMs() - 48 * kHour;
  // A directory outside the work dir that a symlink named like a job points
  // at, and a symlink inside an ended job's dir pointing at it too.
  const fs::path outside = dir_.string() + "-outside";
  fs::create_directories(outside);
  std::ofstream(outside / "precious") << "keep\n";
  fs::create_directory_symlink(outside, dir_ / "job-7");
  MakeJob("job-8", old);
  fs::create_directory_symlink(outside, dir_ / "job-8" / "attempt-0" / "link");
  SetMtime(dir_ / "job-8" / "attempt-0" / "link", old);
  SetMtime(dir_ / "job-8" / "attempt-0", old);
  fs::create_directories(dir_ / "notajob");
  fs::create_directories(dir_ / "job-x");
  std::ofstream(dir_ / "job-9") << "a file named like a job\n";
  for (const char* p : {"notajob", "job-x", "job-9"}) SetMtime(dir_ / p, old);
  WorkDirGc gc(&clock_, dir_.string(), &runner_,
               {.retention_ms = kHour, .max_ended_jobs = 100},
               GetLogger("WORKER"));
  EXPECT_EQ(gc.Sweep(), 1);
  EXPECT_FALSE(Exists("job-8"));
  for (const char* kept : {"job-7", "notajob", "job-x", "job-9"})
    EXPECT_TRUE(Exists(kept)) << kept;
  EXPECT_TRUE(fs::exists(outside / "precious"));
  fs::remove_all(outside);
}

TEST_F(WorkDirGcTest, AMissingWorkDirIsNotAnError) {
  WorkDirGc gc(&clock_, (dir_ / "absent").string(), &runner_, {},
               GetLogger("WORKER"));
  EXPECT_EQ(gc.Sweep(), 0);
}

}  // namespace
}  // namespace strata::worker
