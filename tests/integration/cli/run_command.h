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

// The `strata` binary of this build (ctest sets STRATA_BINARY_DIR).
inline std::string StrataBinary() {
  const char* bin = std::getenv("STRATA_BINARY_DIR");
  return std::string(bin ? bin : ".") + "/cli/strata";
}

inline RunResult RunStrata(const std::string& args) {
  return RunCommand(StrataBinary() + " " + args);
}

}  // namespace strata::testing
