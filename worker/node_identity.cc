#include "worker/node_identity.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace strata::worker {

StatusOr<std::string> NodeIdentity(const std::string& flag,
                                   const std::string& hostname,
                                   const EnvLookup& getenv_fn) {
  if (!flag.empty()) return flag;
  auto get = [&](const char* name) -> std::string {
    const char* v = getenv_fn(name);
    return v != nullptr ? v : "";
  };
  if (std::string n = get("SLURMD_NODENAME"); !n.empty()) return n;
  if (std::string id = get("SLURM_NODEID"); !id.empty()) {
    int v = -1;
    if (!absl::SimpleAtoi(id, &v) || v < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SLURM_NODEID='", id, "' is not a node index; pass --node-name"));
    }
    return absl::StrCat("slurm-node-", v);
  }
  return hostname;
}

}  // namespace strata::worker
