// Nothing is acknowledged before it is durable, and the coordinator recovers
// by itself when its disk does:
//  - state dir on a 16 MiB tmpfs, filled: submit and `strata cancel` fail
//    non-zero naming the disk problem, the job stays PENDING (in memory and,
//    after a restart, on disk), `strata status` shows the store unwritable;
//    once the filler is deleted a submit succeeds without a restart.
//  - EIO injected into the state dir (libstrata_failio, toggled by a trigger
//    file): same contract.
// Needs root for mount(8) and the failio shim; skipped otherwise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "tests/fault/coordinator/fault_coordinator.h"

namespace strata::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

JobSpec WaitingJob(size_t command_bytes = 0) {
  JobSpec spec;
  spec.set_name("waits");
  spec.mutable_launch()->add_command("/bin/true");
  if (command_bytes > 0) {
    spec.mutable_launch()->add_command(std::string(command_bytes, 'x'));
  }
  spec.mutable_launch()->set_nodes(1);
  spec.mutable_launch()->set_worker_wait_s(3600);  // no worker: stays PENDING
  return spec;
}

StatusOr<std::string> Submit(FaultCoordinator& c, const JobSpec& spec) {
  control::Request req;
  *req.mutable_submit_job()->mutable_spec() = spec;
  auto reply = c.Call(req, 10);
  if (!reply.ok()) return reply.status();
  return reply->submit_job().job_id();
}

// Writes zeros to `path` until the file system is full.
void FillUp(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  std::string block(64 << 10, '\0');
  while (true) {
    ssize_t n = write(fd, block.data(), block.size());
    if (n <= 0) break;
  }
  // The last partial block, byte by byte in 4 KiB steps.
  std::string page(4096, '\0');
  while (write(fd, page.data(), page.size()) > 0) {
  }
  fsync(fd);
  close(fd);
}

// Submits until one succeeds; the milliseconds that took, or -1.
int64_t MsUntilSubmitSucceeds(FaultCoordinator& c, int64_t limit_ms) {
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const int64_t ms = std::chrono::duration_cast<milliseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count();
    if (ms > limit_ms) return -1;
    if (Submit(c, WaitingJob()).ok()) return ms;
    std::this_thread::sleep_for(milliseconds(50));
  }
}

class DurabilityFaultTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (mounted_) {
      c_.Kill();
      EXPECT_EQ(std::system(("umount -l " + c_.state_dir()).c_str()), 0);
    }
  }
  void MountSmallTmpfs() {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
    std::filesystem::create_directories(c_.state_dir());
    if (std::system(("mount -t tmpfs -o size=16m tmpfs " + c_.state_dir() +
                     " 2>/dev/null")
                        .c_str()) != 0) {
      GTEST_SKIP() << "mount -t tmpfs is not permitted here";
    }
    mounted_ = true;
  }

  FaultCoordinator c_;
  bool mounted_ = false;
};

