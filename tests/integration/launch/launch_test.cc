// strata-exec under a real `mpirun --oversubscribe -np 4` (Open MPI): the
// rank environment field by field, node grouping, rendezvous through
// STRATA_STORE, failure propagation, usage errors, and an unmodified
// torch.distributed gloo script. Every mpirun runs under `timeout`.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "tests/integration/cli/run_command.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;    // exit code; -1 if not a normal exit
  std::string out;  // stdout + stderr
  double seconds = 0;
};

Result Sh(const std::string& cmd) {
  const auto t0 = std::chrono::steady_clock::now();
  strata::testing::RunResult run = strata::testing::RunCommand(cmd);
  Result r;
  r.code = run.code;
  r.out = std::move(run.out);
  r.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return r;
}

std::string BinDir() {
  const char* b = std::getenv("STRATA_BINARY_DIR");
  return b ? b : ".";
}
std::string Exec() { return BinDir() + "/launch/strata-exec"; }

// mpirun as root, oversubscribed, bounded by `timeout`.
std::string Mpirun(const std::string& args, int limit_s = 120) {
  const char* m = std::getenv("MPIEXEC");
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
         "OMPI_MCA_btl_vader_single_copy_mechanism=none timeout -k 5 " +
         std::to_string(limit_s) + " " + (m && *m ? m : "mpirun") +
         " --oversubscribe --allow-run-as-root " + args;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/strata-launch-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

using Env = std::map<std::string, std::string>;

Env ReadEnv(const std::string& file) {
  Env env;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

// The command every rank runs to dump its environment into DIR/env.RANK.
std::string DumpEnv(const std::string& dir) {
  return "/bin/sh -c 'env > \"$0/env.$RANK\"' " + dir;
}

TEST(LaunchTest, EveryRankGetsThePlacementContract) {
  TempDir dir;
  Result r =
      Sh(Mpirun("-np 4 " + Exec() +
                " --tp 2 --job-id launch-test --ckpt file:///tmp/ck -- " +
                DumpEnv(dir.path())));
  ASSERT_EQ(r.code, 0) << r.out;
  std::string store, master_port;
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    Env e = ReadEnv(dir.path() + "/env." + std::to_string(rank));
    ASSERT_FALSE(e.empty());
    EXPECT_EQ(e["RANK"], std::to_string(rank));
    EXPECT_EQ(e["WORLD_SIZE"], "4");
    EXPECT_EQ(e["LOCAL_RANK"], std::to_string(rank));  // one host
    EXPECT_EQ(e["LOCAL_WORLD_SIZE"], "4");
    EXPECT_EQ(e["NODE_RANK"], "0");
    EXPECT_EQ(e["GROUP_RANK"], "0");
    EXPECT_EQ(e["GROUP_WORLD_SIZE"], "1");
    EXPECT_EQ(e["MASTER_ADDR"], "127.0.0.1");
    // Every rank on one host: the transport binds loopback.
    EXPECT_EQ(e["STRATA_NODE_ADDR"], "127.0.0.1");
    EXPECT_FALSE(e["STRATA_NODE_NAME"].empty());
    EXPECT_EQ(e["STRATA_JOB_ID"], "launch-test");
    EXPECT_EQ(e["STRATA_CKPT_URI"], "file:///tmp/ck");
    EXPECT_EQ(e["STRATA_RESTART_COUNT"], "0");
    // tp=2, dp=4/2=2: tp innermost (tp-cp-dp-pp).
    EXPECT_EQ(e["STRATA_TP"], "2");
    EXPECT_EQ(e["STRATA_DP"], "2");
    EXPECT_EQ(e["STRATA_PP"], "1");
    EXPECT_EQ(e["STRATA_CP"], "1");
    EXPECT_EQ(e["STRATA_TP_RANK"], std::to_string(rank % 2));
    EXPECT_EQ(e["STRATA_DP_RANK"], std::to_string(rank / 2));
    EXPECT_EQ(e["STRATA_PP_RANK"], "0");
    EXPECT_EQ(e["STRATA_CP_RANK"], "0");
    EXPECT_EQ(e["STRATA_STORE"].rfind("tcp://127.0.0.1:", 0), 0u)
        << e["STRATA_STORE"];
    EXPECT_GT(std::atoi(e["MASTER_PORT"].c_str()), 0);
    // The command is not the MPI process: no Open MPI / PMIx identity.
    EXPECT_EQ(e.count("OMPI_COMM_WORLD_RANK"), 0u);
    EXPECT_EQ(e.count("PMIX_RANK"), 0u);
    EXPECT_EQ(e.count("STRATA_PLAN"), 0u);
    // Job-wide values agree across ranks.
    if (rank == 0) {
      store = e["STRATA_STORE"];
      master_port = e["MASTER_PORT"];
    }
    EXPECT_EQ(e["STRATA_STORE"], store);
    EXPECT_EQ(e["MASTER_PORT"], master_port);
  }
}

TEST(LaunchTest, NodesGroupByNodeNameAndCheckpointUriIsInherited) {
  // MPMD: ranks 0 and 2 on "a", 1 and 3 on "b" (round-robin mapping).
  TempDir dir;
  std::string apps;
  for (const char* node : {"a", "b", "a", "b"}) {
    if (!apps.empty()) apps += " : ";
    apps += "-np 1 -x STRATA_CKPT_URI=file:///inherited " + Exec() +
            " --pp 2 --master-addr 127.0.0.1 --node-name " + node + " -- " +
            DumpEnv(dir.path());
  }
  Result r = Sh(Mpirun(apps));
  ASSERT_EQ(r.code, 0) << r.out;
  const int node_rank[] = {0, 1, 0, 1}, local_rank[] = {0, 0, 1, 1};
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    Env e = ReadEnv(dir.path() + "/env." + std::to_string(rank));
    EXPECT_EQ(e["NODE_RANK"], std::to_string(node_rank[rank]));
    EXPECT_EQ(e["GROUP_RANK"], std::to_string(node_rank[rank]));
    EXPECT_EQ(e["LOCAL_RANK"], std::to_string(local_rank[rank]));
    EXPECT_EQ(e["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(e["GROUP_WORLD_SIZE"], "2");
    EXPECT_EQ(e["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(e["STRATA_CKPT_URI"], "file:///inherited");
    // Two node names, one host: loopback still reaches every peer.
    EXPECT_EQ(e["STRATA_NODE_NAME"], rank % 2 == 0 ? "a" : "b");
    EXPECT_EQ(e["STRATA_NODE_ADDR"], "127.0.0.1");
    // pp=2, dp=2: dp varies before pp.
    EXPECT_EQ(e["STRATA_DP_RANK"], std::to_string(rank % 2));
    EXPECT_EQ(e["STRATA_PP_RANK"], std::to_string(rank / 2));
    EXPECT_EQ(e["STRATA_JOB_ID"].rfind("mpi-", 0), 0u) << e["STRATA_JOB_ID"];
  }
}

TEST(LaunchTest, RanksRendezvousThroughTheStore) {
  Result r = Sh(Mpirun("-np 4 " + Exec() + " -- " + BinDir() +
                       "/launch/strata_exec_store_probe"));
  ASSERT_EQ(r.code, 0) << r.out;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(r.out.find("store ok rank " + std::to_string(rank) +
                         " of 4 arrivals 4"),
              std::string::npos)
        << r.out;
  }
}

TEST(LaunchTest, AFailingRankFailsTheJobAndStopsTheOthers) {
  // Rank 2 exits 3 at once; the others would sleep for 45 s.
  Result r = Sh(Mpirun(
      "-np 4 " + Exec() +
      " -- /bin/sh -c 'if [ \"$RANK\" = 2 ]; then exit 3; fi; sleep 45.25'"));
  EXPECT_EQ(r.code, 3) << r.out;  // mpirun exits with the MPI_Abort code
  EXPECT_NE(r.out.find("rank 2: command exited with code 3"), std::string::npos)
      << r.out;
  EXPECT_LT(r.seconds, 40) << "the other ranks were not stopped";
  // No rank's command survives its strata-exec ("slee[p]" keeps the shell
  // running pgrep from matching itself).
  bool left = true;
  for (int i = 0; i < 50 && left; ++i) {
    left = Sh("pgrep -f 'slee[p] 45.25'").code == 0;
    if (left) usleep(100 * 1000);
  }
  EXPECT_FALSE(left) << "a rank's command outlived the job";
}

TEST(LaunchTest, ACommandKilledBySignalFailsTheJob) {
  Result r = Sh(
      Mpirun("-np 2 " + Exec() +
             " -- /bin/sh -c 'if [ \"$RANK\" = 1 ]; then kill -KILL $$; fi'"));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("rank 1: command exited with code 137"),
            std::string::npos)
      << r.out;
}

TEST(LaunchTest, SigtermIsForwardedToTheCommand) {
  // The command signals its strata-exec ($PPID), which must forward the
  // signal to the command's process group; the trap exits 7.
  Result r = Sh(Mpirun(
      "-np 1 " + Exec() +
      " -- /bin/sh -c 'trap \"echo got-term; exit 7\" TERM; kill -TERM $PPID; "
      "sleep 20 & wait'"));
  EXPECT_EQ(r.code, 7) << r.out;
  EXPECT_NE(r.out.find("got-term"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, 15) << r.out;
}

TEST(LaunchTest, MissingProgramFailsTheJob) {
  Result r = Sh(Mpirun("-np 2 " + Exec() + " -- /nonexistent/strata-prog"));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("cannot run '/nonexistent/strata-prog'"),
            std::string::npos)
      << r.out;
}

TEST(LaunchTest, UsageErrorsExitTwoWithAMessage) {
  Result r = Sh("timeout 30 " + Exec());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no command given"), std::string::npos) << r.out;
  r = Sh("timeout 30 " + Exec() + " --tp 2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no command given"), std::string::npos) << r.out;
  r = Sh("timeout 30 " + Exec() + " --tp zero -- true");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--tp"), std::string::npos) << r.out;
  r = Sh("timeout 30 " + Exec() + " --bogus -- true");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--bogus"), std::string::npos) << r.out;
  r = Sh("timeout 30 " + Exec() + " --pp 0 -- true");
  EXPECT_EQ(r.code, 2) << r.out;
}

TEST(LaunchTest, IndivisibleWorldSizeIsAUsageError) {
  Result r = Sh(Mpirun("-np 4 " + Exec() + " --tp 3 -- true"));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("world size 4 is not divisible by tp*pp*cp = 3"),
            std::string::npos)
      << r.out;
}

