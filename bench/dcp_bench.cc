// strata-bench dcp: torch.distributed.checkpoint's async_save through
// strata.torch.StorageWriter vs DCP's FileSystemWriter (synchronous and
// asynchronous) and torch.save on the same >= 1 GiB state (bench/dcp_peer.py,
// compiled in). Goals (docs/pytorch.md): the training stall <= 1/20 of
// FileSystemWriter's synchronous save, persisting >= 80% of the disk's rate.
// Needs torch 2.x: the venv of deploy/python-venv.sh (--python).
//
//   strata-bench dcp [--dir /tmp/strata-dcp-bench] [--gib 1] [--runs 3]
//                    [--python BUILD/venv/bin/python]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/python_peer.h"
#include "bench/registry.h"

namespace strata::bench {
namespace {

int DcpBench(int argc, char** argv) {
  CLI::App app{"DCP async_save on strata vs FileSystemWriter and torch.save"};
  std::string dir = "/tmp/strata-dcp-bench";
  std::string python = STRATA_BENCH_BINARY_DIR "/venv/bin/python";
  double gib = 1.0;
  int runs = 3;
  app.add_option("--dir", dir, "scratch directory (on the disk to measure)")
      ->capture_default_str();
  app.add_option("--gib", gib, "state size in GiB")
      ->check(CLI::Range(0.01, 64.0))
      ->capture_default_str();
  app.add_option("--runs", runs, "runs; the worst is reported")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
  app.add_option("--python", python,
                 "a python with torch >= 2.3 (deploy/python-venv.sh)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::string script;
  if (!WritePythonPeer("dcp", python, dir, "dcp_peer", &script)) return 2;
  std::error_code ec;
  const std::string cmd = absl::StrCat(
      "PYTHONPATH=", STRATA_BENCH_SOURCE_DIR,
      "/python STRATA_LIB=", STRATA_BENCH_BINARY_DIR, "/runtime/libstrata.so ",
      python, " ", script, " ", dir, " ", gib, " ", runs);
  const int rc = std::system(cmd.c_str());
  std::filesystem::remove(script, ec);
  return rc == 0 ? 0 : 1;
}

}  // namespace

STRATA_BENCH("dcp",
             "DCP async_save on strata vs FileSystemWriter and torch.save",
             DcpBench);

}  // namespace strata::bench
