#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "bench/registry.h"

namespace strata::bench {
namespace {
std::map<std::string, std::pair<const char*, BenchMain>>& Registry() {
  static auto* r = new std::map<std::string, std::pair<const char*, BenchMain>>;
  return *r;
}
}  // namespace

BenchRegistration::BenchRegistration(const char* name, const char* help,
                                     BenchMain fn) {
  Registry()[name] = {help, fn};
}

}  // namespace strata::bench

int main(int argc, char** argv) {
  auto& reg = strata::bench::Registry();
  if (argc < 2 || !reg.count(argv[1])) {
    std::fprintf(stderr, "usage: strata-bench <benchmark> [args]\n");
    for (const auto& [name, entry] : reg) {
      std::fprintf(stderr, "  %-8s %s\n", name.c_str(), entry.first);
    }
    return argc < 2 ? 2 : (std::strcmp(argv[1], "--help") == 0 ? 0 : 2);
  }
  return reg[argv[1]].second(argc - 1, argv + 1);
}
