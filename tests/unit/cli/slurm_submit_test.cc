// SubmitViaSlurm against a fake `sbatch` (a shell script recording its
// arguments and the submitted script). The real Slurm run is
// tests/integration/slurm/slurm_test.sh.
#include "cli/slurm_submit.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace strata::cli {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class SlurmSubmitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/strata-slurm-submit-XXXXXX";
    dir_ = mkdtemp(tmpl);
    job_ = dir_ / "job's.yaml";  // a quote in the path must survive
    std::ofstream(job_) << "name: t\nlaunch:\n  command: [\"true\"]\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A fake sbatch that records argv and prints `reply`, exiting `code`.
  std::string FakeSbatch(const std::string& reply, int code) {
    const fs::path p = dir_ / "sbatch";
    std::ofstream(p) << "#!/bin/sh\nprintf '%s\\n' \"$@\" > " << (dir_ / "args")
                     << "\necho '" << reply << "'\nexit " << code << "\n";
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  }

  fs::path dir_, job_;
};

TEST_F(SlurmSubmitTest, ScriptCarriesTheParameters) {
  SlurmSubmitOptions o;
  o.job_file = job_.string();
  o.ranks_per_node = 4;
  o.port = 23456;
  o.bin_dir = "/opt/strata/bin";
  auto s = RenderSlurmScript(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NE(
      s->find("export STRATA_JOB_YAML='" + dir_.string() + "/job'\\''s.yaml'"),
      std::string::npos)
      << *s;
  EXPECT_NE(s->find("export STRATA_RANKS_PER_NODE='4'"), std::string::npos);
  EXPECT_NE(s->find("export STRATA_PORT='23456'"), std::string::npos);
  EXPECT_NE(s->find("export STRATA_BIN_DIR='/opt/strata/bin'"),
            std::string::npos);
  // Parameters come after every #SBATCH line (sbatch stops reading
  // directives at the first command).
  EXPECT_LT(s->rfind("#SBATCH"), s->find("export STRATA_JOB_YAML"));
  EXPECT_EQ(s->rfind("#!/usr/bin/env bash", 0), 0u);
}

TEST_F(SlurmSubmitTest, SubmitsAndParsesTheJobId) {
  SlurmSubmitOptions o;
  o.job_file = job_.string();
  o.nodes = 2;
  o.work_dir = (dir_ / "work").string();
  o.sbatch_args = {"--partition=gpu"};
  o.sbatch = FakeSbatch("Submitted batch job 4242", 0);
  auto sub = SubmitViaSlurm(o);
  ASSERT_TRUE(sub.ok()) << sub.status();
  EXPECT_EQ(sub->slurm_job_id, "4242");
  EXPECT_EQ(sub->exit_code, 0);
  EXPECT_EQ(sub->script, (dir_ / "work" / "strata.sbatch").string());
  EXPECT_NE(Slurp(sub->script).find("STRATA_JOB_YAML"), std::string::npos);
  const std::string args = Slurp(dir_ / "args");
  EXPECT_NE(args.find("--nodes=2\n"), std::string::npos) << args;
  EXPECT_NE(args.find("--partition=gpu\n"), std::string::npos) << args;
  EXPECT_NE(
      args.find("--output=" + (dir_ / "work").string() + "/strata-%j.out"),
      std::string::npos)
      << args;
  EXPECT_EQ(args.find("--wait"), std::string::npos) << args;
  EXPECT_NE(args.find(sub->script + "\n"), std::string::npos) << args;
}

TEST_F(SlurmSubmitTest, WaitReturnsTheJobsExitCode) {
  SlurmSubmitOptions o;
  o.job_file = job_.string();
  o.work_dir = (dir_ / "work").string();
  o.wait = true;
  o.sbatch = FakeSbatch("Submitted batch job 7", 1);
  auto sub = SubmitViaSlurm(o);
  ASSERT_TRUE(sub.ok()) << sub.status();
  EXPECT_EQ(sub->exit_code, 1);
  EXPECT_NE(Slurp(dir_ / "args").find("--wait\n"), std::string::npos);
}

TEST_F(SlurmSubmitTest, ErrorsNameTheProblem) {
  SlurmSubmitOptions o;
  o.work_dir = (dir_ / "work").string();
  EXPECT_EQ(SubmitViaSlurm(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.job_file = (dir_ / "missing.yaml").string();
  auto missing = SubmitViaSlurm(o);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("missing.yaml"), std::string::npos);
  o.job_file = job_.string();
  o.sbatch = (dir_ / "no-such-sbatch").string();
  EXPECT_EQ(SubmitViaSlurm(o).status().code(),
            absl::StatusCode::kFailedPrecondition);
  o.sbatch = FakeSbatch("sbatch: error: Slurm controller not responding", 1);
  auto down = SubmitViaSlurm(o);
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(down.status().message().find("not responding"), std::string::npos);
  o.port = 70000;
  EXPECT_EQ(SubmitViaSlurm(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::cli
