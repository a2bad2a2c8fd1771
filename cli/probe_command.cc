// `strata probe [--out FILE]`: what strata-worker reports about this node
// (the same probe), as JSON for a person or a file.
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "cli/control_client.h"
#include "common/config.h"
#include "worker/probe.h"

namespace strata::cli {

void AddProbeCommand(CLI::App* app) {
  auto* cmd = app->add_subcommand(
      "probe", "probe this node as strata-worker does (cores, NUMA, memory, "
               "NICs, GPUs, measured copy and FMA rates)");
  auto out = std::make_shared<std::string>();
  cmd->add_option("--out", *out, "write the JSON here instead of stdout");
  cmd->callback([=] {
    auto probe = worker::ProbeNode();
    if (!probe.ok()) Fail("probe", kExitFailed, probe.status().ToString());
    std::string json = MessageToJson(*probe);
    if (out->empty()) {
      std::printf("%s\n", json.c_str());
      return;
    }
    std::ofstream f(*out);
    f << json << "\n";
    if (!f) Fail("probe", kExitBadInput, "cannot write " + *out);
  });
}

}  // namespace strata::cli
