// strata-bench subcommands register themselves with STRATA_BENCH(name, fn):
// `strata-bench <name> [args...]` calls fn(argc, argv) with argv[0] = name.
// Each benchmark runs its peer (Open MPI, torch.save, the raw disk, ...) in
// the same run and prints the ratio.
#pragma once

namespace strata::bench {

using BenchMain = int (*)(int argc, char** argv);

struct BenchRegistration {
  BenchRegistration(const char* name, const char* help, BenchMain fn);
};

}  // namespace strata::bench

#define STRATA_BENCH(name, help, fn) \
  static ::strata::bench::BenchRegistration strata_bench_##fn(name, help, fn)
