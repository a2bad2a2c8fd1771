// torchrun's command-line form for `strata run` / `strata submit`
// (cli/torchrun_args.h): a table of command lines and what they become.
#include "cli/torchrun_args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace strata::cli {
namespace {

std::string Translate(const std::string& line) {
  std::vector<std::string> args =
      line.empty() ? std::vector<std::string>{}
                   : std::vector<std::string>(absl::StrSplit(line, ' '));
  auto out = TranslateTorchrunArgs(args);
  if (!out.ok()) return "ERROR " + std::string(out.status().message());
  return absl::StrJoin(*out, " ");
}

TEST(TorchrunArgsTest, TorchrunFormBecomesStrataForm) {
  struct Case {
    const char* in;
    const char* out;
  } cases[] = {
      {"--nnodes 2 --nproc-per-node 2 train.py --lr 3e-4",
       "--nodes 2 --ranks-per-node 2 -- python3 train.py --lr 3e-4"},
      {"--nnodes=2 --nproc_per_node=4 train.py",
       "--nodes 2 --ranks-per-node 4 -- python3 train.py"},
      {"--standalone --nproc-per-node 2 -m pkg.train --steps 10",
       "--ranks-per-node 2 -- python3 -m pkg.train --steps 10"},
      {"--nnodes 1:3 --max_restarts 2 train.py",
       "--nodes 3 --min-nodes 1 --max-restarts 2 -- python3 train.py"},
      {"--nproc-per-node auto train.py", "-- python3 train.py"},
      {"--no-python --nnodes 2 ./train.sh -x", "--nodes 2 -- ./train.sh -x"},
      // strata's own flags pass through, values included.
      {"--ckpt file:///tmp/c --env A=1 --nnodes 2 train.py",
       "--ckpt file:///tmp/c --env A=1 --nodes 2 -- python3 train.py"},
      // The script's own flags are its, even torchrun's names.
      {"train.py --nnodes 7 --rdzv-backend c10d",
       "-- python3 train.py --nnodes 7 --rdzv-backend c10d"},
      // torchrun flags with strata's `--` form.
      {"--nnodes 2 -- python3 x.py", "--nodes 2 -- python3 x.py"},
  };
  for (const auto& c : cases) EXPECT_EQ(Translate(c.in), c.out) << c.in;
}

TEST(TorchrunArgsTest, StrataFormIsUnchanged) {
  for (const char* line : {"--nodes 2 --ranks-per-node 2 -- python3 x.py",
                           "job.yaml --nodes 2", "deploy/demo.yaml", "",
                           "--tp 2 job.json"}) {
    EXPECT_EQ(Translate(line), line);
  }
}

TEST(TorchrunArgsTest, UnsupportedFlagsAreNamed) {
  struct Case {
    const char* in;
    const char* says;
  } cases[] = {
      {"--rdzv-backend c10d --nnodes 2 train.py",
       "torchrun flag --rdzv-backend is not supported"},
      {"--rdzv_endpoint h:29400 train.py", "--rdzv_endpoint is not supported"},
      {"--node-rank 1 train.py", "--node-rank is not supported"},
      {"--master_port=29500 train.py", "--master_port is not supported"},
      {"-r 3 train.py", "-r (--redirects) is not supported"},
      {"--nnodes x train.py", "--nnodes: 'x' is not N or MIN:MAX"},
      {"--nnodes 3:1 train.py", "is not N or MIN:MAX"},
      {"--nproc-per-node cpu train.py", "'cpu' is not a count of ranks"},
      {"--nproc-per-node 0 train.py", "'0' is not a count of ranks"},
      {"--nnodes", "--nnodes: needs a value"},
      {"-m", "-m: needs a module name"},
      {"--no-python -m pkg", "-m: cannot be combined with --no-python"},
  };
  for (const auto& c : cases) {
    const std::string out = Translate(c.in);
    EXPECT_NE(out.find(c.says), std::string::npos) << c.in << " -> " << out;
    EXPECT_TRUE(out.starts_with("ERROR")) << c.in << " -> " << out;
  }
}

}  // namespace
}  // namespace strata::cli
