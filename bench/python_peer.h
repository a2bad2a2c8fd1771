// The Python peers strata-bench runs (bench/*.py, compiled in by
// bench/CMakeLists.txt as kBenchScripts): looked up by name and written
// into the run's scratch directory.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/embedded.h"

namespace strata {
extern const EmbeddedFile kBenchScripts[];
extern const int kBenchScripts_count;
}  // namespace strata

namespace strata::bench {

// The text of bench/NAME.py; nullptr when it is not compiled in.
inline const char* BenchScript(const std::string& name) {
  for (int i = 0; i < kBenchScripts_count; ++i) {
    if (name == kBenchScripts[i].name) return kBenchScripts[i].contents;
  }
  return nullptr;
}

// Checks that `python` is executable, creates `dir` and writes bench/NAME.py
// there as *script. On failure prints "strata-bench BENCH: ..." (naming the
// python or the directory) and returns false: the bench exits 2.
inline bool WritePythonPeer(const char* bench, const std::string& python,
                            const std::string& dir, const std::string& name,
                            std::string* script) {
  if (access(python.c_str(), X_OK) != 0) {
    std::fprintf(stderr,
                 "strata-bench %s: no python at %s: run "
                 "deploy/python-venv.sh or give --python\n",
                 bench, python.c_str());
    return false;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "strata-bench %s: cannot create %s: %s\n", bench,
                 dir.c_str(), ec.message().c_str());
    return false;
  }
  *script = dir + "/" + name + ".py";
  std::ofstream(*script) << BenchScript(name);
  return true;
}

}  // namespace strata::bench
