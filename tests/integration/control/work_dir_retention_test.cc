// A real strata-worker cleans its work dir at start-up: an ended job's
// directory older than --job-dir-retention-s goes, a recent one, entries
// that are not job directories and a symlink named like a job stay. The
// worker needs no coordinator for this (it keeps retrying one that is not
// there). The removal's log line (info, below the worker's default level)
// is checked by tests/unit/worker/work_dir_gc_test.cc.
#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"
#include "tests/integration/control/process_util.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

void Age(const fs::path& p, int64_t seconds) {
  timespec t[2];
  t[0].tv_sec = t[1].tv_sec = time(nullptr) - seconds;
  t[0].tv_nsec = t[1].tv_nsec = 0;
  ASSERT_EQ(utimensat(AT_FDCWD, p.c_str(), t, AT_SYMLINK_NOFOLLOW), 0) << p;
}

TEST(WorkDirRetentionTest, TheWorkerRemovesOldEndedJobDirs) {
  const char* bin = std::getenv("STRATA_BINARY_DIR");
  const std::string dir = "/tmp/strata-retention-" + std::to_string(getpid());
  fs::remove_all(dir);
  const fs::path work = dir + "/work";
  fs::create_directories(work / "job-1" / "attempt-0");
  fs::create_directories(work / "job-2" / "attempt-0");
  fs::create_directories(dir + "/elsewhere");
  std::ofstream(dir + "/elsewhere/keep") << "x\n";
  fs::create_directory_symlink(dir + "/elsewhere", work / "job-3");
  fs::permissions(work, fs::perms::owner_all);
  std::ofstream(work / "job-1" / "attempt-0" / "rank-0.stdout") << "old\n";
  std::ofstream(work / "job-2" / "attempt-0" / "rank-0.stdout") << "new\n";
  for (const fs::path& p :
       {work / "job-1" / "attempt-0" / "rank-0.stdout",
        work / "job-1" / "attempt-0", work / "job-1"}) {
    Age(p, 2 * 3600);
  }
  Age(work / "job-3", 2 * 3600);
  const pid_t worker =
      Spawn({std::string(bin ? bin : ".") + "/worker/strata-worker",
             "--coordinator", "ipc://" + dir + "/nobody.sock", "--node-name",
             "n0", "--work-dir", work.string(), "--job-dir-retention-s",
             "3600"},
            dir + "/worker.log");
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gone = !fs::exists(work / "job-1");
  }
  std::stringstream log;
  KillAndReap(worker);
  log << std::ifstream(dir + "/worker.log").rdbuf();
  EXPECT_TRUE(gone) << log.str();
  EXPECT_TRUE(fs::exists(work / "job-2" / "attempt-0" / "rank-0.stdout"));
  EXPECT_TRUE(fs::is_symlink(work / "job-3"));
  EXPECT_TRUE(fs::exists(dir + "/elsewhere/keep"));
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace strata::testing
