// strata-exec: `mpirun -np N strata-exec [options] -- COMMAND [ARGS...]`
// makes every MPI process a strata rank. Each strata-exec
//   1. parses its flags (bad flags or no command: message, exit 2),
//   2. forks COMMAND *before* MPI_Init, held on a pipe (launch/child.h),
//   3. MPI_Init; gathers node names, hostnames and addresses (launch/nodes.h:
//      NODE_RANK, LOCAL_RANK, STRATA_NODE_ADDR); rank 0 starts the
//      rendezvous TCP store (comm/store.h), picks MASTER_PORT and the job id
//      and broadcasts them,
//   4. releases COMMAND with the rank environment (placement/rank_env.h,
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
#include "common/net.h"
#include "launch/child.h"
#include "launch/child_env.h"
#include "launch/mpi_world.h"
#include "launch/nodes.h"
#include "placement/layout.h"
#include "placement/rank_env.h"

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
      net::IsLoopback(j.master_addr) ? "127.0.0.1" : "0.0.0.0";
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
    auto p = net::PickFreePort(bind);
    if (!p.ok()) {
      j.error = absl::StrCat("cannot pick MASTER_PORT: ", p.status().message());
      return j;
    }
    j.master_port = *p;
  }
  j.job_id = f.job_id;
  if (j.job_id.empty()) {
    const char* inherited = std::getenv(placement::kJobId);
    j.job_id =
        inherited != nullptr && *inherited != '\0'
            ? inherited
            : absl::StrCat("mpi-", static_cast<int64_t>(std::time(nullptr)),
                           "-", getpid());
  }
  return j;
}

// A collective failed: the ranks are out of step, so the whole job stops.
[[noreturn]] void FailCollective(const MpiWorld& world, const Status& st) {
  std::fprintf(stderr, "strata-exec: rank %d: %s\n", world.rank(),
               std::string(st.message()).c_str());
  world.Abort(kExitSetup);
}

// Whether tp*pp*cp divides the world; every rank computes the same verdict
// and rank 0 says why not.
bool WorldFitsParallelism(const MpiWorld& world, const Flags& f) {
  if (placement::DataParallelSize(world.size(), f.tp, f.pp, f.cp) != 0) {
    return true;
  }
  if (world.rank() == 0) {
    std::fprintf(stderr,
                 "strata-exec: world size %d is not divisible by tp*pp*cp "
                 "= %lld (--tp %d --pp %d --cp %d)\n",
                 world.size(), static_cast<long long>(f.tp) * f.pp * f.cp, f.tp,
                 f.pp, f.cp);
  }
  return false;
}

// Who runs where (launch/nodes.h): every rank's node name, hostname and
// reachable address; each rank binds an address its peers can reach.
// Every rank sees the same facts and fails the same way (rank 0 prints).
StatusOr<JobNodes> DiscoverNodes(MpiWorld& world, const Flags& f,
                                 const Logger& log) {
  RankHost me;
  me.node_name = f.node_name;
  char hostname[256] = {};
  gethostname(hostname, sizeof(hostname) - 1);
  me.hostname = hostname;
  if (auto a = net::ReachableHostAddress(); a.ok()) me.address = *a;
  auto gathered = world.AllGather(me.Encode());
  if (!gathered.ok()) FailCollective(world, gathered.status());
  std::vector<RankHost> hosts;
  for (const std::string& g : *gathered) hosts.push_back(RankHost::Decode(g));
  auto nodes = GroupNodes(hosts);
  if (!nodes.ok()) {
    if (world.rank() == 0) {
      std::fprintf(stderr, "strata-exec: %s\n",
                   std::string(nodes.status().message()).c_str());
    }
    return nodes.status();
  }
  if (world.rank() == 0 &&
      !NodesAreContiguousEqualBlocks(nodes->node_of_rank)) {
    log->warn(
        "ranks are not in equal contiguous blocks per node (e.g. --map-by "
        "node); strata's runtime expects mpirun's default by-slot mapping");
  }
  return nodes;
}