// "step=N loss=X" of strata-train's output, or NaN.
double LossAtStep(const std::string& out, int step) {
  const std::string key = "step=" + std::to_string(step) + " loss=";
  const size_t at = out.find(key);
  return at == std::string::npos ? std::nan("")
                                 : std::atof(out.c_str() + at + key.size());
}

TEST(LaunchTest, StrataTrainTakesItsLayoutFromStrataExec) {
  // The reference trainer reads tp/pp and the store from the environment
  // (Runtime::FromEnv); tp=2 pp=2 must train like one process does.
  const std::string train = BinDir() + "/runtime/strata-train";
  if (access(train.c_str(), X_OK) != 0) GTEST_SKIP() << train << " not built";
  const std::string args = " --model tiny --steps 3 --global-batch 4";
  Result single = Sh("timeout 60 " + train + args);
  ASSERT_EQ(single.code, 0) << single.out;
  Result r =
      Sh(Mpirun("-np 4 " + Exec() + " --tp 2 --pp 2 -- " + train + args));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("tp=2 pp=2 dp=1"), std::string::npos) << r.out;
  const double want = LossAtStep(single.out, 3), got = LossAtStep(r.out, 3);
  ASSERT_FALSE(std::isnan(want)) << single.out;
  EXPECT_NEAR(got, want, 1e-5 * std::abs(want)) << r.out;
}

