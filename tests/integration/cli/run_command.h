// Runs a shell command or the built `strata` binary for CLI tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace strata::testing {

struct RunResult {
  int code = -1;    // exit code, -1 if it did not exit normally
  std::string out;  // stdout and stderr together
};

inline RunResult RunCommand(const std::string& cmd) {
  RunResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
    r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A binary of this build by its path under the build directory (ctest sets
// STRATA_BINARY_DIR), e.g. "cli/strata".
inline std::string BuildBinary(const std::string& path) {
  const char* bin = std::getenv("STRATA_BINARY_DIR");
  return std::string(bin ? bin : ".") + "/" + path;
}
inline std::string StrataBinary() { return BuildBinary("cli/strata"); }
// strata-train: $STRATA_TRAIN when set, else this build's.
inline std::string TrainBinary() {
  if (const char* b = std::getenv("STRATA_TRAIN")) return b;
  return BuildBinary("runtime/strata-train");
}

inline RunResult RunStrata(const std::string& args) {
  return RunCommand(StrataBinary() + " " + args);
}

}  // namespace strata::testing
