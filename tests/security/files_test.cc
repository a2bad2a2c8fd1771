// Finding 4 of issue 30 (files another local user can plant): the worker's
// work dir, the files it writes there, and the flight recorders. Cases that
// need a second user run as root and plant as `nobody` (setpriv, or chown);
// they are skipped when not root.
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "comm/flight_recorder.h"
#include "worker/flight_reader.h"
#include "worker/private_dir.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("strata-sec-files-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string Slurp(const std::string& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
  static uid_t Nobody() {
    struct passwd* pw = getpwnam("nobody");
    return pw != nullptr ? pw->pw_uid : 65534;
  }
  fs::path dir_;
};

TEST_F(FilesTest, WorkDirIsCreatedPrivate) {
  const std::string wd = (dir_ / "strata-dn1").string();
  ASSERT_TRUE(worker::MakePrivateDir(wd).ok());
  struct stat st;
  ASSERT_EQ(lstat(wd.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // An existing one of ours that others could read is narrowed.
  chmod(wd.c_str(), 0755);
  ASSERT_TRUE(worker::MakePrivateDir(wd).ok());
  ASSERT_EQ(lstat(wd.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(FilesTest, PlantedWorkDirIsRefused) {
  // Writable by others: refused.
  const std::string open_dir = (dir_ / "open").string();
  mkdir(open_dir.c_str(), 0777);
  chmod(open_dir.c_str(), 0777);
  Status s = worker::MakePrivateDir(open_dir);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("writable by group or others"), std::string::npos);
  // A symlink to a directory elsewhere: refused.
  const std::string link = (dir_ / "link").string();
  fs::create_directory_symlink(dir_ / "open", link);
  s = worker::MakePrivateDir(link);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("symlink"), std::string::npos);
  if (geteuid() != 0) GTEST_SKIP() << "needs root to plant as nobody";
  // The attack: `nobody` pre-made $TMPDIR/strata-<node>.
  const std::string theirs = (dir_ / "strata-dn1").string();
  mkdir(theirs.c_str(), 0700);
  ASSERT_EQ(chown(theirs.c_str(), Nobody(), Nobody()), 0);
  s = worker::MakePrivateDir(theirs);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("not by this worker's uid"), std::string::npos);
}

TEST_F(FilesTest, PlanFileReplacesAPlantedSymlinkInsteadOfFollowingIt) {
  const std::string victim = (dir_ / "victim").string();
  std::ofstream(victim) << "precious";
  const std::string plan = (dir_ / "plan.json").string();
  ASSERT_EQ(symlink(victim.c_str(), plan.c_str()), 0);
  ASSERT_TRUE(worker::WritePrivateFile(plan, "{\"plan\":1}").ok());
  EXPECT_EQ(Slurp(victim), "precious");
  EXPECT_EQ(Slurp(plan), "{\"plan\":1}");
  struct stat st;
  ASSERT_EQ(lstat(plan.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(FilesTest, RecorderIsNeverAPlantedFile) {
  const std::string path = (dir_ / "fr").string();
  const std::string victim = (dir_ / "victim").string();
  std::ofstream(victim) << "precious";
  // The old predictable temporary name, and the final name, pre-planted.
  ASSERT_EQ(symlink(victim.c_str(),
                    (path + ".tmp." + std::to_string(getpid())).c_str()),
            0);
  auto rec = comm::FlightRecorder::Create(path, "job-1", 0, 16);
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(Slurp(victim), "precious");
  struct stat st;
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
}

TEST_F(FilesTest, ReaderRefusesFifoSymlinkForeignAndMismatchedRecorders) {
  const int pid = 4242;
  const comm::FrExpect expect{"job-9", 1, pid, geteuid()};
  // A FIFO where the recorder should be: refused at once, never blocking.
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0666), 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = comm::ReadFlightRecorder(fifo, &expect);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("not a regular file"), std::string::npos);
  // A symlink: refused.
  const std::string real = (dir_ / "real").string();
  ASSERT_TRUE(comm::FlightRecorder::Create(real, "job-9", 1, 8).ok());
  const std::string link = (dir_ / "link").string();
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  r = comm::ReadFlightRecorder(link, &expect);
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  // A recorder whose header names another pid (a forged one): refused.
  r = comm::ReadFlightRecorder(real, &expect);
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("header says"), std::string::npos);
  const comm::FrExpect mine{"job-9", 1, getpid(), geteuid()};
  EXPECT_TRUE(comm::ReadFlightRecorder(real, &mine).ok());
  if (geteuid() != 0) GTEST_SKIP() << "needs root to plant as nobody";
  ASSERT_EQ(chown(real.c_str(), Nobody(), Nobody()), 0);
  r = comm::ReadFlightRecorder(real, &mine);
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("owned by uid"), std::string::npos);
}

// The worker's reader of a hung rank (flight_reader.h) goes through the
// same checks: a FIFO at the rank's recorder name costs nothing.
TEST_F(FilesTest, WorkerFlightReadNeverBlocksOnAFifo) {
  const int pid = 999999;
  const std::string path = comm::FlightRecorderPath("job-sec-fifo", 0, pid);
  unlink(path.c_str());
  ASSERT_EQ(mkfifo(path.c_str(), 0666), 0);
  const auto t0 = std::chrono::steady_clock::now();
  control::RankTrace t = worker::ReadRankTrace("job-sec-fifo", 0, 0, pid);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_NE(t.error().find("not a regular file"), std::string::npos)
      << t.error();
  unlink(path.c_str());
}

}  // namespace
}  // namespace strata