// Rank 0 decides the job-wide facts (starting the store in *store_server)
// and broadcasts them; an error when rank 0's setup failed (it prints why).
StatusOr<JobFacts> AgreeOnJobFacts(
    MpiWorld& world, const Flags& f, const JobNodes& nodes,
    std::unique_ptr<comm::TcpStoreServer>* store_server) {
  JobFacts mine;
  if (world.rank() == 0) {
    mine = SetUpOnRankZero(f, nodes.nodes[0].address, store_server);
  }
  auto facts_wire = world.Broadcast(mine.Encode());
  if (!facts_wire.ok()) FailCollective(world, facts_wire.status());
  JobFacts facts = JobFacts::Decode(*facts_wire);
  if (facts.error.empty()) return facts;
  if (world.rank() == 0) {
    std::fprintf(stderr, "strata-exec: %s\n", facts.error.c_str());
  }
  return absl::FailedPreconditionError(facts.error);
}

// This rank's environment (placement/rank_env.h) from the nodes and facts.
placement::RankEnv RankEnvironment(const MpiWorld& world, const Flags& f,
                                   const JobNodes& nodes, const JobFacts& facts,
                                   const Logger& log) {
  placement::JobEndpoints job;
  job.job_id = facts.job_id;
  job.master_addr = facts.master_addr;
  job.master_port = facts.master_port;
  job.store = absl::StrCat("tcp://", facts.master_addr, ":", facts.store_port);
  job.ckpt_uri = f.ckpt;
  auto plan = placement::PlanForNodes(nodes.node_of_rank, f.tp, f.pp, f.cp);
  if (!plan.ok()) FailCollective(world, plan.status());
  auto env = placement::RankEnvFor(*plan, world.rank(), nodes.nodes, job);
  if (!env.ok()) FailCollective(world, env.status());
  log->info("rank {}: node {} ({}, {}), local rank {}/{}, store {}",
            world.rank(), env->node_rank, env->node_name, env->node_addr,
            env->local_rank, env->local_world_size, env->store_uri);
  return *std::move(env);
}

// Releases the command with `env`, forwards signals to it and waits; a
// failed command aborts the job with its code. Then the barrier that keeps
// rank 0's store up until every rank is done with it, and MPI_Finalize.
int RunCommand(MpiWorld& world, PreforkedChild& child,
               const std::vector<std::string>& inherited_env,
               const placement::RankEnv& env,
               comm::TcpStoreServer* store_server, const Logger& log) {
  ForwardSignalsTo(child.pid());
  Status released =
      child.Release(ChildEnvironment(inherited_env, placement::Variables(env)));
  if (!released.ok()) FailCollective(world, released);
  auto code = child.Wait();
  if (!code.ok()) FailCollective(world, code.status());
  if (*code != 0) {
    std::fprintf(stderr,
                 "strata-exec: rank %d: command exited with code %d%s; "
                 "aborting the job\n",
                 world.rank(), *code,
                 *code > 128 ? " (128 + signal number)" : "");
    world.Abort(*code);
  }
  Status st = world.PollingBarrier();
  if (!st.ok()) FailCollective(world, st);
  if (store_server) store_server->Stop();
  st = world.Finalize();
  if (!st.ok()) log->warn("MPI_Finalize: {}", std::string(st.message()));
  return 0;
}

int Run(int argc, char** argv) {
  Flags f;
  if (auto code = ParseFlags(argc, argv, &f)) return *code;
  Logger log = GetLogger("LAUNCH");
  if (f.ckpt.empty()) {
    const char* inherited = std::getenv(placement::kCkptUri);
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
  if (!WorldFitsParallelism(*world, f)) {
    world->Finalize().IgnoreError();
    return kExitUsage;
  }
  auto nodes = DiscoverNodes(*world, f, log);
  if (!nodes.ok()) {
    world->Finalize().IgnoreError();
    return kExitSetup;
  }
  std::unique_ptr<comm::TcpStoreServer> store_server;  // rank 0 only
  auto facts = AgreeOnJobFacts(*world, f, *nodes, &store_server);
  if (!facts.ok()) {
    if (store_server) store_server->Stop();
    world->Finalize().IgnoreError();
    return kExitSetup;
  }
  const placement::RankEnv env =
      RankEnvironment(*world, f, *nodes, *facts, log);
  return RunCommand(*world, **child, inherited_env, env, store_server.get(),
                    log);
}

}  // namespace
}  // namespace strata::launch

int main(int argc, char** argv) { return strata::launch::Run(argc, argv); }
