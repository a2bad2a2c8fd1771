// strata-exec: `mpirun -np N strata-exec [options] -- COMMAND [ARGS...]`
// makes every MPI process a strata rank. Each strata-exec
//   1. parses its flags (bad flags or no command: message, exit 2),
//   2. forks COMMAND *before* MPI_Init, held on a pipe (launch/child.h),
//   3. MPI_Init; gathers node names (NODE_RANK, LOCAL_RANK); rank 0 starts
//      the rendezvous TCP store (comm/store.h), picks MASTER_PORT and the
//      job id and broadcasts them,
//   4. releases COMMAND with the rank environment (launch/rank_env.h,
//      docs/placement.md), forwards SIGINT/SIGTERM/SIGHUP/SIGUSR1/SIGUSR2 to
//      it, waits for it,
//   5. on success: a (sleeping) barrier, so rank 0's store outlives every
//      rank's use of it, MPI_Finalize, exit 0; on failure (exit code c, or
//      128+signal): MPI_Abort(c), so mpirun stops the other ranks and exits
//      non-zero.
// Setup errors: exit 1 on every rank (rank 0 prints the reason). Usage and
// docs: docs/launch.md.
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "comm/store.h"
#include "common/logging.h"
#include "launch/child.h"
#include "launch/mpi_world.h"
#include "launch/net.h"
#include "launch/rank_env.h"

extern char** environ;

namespace strata::launch {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitSetup = 1;

struct Flags {
  int tp = 1, pp = 1, cp = 1;
  std::string job_id, ckpt, master_addr, node_name, log_level = "warn";
  int master_port = 0, store_port = 0;
  std::vector<std::string> command;
};

// Returns the exit code to use when parsing does not yield a command.
std::optional<int> ParseFlags(int argc, char** argv, Flags* f) {
  CLI::App app{
      "strata-exec: run COMMAND as a strata rank under mpirun.\n"
      "Usage: mpirun -np N strata-exec [options] -- COMMAND [ARGS...]"};
  app.add_option("--tp", f->tp, "tensor-parallel size")
      ->check(CLI::PositiveNumber);
  app.add_option("--pp", f->pp, "pipeline-parallel size")
      ->check(CLI::PositiveNumber);
  app.add_option("--cp", f->cp, "context-parallel size (DP = world/(tp*pp*cp))")
      ->check(CLI::PositiveNumber);
  app.add_option("--job-id", f->job_id,
                 "STRATA_JOB_ID (default: inherited, else generated)");
  app.add_option("--ckpt", f->ckpt,
                 "STRATA_CKPT_URI (default: inherited STRATA_CKPT_URI)");
  app.add_option("--master-addr", f->master_addr,
                 "MASTER_ADDR and store host (default: 127.0.0.1 on one node, "
                 "else rank 0's address)");
  app.add_option("--master-port", f->master_port,
                 "MASTER_PORT for torch (default: a free port)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--store-port", f->store_port,
                 "port of the rendezvous store (default: a free port)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--node-name", f->node_name,
                 "node identity for NODE_RANK/LOCAL_RANK (default: hostname)");
  app.add_option("--log-level", f->log_level, "trace|debug|info|warn|error");
  app.prefix_command();  // the first positional and all after it: COMMAND
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "strata-exec: %s\nRun with --help for usage.\n",
                 e.what());
    return kExitUsage;
  }
  f->command = app.remaining();
  if (!f->command.empty() && f->command[0] == "--") {
    f->command.erase(f->command.begin());
  } else if (!f->command.empty() && f->command[0].starts_with("-")) {
    // prefix_command() hands unknown options over as the command.
    std::fprintf(stderr,
                 "strata-exec: unknown option %s\nRun with --help for "
                 "usage.\n",
                 f->command[0].c_str());
    return kExitUsage;
  }
  if (f->command.empty()) {
    std::fprintf(stderr,
                 "strata-exec: no command given\nUsage: mpirun -np N "
                 "strata-exec [options] -- COMMAND [ARGS...]\n");
    return kExitUsage;
  }
  if (!SetLogLevel(f->log_level)) {
    std::fprintf(stderr, "strata-exec: unknown --log-level '%s'\n",
                 f->log_level.c_str());
    return kExitUsage;
  }
  for (char c : f->job_id) {
    if (c <= ' ' || c > '~') {
      std::fprintf(stderr,
                   "strata-exec: --job-id must be printable ASCII without "
                   "spaces\n");
      return kExitUsage;
    }
  }
  return std::nullopt;
}

