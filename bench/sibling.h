// Where strata-bench finds the other strata binaries: next to itself, then
// in the build tree's <subdir>/ (bench/../<subdir>/<name>), else by PATH.
#pragma once

#include <limits.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace strata::bench {

inline std::string FindSibling(const std::string& name,
                               const std::string& subdir) {
  char self[PATH_MAX] = {0};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::filesystem::path dir = n > 0 ? std::filesystem::path(self).parent_path()
                                    : std::filesystem::path(".");
  for (auto p : {dir / name, dir.parent_path() / subdir / name}) {
    if (access(p.c_str(), X_OK) == 0) return p.string();
  }
  return name;
}

}  // namespace strata::bench
