// `strata probe [--out FILE]`: what strata-worker reports about this node
// (the same probe), as JSON for a person or a file.
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "cli/control_client.h"
#include "common/config.h"
#include "topology/probe/peer_bandwidth.h"
#include "topology/probe/probe.h"

namespace strata::cli {

void AddProbeCommand(CLI::App* app) {
  auto* cmd = app->add_subcommand(
      "probe",
      "probe this node as strata-worker does (cores, NUMA, memory, "
      "NICs, GPUs, measured copy and FMA rates)");
  auto out = std::make_shared<std::string>();
  auto peer = std::make_shared<std::string>();
  auto serve = std::make_shared<int>(-1);
  cmd->add_option("--out", *out, "write the JSON here instead of stdout");
  cmd->add_option("--peer", *peer,
                  "also measure TCP bandwidth to HOST:PORT (a node running "
                  "`strata probe --serve-peer PORT`)");
  cmd->add_option("--serve-peer", *serve,
                  "serve one bandwidth measurement on PORT, then exit")
      ->check(CLI::Range(0, 65535));
  cmd->callback([=] {
    if (*serve >= 0) {
      Status s = probe::ServePeerSink(*serve, 1, [](int port) {
        std::printf("serving on port %d\n", port);
        std::fflush(stdout);
      });
      if (!s.ok()) Fail("probe", kExitFailed, s.ToString());
      return;
    }
    auto probe = probe::ProbeNode();
    if (!probe.ok()) Fail("probe", kExitFailed, probe.status().ToString());
    if (!peer->empty()) {
      auto gbps = probe::MeasurePeerGbps(*peer);
      if (!gbps.ok()) {
        Fail("probe",
             absl::IsInvalidArgument(gbps.status()) ? kExitBadInput
                                                    : kExitFailed,
             gbps.status().ToString());
      }
      probe->set_peer_gbps(*gbps);
    }
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