TEST_F(DurabilityFaultTest, FullDiskRefusesCancelAndRecoversWithoutRestart) {
  MountSmallTmpfs();
  if (IsSkipped()) return;
  c_.Start();
  ASSERT_TRUE(c_.WaitUp()) << c_.Log();
  auto job = Submit(c_, WaitingJob());
  ASSERT_TRUE(job.ok()) << job.status();

  const std::string filler = c_.state_dir() + "/filler";
  FillUp(filler);
  // A write that needs new pages: refused, nothing stored.
  auto big = Submit(c_, WaitingJob(60 << 10));
  ASSERT_FALSE(big.ok()) << "a submit was acknowledged on a full disk";
  EXPECT_NE(big.status().message().find("No space left on device"),
            std::string::npos)
      << big.status();

  RunResult cancel = c_.Strata("cancel " + *job);
  EXPECT_NE(cancel.code, 0) << cancel.out;
  EXPECT_EQ(cancel.out.find("cancelled"), std::string::npos) << cancel.out;
  EXPECT_NE(cancel.out.find("ENOSPC"), std::string::npos) << cancel.out;
  EXPECT_NE(cancel.out.find(c_.state_dir()), std::string::npos) << cancel.out;
  // Memory did not run ahead of the disk.
  RunResult status = c_.Strata("status " + *job);
  EXPECT_NE(status.out.find("PENDING"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("COORDINATOR STATE NOT WRITABLE"),
            std::string::npos)
      << status.out;
  EXPECT_NE(c_.Log().find("is not writable"), std::string::npos) << c_.Log();

  // Space returns: writes work again without a restart.
  ASSERT_EQ(unlink(filler.c_str()), 0);
  const int64_t recovery_ms = MsUntilSubmitSucceeds(c_, 15000);
  std::printf("submit succeeded %lld ms after the filler was deleted\n",
              static_cast<long long>(recovery_ms));
  ASSERT_GE(recovery_ms, 0) << c_.Log();
  status = c_.Strata("status");
  EXPECT_EQ(status.out.find("NOT WRITABLE"), std::string::npos) << status.out;

  // What is on disk is what was acknowledged.
  c_.Kill();
  c_.Start();
  auto after = c_.Job(*job);
  ASSERT_TRUE(after.ok()) << after.status() << c_.Log();
  EXPECT_EQ(after->state(), control::PENDING) << after->message();
  control::Request list;
  list.mutable_list_jobs();
  auto jobs = c_.Call(list);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->jobs().jobs_size(), 2);  // the first and the recovery one
  // And the cancel goes through now.
  cancel = c_.Strata("cancel " + *job);
  EXPECT_EQ(cancel.code, 0) << cancel.out;
}

TEST_F(DurabilityFaultTest, InjectedEioRefusesCancelAndRecovers) {
  const char* failio = std::getenv("STRATA_FAILIO_LIB");
  if (failio == nullptr || !std::filesystem::exists(failio)) {
    GTEST_SKIP() << "STRATA_FAILIO_LIB (libstrata_failio.so) not available";
  }
  const std::string trigger = c_.dir() + "/fail-now";
  c_.Start({},
           {absl::StrCat("LD_PRELOAD=", failio),
            "STRATA_FAILIO_PATH=" + c_.state_dir(), "STRATA_FAILIO_ERRNO=EIO",
            "STRATA_FAILIO_TRIGGER=" + trigger, "STRATA_FAILIO_QUIET=1"});
  ASSERT_TRUE(c_.WaitUp()) << c_.Log();
  auto job = Submit(c_, WaitingJob());
  ASSERT_TRUE(job.ok()) << job.status();

  std::ofstream(trigger) << "on\n";
  RunResult cancel = c_.Strata("cancel " + *job);
  EXPECT_NE(cancel.code, 0) << cancel.out;
  EXPECT_EQ(cancel.out.find("cancelled"), std::string::npos) << cancel.out;
  EXPECT_NE(cancel.out.find("EIO"), std::string::npos) << cancel.out;
  RunResult status = c_.Strata("status " + *job);
  EXPECT_NE(status.out.find("PENDING"), std::string::npos) << status.out;
  RunResult workers = c_.Strata("workers");
  EXPECT_NE(workers.out.find("COORDINATOR STATE NOT WRITABLE"),
            std::string::npos)
      << workers.out;

  ASSERT_EQ(unlink(trigger.c_str()), 0);
  const int64_t recovery_ms = MsUntilSubmitSucceeds(c_, 15000);
  std::printf("submit succeeded %lld ms after the EIO stopped\n",
              static_cast<long long>(recovery_ms));
  ASSERT_GE(recovery_ms, 0) << c_.Log();
  std::this_thread::sleep_for(milliseconds(300));  // a few ticks

  c_.Kill();
  c_.Start();  // without the shim
  auto after = c_.Job(*job);
  ASSERT_TRUE(after.ok()) << after.status() << c_.Log();
  EXPECT_EQ(after->state(), control::PENDING) << after->message();
}

}  // namespace
}  // namespace strata::testing
