#include "worker/probe.h"

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

namespace strata::worker {

StatusOr<control::NodeProbe> ProbeNode() {
  control::NodeProbe probe;
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) probe.set_hostname(host);

  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
    return absl::InternalError("hwloc: failed to load the node topology");
  }
  probe.set_cpu_cores(
      std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE)));
  probe.set_numa_nodes(
      std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE)));
  hwloc_topology_destroy(topo);

  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) {
    probe.set_memory_bytes(static_cast<int64_t>(pages) * page_size);
  }
  std::error_code ec;
  std::vector<std::string> nics;
  for (const auto& entry :
       std::filesystem::directory_iterator("/sys/class/net", ec)) {
    std::string name = entry.path().filename().string();
    if (name != "lo") nics.push_back(name);
  }
  std::sort(nics.begin(), nics.end());
  for (auto& n : nics) probe.add_nics(n);
  probe.set_gpus(0);
  return probe;
}

}  // namespace strata::worker
