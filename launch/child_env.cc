#include "launch/child_env.h"

#include <string_view>

namespace strata::launch {

std::vector<std::string> ChildEnvironment(
    const std::vector<std::string>& inherited, const placement::EnvMap& vars) {
  auto dropped = [&](std::string_view name) {
    return name.starts_with("OMPI_") || name.starts_with("PMIX_") ||
           name == placement::kPlan || name == placement::kTelemetry ||
           vars.count(std::string(name)) > 0;
  };
  std::vector<std::string> out;
  for (const std::string& kv : inherited) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || dropped(std::string_view(kv).substr(0, eq)))
      continue;
    out.push_back(kv);
  }
  for (const auto& [k, val] : vars) out.push_back(k + "=" + val);
  return out;
}

}  // namespace strata::launch
