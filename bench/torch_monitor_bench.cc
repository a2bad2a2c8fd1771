// strata-bench torch-monitor: the cost of strata.torch's step monitor on a
// torch DDP loop under `strata run` (2 nodes x 1 rank), with vs without in
// one run (bench/torch_monitor_peer.py, compiled in: three identical DDP
// models stepped in rotating order, one monitored; the two plain ones give
// the method's noise, "control"). Goal (docs/pytorch.md): <= 1% of step
// time. Needs torch 2.x: the venv of deploy/python-venv.sh.
//
//   strata-bench torch-monitor [--steps 2000] [--dim 384] [--runs 3]
//                              [--dir /tmp/strata-torch-monitor-bench]
//                              [--python BUILD/venv/bin/python]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/python_peer.h"
#include "bench/registry.h"

namespace strata::bench {
namespace {

// The "cost" of the peer's JSON line in `out`; false when there is none.
bool ParseCost(const std::string& out, double* cost, std::string* line) {
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    const size_t at = l.find("\"cost\": ");
    if (at == std::string::npos) continue;
    const size_t begin = at + 8;
    const size_t end = l.find_first_of(",}", begin);
    if (absl::SimpleAtod(l.substr(begin, end - begin), cost)) {
      *line = l;
      return true;
    }
  }
  return false;
}

int TorchMonitorBench(int argc, char** argv) {
  CLI::App app{"strata.torch step monitor cost on a DDP loop, with vs without"};
  std::string dir = "/tmp/strata-torch-monitor-bench";
  std::string python = STRATA_BENCH_BINARY_DIR "/venv/bin/python";
  int steps = 2000, dim = 384, runs = 3;
  app.add_option("--dir", dir, "scratch directory")->capture_default_str();
  app.add_option("--steps", steps, "steps of each model per run")
      ->check(CLI::Range(50, 100000))
      ->capture_default_str();
  app.add_option("--dim", dim, "MLP width (step time)")
      ->check(CLI::Range(16, 8192))
      ->capture_default_str();
  app.add_option("--runs", runs, "runs; the worst is reported")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
  app.add_option("--python", python,
                 "a python with torch >= 2.3 (deploy/python-venv.sh)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::string script;
  if (!WritePythonPeer("torch-monitor", python, dir, "torch_monitor_peer",
                       &script))
    return 2;
  std::error_code ec;
  const std::string bin = STRATA_BENCH_BINARY_DIR;
  const std::string venv_bin =
      std::filesystem::path(python).parent_path().string();
  double worst = -1e9;
  std::string worst_line;
  for (int r = 0; r < runs; ++r) {
    const std::string out_path = absl::StrCat(dir, "/run", r, ".out");
    const std::string cmd = absl::StrCat(
        "PYTHONPATH=", STRATA_BENCH_SOURCE_DIR, "/python STRATA_LIB=", bin,
        "/runtime/libstrata.so PATH=", venv_bin, ":", bin, "/cli:$PATH ", bin,
        "/cli/strata run --nodes 2 --ranks-per-node 1 --state-dir ", dir,
        "/state -- ", python, " ", script, " ", steps, " ", dim, " > ",
        out_path, " 2>&1");
    const int rc = std::system(cmd.c_str());
    std::ifstream in(out_path);
    std::stringstream text;
    text << in.rdbuf();
    double cost = 0;
    std::string line;
    if (rc != 0 || !ParseCost(text.str(), &cost, &line)) {
      std::fprintf(stderr, "strata-bench torch-monitor: run %d failed:\n%s\n",
                   r + 1, text.str().c_str());
      return 1;
    }
    std::printf("run %d: %s\n", r + 1, line.c_str());
    std::fflush(stdout);
    if (cost > worst) {
      worst = cost;
      worst_line = line;
    }
    std::filesystem::remove_all(dir + "/state", ec);
  }
  std::filesystem::remove(script, ec);
  std::printf(
      "\nstrata.torch monitor cost, DDP 2 nodes x 1 rank, dim %d, %d steps "
      "each, worst of %d runs (goal <= 1%%): %.2f%%\n  %s\n",
      dim, steps, runs, 100 * worst, worst_line.c_str());
  return 0;
}

}  // namespace

STRATA_BENCH("torch-monitor",
             "strata.torch step monitor cost on a DDP loop, with vs without",
             TorchMonitorBench);

}  // namespace strata::bench