// Job-wide facts rank 0 decides and broadcasts, one per line.
struct JobFacts {
  std::string error;  // non-empty: setup failed on rank 0
  std::string master_addr, job_id;
  int master_port = 0, store_port = 0;

  std::string Encode() const {
    return absl::StrCat(error.empty() ? "ok" : "error", "\n", master_addr, "\n",
                        master_port, "\n", store_port, "\n", job_id, "\n",
                        error);
  }
  static JobFacts Decode(const std::string& s) {
    std::vector<std::string> p = absl::StrSplit(s, absl::MaxSplits('\n', 5));
    JobFacts f;
    if (p.size() != 6 || !absl::SimpleAtoi(p[2], &f.master_port) ||
        !absl::SimpleAtoi(p[3], &f.store_port)) {
      f.error = "malformed job facts from rank 0";
      return f;
    }
    f.master_addr = p[1];
    f.job_id = p[4];
    if (p[0] != "ok") f.error = p[5].empty() ? "setup failed" : p[5];
    return f;
  }
};

// Rank 0: picks the addresses and starts the store (kept in *server).
// `node_addr` is rank 0's STRATA_NODE_ADDR, the default MASTER_ADDR.
JobFacts SetUpOnRankZero(const Flags& f, const std::string& node_addr,
                         std::unique_ptr<comm::TcpStoreServer>* server) {
  JobFacts j;
  j.master_addr = f.master_addr.empty() ? node_addr : f.master_addr;
  // Loopback master: bind loopback only; otherwise every interface.
  const std::string bind =
      j.master_addr.starts_with("127.") ? "127.0.0.1" : "0.0.0.0";
  auto s = comm::StartTcpStoreServer(bind, f.store_port);
  if (!s.ok()) {
    j.error = absl::StrCat("cannot start the rendezvous store on ", bind, ":",
                           f.store_port, ": ", s.status().message());
    return j;
  }
  *server = std::move(*s);
  j.store_port = (*server)->port();
  j.master_port = f.master_port;
  if (j.master_port == 0) {
    auto p = PickFreePort(bind);
    if (!p.ok()) {
      j.error = absl::StrCat("cannot pick MASTER_PORT: ", p.status().message());
      return j;
    }
    j.master_port = *p;
  }
  j.job_id = f.job_id;
  if (j.job_id.empty()) {
    const char* inherited = std::getenv("STRATA_JOB_ID");
    j.job_id =
        inherited != nullptr && *inherited != '\0'
            ? inherited
            : absl::StrCat("mpi-", static_cast<int64_t>(std::time(nullptr)),
                           "-", getpid());
  }
  return j;
}