TEST(LaunchTest, StrataTrainRefusesInterleavedNodes) {
  // Ranks 0 2 on node "a", 1 3 on "b": strata's runtime needs each node's
  // ranks in one block and says which variable disagrees.
  const std::string train = BinDir() + "/runtime/strata-train";
  if (access(train.c_str(), X_OK) != 0) GTEST_SKIP() << train << " not built";
  std::string apps;
  for (const char* node : {"a", "b", "a", "b"}) {
    if (!apps.empty()) apps += " : ";
    apps += "-np 1 " + Exec() + " --node-name " + std::string(node) + " -- " +
            train + " --model tiny --steps 1 --global-batch 4";
  }
  Result r = Sh(Mpirun(apps));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("NODE_RANK of RANK=1 is 1, but strata's runtime needs "
                       "each node's ranks in one contiguous block"),
            std::string::npos)
      << r.out;
}

TEST(LaunchTest, UnmodifiedTorchGlooScript) {
  if (Sh("/usr/bin/python3 -c 'import torch'").code != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch (apt-get install "
                    "python3-torch)";
  }
  const char* src = std::getenv("STRATA_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  Result r =
      Sh(Mpirun("-np 2 " + Exec() + " -- /usr/bin/python3 " + std::string(src) +
                    "/tests/integration/launch/torch_allreduce.py",
                180));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("torch ok rank 0 sum 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("torch ok rank 1 sum 3"), std::string::npos) << r.out;
}

}  // namespace