int Run(int argc, char** argv) {
  Flags f;
  if (auto code = ParseFlags(argc, argv, &f)) return *code;
  Logger log = GetLogger("LAUNCH");
  if (f.ckpt.empty()) {
    const char* inherited = std::getenv("STRATA_CKPT_URI");
    if (inherited != nullptr) f.ckpt = inherited;
  }
  std::vector<std::string> inherited_env;
  for (char** e = environ; *e != nullptr; ++e) inherited_env.emplace_back(*e);

  // Fork while this process still has one thread and no MPI state.
  auto child = PreforkedChild::Start(f.command);
  if (!child.ok()) {
    std::fprintf(stderr, "strata-exec: %s\n",
                 std::string(child.status().message()).c_str());
    return kExitSetup;
  }
  auto world = MpiWorld::Init(&argc, &argv);
  if (!world.ok()) {
    std::fprintf(stderr, "strata-exec: %s\n",
                 std::string(world.status().message()).c_str());
    return kExitSetup;
  }
  const int rank = world->rank();
  auto fail_collective = [&](const Status& st) {
    std::fprintf(stderr, "strata-exec: rank %d: %s\n", rank,
                 std::string(st.message()).c_str());
    world->Abort(kExitSetup);
  };

  auto sizes = DeriveParallelSizes(world->size(), f.tp, f.pp, f.cp);
  if (!sizes.ok()) {  // every rank computes the same verdict
    if (rank == 0) {
      std::fprintf(stderr, "strata-exec: %s\n",
                   std::string(sizes.status().message()).c_str());
    }
    world->Finalize().IgnoreError();
    return kExitUsage;
  }

  // Who runs where: every rank's hostname and reachable address. Ranks
  // with the same hostname and address share a host; the node identity
  // (NODE_RANK, LOCAL_RANK) is --node-name, else that host.
  char hostname[256] = {};
  gethostname(hostname, sizeof(hostname) - 1);
  auto reachable = ReachableHostAddress();
  auto gathered = world->AllGather(
      absl::StrCat(f.node_name, "\n", hostname, "\n",
                   reachable.ok() ? *reachable : std::string()));
  if (!gathered.ok()) fail_collective(gathered.status());
  std::vector<std::string> node_keys, host_names, host_addrs;
  for (const std::string& g : *gathered) {
    std::vector<std::string> p = absl::StrSplit(g, absl::MaxSplits('\n', 2));
    p.resize(3);
    host_names.push_back(p[1]);
    host_addrs.push_back(p[2]);
    node_keys.push_back(p[0].empty() ? p[1] + "\n" + p[2] : p[0]);
  }
  const std::string node = f.node_name.empty() ? hostname : f.node_name;
  bool one_host = true;
  for (int r = 1; r < world->size(); ++r) {
    one_host = one_host && host_names[r] == host_names[0] &&
               host_addrs[r] == host_addrs[0];
  }
  // Every rank binds and advertises an address its peers can reach:
  // loopback only when they all run on this host.
  std::string node_addr = "127.0.0.1";
  if (!one_host) {
    for (int r = 0; r < world->size(); ++r) {
      if (!host_addrs[r].empty()) continue;
      // Every rank sees the same gathered facts and fails the same way.
      if (rank == 0) {
        std::fprintf(stderr,
                     "strata-exec: rank %d (host %s) has no non-loopback IPv4 "
                     "address, but the ranks run on several hosts\n",
                     r, host_names[r].c_str());
      }
      world->Finalize().IgnoreError();
      return kExitSetup;
    }
    node_addr = host_addrs[rank];
  }
  const Locality loc = ComputeLocality(node_keys, rank);
  if (rank == 0 && !NodesAreContiguousEqualBlocks(node_keys)) {
    log->warn(
        "ranks are not in equal contiguous blocks per node (e.g. --map-by "
        "node); strata's runtime expects mpirun's default by-slot mapping");
  }

  std::unique_ptr<comm::TcpStoreServer> store_server;  // rank 0 only
  JobFacts mine;
  if (rank == 0) mine = SetUpOnRankZero(f, node_addr, &store_server);
  auto facts_wire = world->Broadcast(mine.Encode());
  if (!facts_wire.ok()) fail_collective(facts_wire.status());
  const JobFacts facts = JobFacts::Decode(*facts_wire);
  if (!facts.error.empty()) {
    if (rank == 0)
      std::fprintf(stderr, "strata-exec: %s\n", facts.error.c_str());
    if (store_server) store_server->Stop();
    world->Finalize().IgnoreError();
    return kExitSetup;
  }

  RankEnvInputs in;
  in.rank = rank;
  in.world_size = world->size();
  in.locality = loc;
  in.sizes = *sizes;
  in.master_addr = facts.master_addr;
  in.node_name = node;
  in.node_addr = node_addr;
  in.master_port = facts.master_port;
  in.store = absl::StrCat("tcp://", facts.master_addr, ":", facts.store_port);
  in.job_id = facts.job_id;
  in.ckpt_uri = f.ckpt;
  log->info("rank {}: node {} ({}, {}), local rank {}/{}, store {}", rank,
            loc.node_rank, node, node_addr, loc.local_rank,
            loc.local_world_size, in.store);

  ForwardSignalsTo((*child)->pid());
  Status released =
      (*child)->Release(ChildEnvironment(inherited_env, RankVariables(in)));
  if (!released.ok()) fail_collective(released);
  auto code = (*child)->Wait();
  if (!code.ok()) fail_collective(code.status());
  if (*code != 0) {
    std::fprintf(stderr,
                 "strata-exec: rank %d: command exited with code %d%s; "
                 "aborting the job\n",
                 rank, *code, *code > 128 ? " (128 + signal number)" : "");
    world->Abort(*code);
  }
  // The store must outlive every rank's use of it: wait for all ranks.
  Status st = world->PollingBarrier();
  if (!st.ok()) fail_collective(st);
  if (store_server) store_server->Stop();
  st = world->Finalize();
  if (!st.ok()) log->warn("MPI_Finalize: {}", std::string(st.message()));
  return 0;
}

}  // namespace
}  // namespace strata::launch

int main(int argc, char** argv) { return strata::launch::Run(argc, argv); }
