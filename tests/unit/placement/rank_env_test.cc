#include "placement/rank_env.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "placement/layout.h"

namespace strata::placement {
namespace {

// The message of a failed parse, or "" when it succeeded.
std::string ParseError(const EnvMap& env) {
  auto e = ParseRankEnv(env);
  if (e.ok()) return "";
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument)
      << e.status();
  return std::string(e.status().message());
}

// The environment BuildRankEnv gives `rank` of a tp x pp x (rest) x cp job
// on nodes of `rpn` ranks, every node on its own host.
EnvMap Built(int world, int rpn, int tp, int pp, int cp, int rank) {
  std::vector<int> node_of(world);
  for (int r = 0; r < world; ++r) node_of[r] = r / rpn;
  auto plan = PlanForNodes(node_of, tp, pp, cp);
  EXPECT_TRUE(plan.ok()) << plan.status();
  std::vector<NodeEndpoint> nodes;
  for (int n = 0; n < world / rpn; ++n) {
    nodes.push_back(
        {"node-" + std::to_string(n), "10.0.0." + std::to_string(n + 1), 0});
  }
  JobEndpoints job;
  job.job_id = "job-1";
  job.master_addr = "10.0.0.1";
  job.master_port = 29500;
  job.store = "tcp://10.0.0.1:29400";
  auto env = BuildRankEnv(*plan, rank, nodes, job);
  EXPECT_TRUE(env.ok()) << env.status();
  return *env;
}

TEST(DataParallelSizeTest, DpTakesTheRest) {
  EXPECT_EQ(DataParallelSize(16, 2, 2, 2), 2);
  EXPECT_EQ(DataParallelSize(4, 1, 1, 1), 4);
  EXPECT_EQ(DataParallelSize(4, 3, 1, 1), 0);
  EXPECT_EQ(DataParallelSize(4, 0, 1, 1), 0);
  EXPECT_EQ(DataParallelSize(0, 1, 1, 1), 0);
}

// BuildRankEnv then ParseRankEnv gives back the RankEnv RankEnvFor built,
// for every rank of several plans and launch sources of values.
TEST(RankEnvRoundTripTest, EveryRankOfSeveralPlans) {
  struct Case {
    int world, rpn, tp, pp, cp;
  } cases[] = {
      {1, 1, 1, 1, 1}, {4, 4, 2, 1, 1},  {8, 4, 2, 2, 1},  // tp2 dp2 pp2
      {8, 2, 1, 2, 2}, {24, 8, 2, 3, 2}, {6, 3, 1, 3, 1},
  };
  for (const Case& c : cases) {
    std::vector<int> node_of(c.world);
    for (int r = 0; r < c.world; ++r) node_of[r] = r / c.rpn;
    auto plan = PlanForNodes(node_of, c.tp, c.pp, c.cp);
    ASSERT_TRUE(plan.ok()) << plan.status();
    std::vector<NodeEndpoint> nodes;
    for (int n = 0; n < c.world / c.rpn; ++n) {
      nodes.push_back({"n" + std::to_string(n),
                       "10.1.0." + std::to_string(n + 1), n % 2 == 0 ? 8 : 0});
    }
    JobEndpoints job{"job-x",
                     2,
                     5,
                     "10.1.0.1",
                     29500,
                     "strata://10.1.0.9:7000",
                     "file:///ckpt",
                     "ipc:///tmp/t",
                     "/tmp/plan.json"};
    for (int r = 0; r < c.world; ++r) {
      SCOPED_TRACE(::testing::Message()
                   << "world " << c.world << " tp " << c.tp << " pp " << c.pp
                   << " cp " << c.cp << " rank " << r);
      auto built = RankEnvFor(*plan, r, nodes, job);
      ASSERT_TRUE(built.ok()) << built.status();
      auto parsed = ParseRankEnv(Variables(*built));
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      EXPECT_EQ(*parsed, *built);
      // And the coordinates are placement/order.h's.
      Sizes k;
      k.tp = c.tp;
      k.pp = c.pp;
      k.cp = c.cp;
      k.dp = c.world / (c.tp * c.pp * c.cp);
      const Coord rc = CoordOf(k, r);
      EXPECT_EQ(parsed->tp_rank, rc.tp);
      EXPECT_EQ(parsed->cp_rank, rc.cp);
      EXPECT_EQ(parsed->dp_rank, rc.dp);
      EXPECT_EQ(parsed->pp_rank, rc.pp);
      EXPECT_EQ(parsed->node_rank, r / c.rpn);
      EXPECT_EQ(parsed->local_rank, r % c.rpn);
      EXPECT_EQ(parsed->local_world_size, c.rpn);
      EXPECT_EQ(parsed->visible_devices,
                (r / c.rpn) % 2 == 0 ? std::to_string(r % c.rpn) : "");
    }
  }
}

TEST(BuildRankEnvTest, TwoNodesTp2Dp2Pp2EveryVariable) {
  EnvMap v = Built(8, 4, 2, 2, 1, 5);
  // rank 5 = tp 1 + 2 * (dp 0 + 2 * pp 1).
  EXPECT_EQ(v["RANK"], "5");
  EXPECT_EQ(v["WORLD_SIZE"], "8");
  EXPECT_EQ(v["LOCAL_RANK"], "1");
  EXPECT_EQ(v["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(v["GROUP_RANK"], "1");
  EXPECT_EQ(v["NODE_RANK"], "1");
  EXPECT_EQ(v["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(v["ROLE_RANK"], "5");
  EXPECT_EQ(v["ROLE_WORLD_SIZE"], "8");
  EXPECT_EQ(v["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(v["MASTER_PORT"], "29500");
  EXPECT_EQ(v["TORCHELASTIC_RUN_ID"], "job-1");
  EXPECT_EQ(v["STRATA_JOB_ID"], "job-1");
  EXPECT_EQ(v["STRATA_STORE"], "tcp://10.0.0.1:29400");
  EXPECT_EQ(v["STRATA_TP"], "2");
  EXPECT_EQ(v["STRATA_DP"], "2");
  EXPECT_EQ(v["STRATA_PP"], "2");
  EXPECT_EQ(v["STRATA_CP"], "1");
  EXPECT_EQ(v["STRATA_TP_RANK"], "1");
  EXPECT_EQ(v["STRATA_DP_RANK"], "0");
  EXPECT_EQ(v["STRATA_PP_RANK"], "1");
  EXPECT_EQ(v["STRATA_CP_RANK"], "0");
  EXPECT_EQ(v["STRATA_RESTART_COUNT"], "0");
  EXPECT_EQ(v["STRATA_NODE_NAME"], "node-1");
  EXPECT_EQ(v["STRATA_NODE_ADDR"], "10.0.0.2");
  // Not known to the launcher or not configured: not set.
  EXPECT_EQ(v.count("STRATA_CKPT_URI"), 0u);
  EXPECT_EQ(v.count("STRATA_PLAN"), 0u);
  EXPECT_EQ(v.count("STRATA_TELEMETRY"), 0u);
  EXPECT_EQ(v.count("CUDA_VISIBLE_DEVICES"), 0u);
}

TEST(BuildRankEnvTest, InterleavedNodesCountLocalRanksInRankOrder) {
  // mpirun --map-by node: ranks 0 2 on node 0, 1 3 on node 1.
  auto plan = PlanForNodes({0, 1, 0, 1}, 1, 2, 1);
  ASSERT_TRUE(plan.ok());
  std::vector<NodeEndpoint> nodes = {{"a", "127.0.0.1", 0},
                                     {"b", "127.0.0.1", 0}};
  auto e = RankEnvFor(*plan, 2, nodes, {});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->node_rank, 0);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 2);
  EXPECT_EQ(e->node_name, "a");
}

TEST(BuildRankEnvTest, BadPlansAreInvalidArgument) {
  EXPECT_NE(PlanForNodes({0, 0, 0, 0}, 3, 1, 1)
                .status()
                .message()
                .find("world size 4 is not divisible by tp*pp*cp = 3"),
            std::string::npos);
  auto plan = PlanForNodes({0, 0, 1, 1}, 2, 1, 1);
  ASSERT_TRUE(plan.ok());
  std::vector<NodeEndpoint> one_node = {{"a", "10.0.0.1", 0}};
  EXPECT_EQ(RankEnvFor(*plan, 2, one_node, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RankEnvFor(*plan, 4, one_node, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  Plan wrong = *plan;
  wrong.mutable_placement()->mutable_ranks(1)->set_tp_rank(0);
  std::vector<NodeEndpoint> two = {{"a", "x", 0}, {"b", "y", 0}};
  EXPECT_NE(RankEnvFor(wrong, 1, two, {})
                .status()
                .message()
                .find("not at its tp-cp-dp-pp coordinates"),
            std::string::npos);
}

TEST(ParseRankEnvTest, NothingSetIsOneProcess) {
  auto e = ParseRankEnv({});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(*e, RankEnv{});
}

TEST(ParseRankEnvTest, StrataVariables) {
  auto e = ParseRankEnv({{"RANK", "3"},
                         {"WORLD_SIZE", "8"},
                         {"LOCAL_RANK", "1"},
                         {"LOCAL_WORLD_SIZE", "2"},
                         {"NODE_RANK", "1"},
                         {"STRATA_TP", "2"},
                         {"STRATA_PP", "2"},
                         {"STRATA_STORE", "tcp://h:1"},
                         {"STRATA_NODE_ADDR", "10.0.0.2"},
                         {"STRATA_RESTART_COUNT", "4"},
                         {"STRATA_JOB_ID", "j"}});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 2);
  EXPECT_EQ(e->node_rank, 1);
  EXPECT_EQ(e->num_nodes, 4);
  EXPECT_EQ(e->dp, 2);  // the rest
  // rank 3 = tp 1 + 2 * (dp 1 + 2 * pp 0)
  EXPECT_EQ(e->tp_rank, 1);
  EXPECT_EQ(e->dp_rank, 1);
  EXPECT_EQ(e->pp_rank, 0);
  EXPECT_EQ(e->restart_count, 4);
  EXPECT_EQ(e->job_id, "j");
  EXPECT_EQ(e->node_addr, "10.0.0.2");
}

TEST(ParseRankEnvTest, FlightRecorderVariables) {
  auto e = ParseRankEnv(
      {{"STRATA_FLIGHT_RECORDER", "64"}, {"STRATA_FLIGHT_RECORDER_AB", "10"}});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->flight_records, 64);
  EXPECT_EQ(e->flight_recorder_ab, 10);
  EXPECT_EQ(ParseRankEnv({}).value().flight_recorder_ab, 0);  // always on
  // k = 10: steps 0-9 record, 10-19 do not, 20 records; k = 0 always.
  EXPECT_TRUE(FlightRecorderRecords(9, 10));
  EXPECT_FALSE(FlightRecorderRecords(10, 10));
  EXPECT_FALSE(FlightRecorderRecords(19, 10));
  EXPECT_TRUE(FlightRecorderRecords(20, 10));
  EXPECT_TRUE(FlightRecorderRecords(15, 0));
  EXPECT_NE(ParseError({{"STRATA_FLIGHT_RECORDER_AB", "-1"}})
                .find("STRATA_FLIGHT_RECORDER_AB"),
            std::string::npos);
  EXPECT_NE(ParseError({{"STRATA_FLIGHT_RECORDER_AB", "ten"}})
                .find("STRATA_FLIGHT_RECORDER_AB"),
            std::string::npos);
}

TEST(ParseRankEnvTest, TorchrunWithoutLocalSizesIsOneHost) {
  auto e = ParseRankEnv(
      {{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"STRATA_STORE", "file:///s"}});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->local_rank, 2);
  EXPECT_EQ(e->local_world_size, 3);
  EXPECT_EQ(e->num_nodes, 1);
  EXPECT_EQ(e->dp, 3);
  // torchrun's restart count when strata's is absent.
  auto t = ParseRankEnv({{"TORCHELASTIC_RESTART_COUNT", "2"}});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->restart_count, 2);
}

TEST(ParseRankEnvTest, OpenMpiVariables) {
  auto e = ParseRankEnv({{"OMPI_COMM_WORLD_RANK", "5"},
                         {"OMPI_COMM_WORLD_SIZE", "8"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                         {"STRATA_TP", "4"},
                         {"STRATA_STORE", "file:///s"},
                         {"STRATA_NODE_ADDR", "10.0.0.2"}});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->rank, 5);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 4);
  EXPECT_EQ(e->node_rank, 1);  // rank / local size
  EXPECT_EQ(e->num_nodes, 2);
  EXPECT_EQ(e->tp_rank, 1);
  EXPECT_EQ(e->dp_rank, 1);
}

TEST(ParseRankEnvTest, SlurmVariables) {
  EnvMap slurm = {
      {"SLURM_PROCID", "3"},           {"SLURM_NTASKS", "4"},
      {"SLURM_LOCALID", "1"},          {"SLURM_NODEID", "1"},
      {"SLURM_NTASKS_PER_NODE", "2"},  {"STRATA_STORE", "file:///s"},
      {"STRATA_NODE_ADDR", "10.0.0.2"}};
  auto e = ParseRankEnv(slurm);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world_size, 4);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 2);
  EXPECT_EQ(e->node_rank, 1);
  EXPECT_EQ(e->num_nodes, 2);
  // SLURM_TASKS_PER_NODE's "count(xnodes)" form when --ntasks-per-node was
  // not given.
  slurm.erase("SLURM_NTASKS_PER_NODE");
  slurm["SLURM_TASKS_PER_NODE"] = "2(x2)";
  e = ParseRankEnv(slurm);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->local_world_size, 2);
  slurm["SLURM_TASKS_PER_NODE"] = "2,2";
  EXPECT_EQ(ParseRankEnv(slurm)->local_world_size, 2);
  slurm["SLURM_TASKS_PER_NODE"] = "3,1";
  EXPECT_NE(ParseError(slurm).find("SLURM_TASKS_PER_NODE='3,1': nodes run "
                                   "different numbers of tasks"),
            std::string::npos);
  slurm["SLURM_TASKS_PER_NODE"] = "2(x";
  EXPECT_NE(ParseError(slurm).find("SLURM_TASKS_PER_NODE='2(x' is not a task "
                                   "count"),
            std::string::npos);
  slurm["SLURM_NTASKS_PER_NODE"] = "2(x2)";
  EXPECT_EQ(ParseRankEnv(slurm)->local_world_size, 2);
}

TEST(ParseRankEnvTest, StrataVariablesTakePrecedence) {
  // torchrun started by srun: RANK is the torchrun rank, SLURM_PROCID the
  // agent's task.
  auto e = ParseRankEnv({{"RANK", "1"},
                         {"WORLD_SIZE", "2"},
                         {"SLURM_PROCID", "0"},
                         {"SLURM_NTASKS", "1"},
                         {"STRATA_STORE", "file:///s"}});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->world_size, 2);
}

TEST(ParseRankEnvTest, MissingVariablesAreNamed) {
  EXPECT_NE(ParseError({{"WORLD_SIZE", "2"}})
                .find("WORLD_SIZE is set but RANK is not"),
            std::string::npos);
  EXPECT_NE(
      ParseError({{"RANK", "0"}}).find("RANK is set but WORLD_SIZE is not"),
      std::string::npos);
  EXPECT_NE(
      ParseError({{"OMPI_COMM_WORLD_RANK", "0"}}).find("OMPI_COMM_WORLD_SIZE"),
      std::string::npos);
  EXPECT_NE(ParseError({{"RANK", "0"}, {"WORLD_SIZE", "2"}})
                .find("STRATA_STORE is not set"),
            std::string::npos);
  // Several hosts and no address to bind: an error, not a loopback bind.
  const std::string no_addr = ParseError({{"RANK", "0"},
                                          {"WORLD_SIZE", "4"},
                                          {"LOCAL_WORLD_SIZE", "2"},
                                          {"STRATA_STORE", "tcp://h:1"}});
  EXPECT_NE(no_addr.find("STRATA_NODE_ADDR is not set"), std::string::npos)
      << no_addr;
  EXPECT_NE(no_addr.find("2 nodes"), std::string::npos) << no_addr;
  EXPECT_NE(ParseError({{"OMPI_COMM_WORLD_RANK", "0"},
                        {"OMPI_COMM_WORLD_SIZE", "4"},
                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                        {"STRATA_STORE", "tcp://h:1"}})
                .find("STRATA_NODE_ADDR is not set"),
            std::string::npos);
}

TEST(ParseRankEnvTest, ConflictsAreNamed) {
  const EnvMap base = {{"RANK", "1"},
                       {"WORLD_SIZE", "4"},
                       {"LOCAL_WORLD_SIZE", "2"},
                       {"STRATA_TP", "2"},
                       {"STRATA_STORE", "tcp://h:1"},
                       {"STRATA_NODE_ADDR", "10.0.0.1"}};
  ASSERT_EQ(ParseError(base), "");
  auto with =
      [&](std::initializer_list<std::pair<const std::string, std::string>>
              changes) {
        EnvMap env = base;
        for (const auto& [k, v] : changes) env[k] = v;
        return ParseError(env);
      };
  EXPECT_NE(with({{"RANK", "4"}}).find("RANK=4 is not below WORLD_SIZE=4"),
            std::string::npos);
  EXPECT_NE(with({{"RANK", "-1"}}).find("RANK='-1' is not an integer >= 0"),
            std::string::npos);
  EXPECT_NE(with({{"WORLD_SIZE", "four"}}).find("WORLD_SIZE='four'"),
            std::string::npos);
  EXPECT_NE(with({{"LOCAL_WORLD_SIZE", "3"}})
                .find("LOCAL_WORLD_SIZE=3 does not divide WORLD_SIZE=4"),
            std::string::npos);
  EXPECT_NE(with({{"LOCAL_RANK", "2"}})
                .find("LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(with({{"NODE_RANK", "2"}}).find("NODE_RANK=2 is not below"),
            std::string::npos);
  EXPECT_NE(with({{"NODE_RANK", "0"}, {"GROUP_RANK", "1"}})
                .find("GROUP_RANK=1 disagrees with NODE_RANK=0"),
            std::string::npos);
  EXPECT_NE(
      with({{"GROUP_WORLD_SIZE", "4"}}).find("GROUP_WORLD_SIZE=4 disagrees"),
      std::string::npos);
  EXPECT_NE(with({{"STRATA_TP", "3"}})
                .find("tp=3 x pp=1 x cp=1 does not divide WORLD_SIZE=4 (sizes "
                      "from STRATA_TP, STRATA_PP, STRATA_CP)"),
            std::string::npos);
  EXPECT_NE(with({{"STRATA_DP", "4"}}).find("STRATA_DP=4 disagrees"),
            std::string::npos);
  // rank 1 is tp rank 1, dp rank 0.
  EXPECT_NE(with({{"STRATA_TP_RANK", "0"}})
                .find("STRATA_TP_RANK=0 disagrees with RANK=1 in the "
                      "tp-cp-dp-pp order (expected 1)"),
            std::string::npos);
  EXPECT_NE(with({{"STRATA_DP_RANK", "1"}}).find("STRATA_DP_RANK=1 disagrees"),
            std::string::npos);
  EXPECT_NE(with({{"STRATA_PP_RANK", "1"}}).find("STRATA_PP_RANK=1"),
            std::string::npos);
  EXPECT_NE(with({{"STRATA_CP_RANK", "1"}}).find("STRATA_CP_RANK=1"),
            std::string::npos);
  EXPECT_NE(
      with({{"STRATA_RESTART_COUNT", "1"}, {"TORCHELASTIC_RESTART_COUNT", "0"}})
          .find("TORCHELASTIC_RESTART_COUNT=0 disagrees with "
                "STRATA_RESTART_COUNT=1"),
      std::string::npos);
  EXPECT_NE(with({{"MASTER_PORT", "70000"}}).find("MASTER_PORT=70000"),
            std::string::npos);
}

TEST(VariablesTest, EmptyValuesAreLeftOut) {
  RankEnv e;
  EnvMap v = Variables(e);
  for (const char* name :
       {"MASTER_ADDR", "MASTER_PORT", "STRATA_STORE", "STRATA_PLAN",
        "STRATA_CKPT_URI", "STRATA_TELEMETRY", "STRATA_NODE_NAME",
        "STRATA_NODE_ADDR", "CUDA_VISIBLE_DEVICES"}) {
    EXPECT_EQ(v.count(name), 0u) << name;
  }
  EXPECT_EQ(v["RANK"], "0");
  EXPECT_EQ(v["STRATA_JOB_ID"], "local");
}

TEST(ParseRankEnvTest, SizesBeyondAnyJobAreRefusedNotAllocated) {
  auto world = ParseRankEnv({{"RANK", "0"}, {"WORLD_SIZE", "2000000000"},
                             {"STRATA_STORE", "tcp://h:1"}});
  ASSERT_EQ(world.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(world.status().message().find(
                "WORLD_SIZE=2000000000 is above the limit of 1048576"),
            std::string::npos)
      << world.status();
  auto local = ParseRankEnv({{"OMPI_COMM_WORLD_RANK", "0"},
                             {"OMPI_COMM_WORLD_SIZE", "4096"},
                             {"OMPI_COMM_WORLD_LOCAL_SIZE", "4096"},
                             {"STRATA_STORE", "tcp://h:1"}});
  ASSERT_EQ(local.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(local.status().message().find("OMPI_COMM_WORLD_LOCAL_SIZE=4096"),
            std::string::npos)
      << local.status();
  auto slurm = ParseRankEnv({{"SLURM_PROCID", "0"},
                             {"SLURM_NTASKS", "8192"},
                             {"SLURM_TASKS_PER_NODE", "2048(x4)"},
                             {"STRATA_STORE", "tcp://h:1"},
                             {"STRATA_NODE_ADDR", "10.0.0.1"}});
  ASSERT_EQ(slurm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(slurm.status().message().find("2048 ranks per node"),
            std::string::npos)
      << slurm.status();
  EXPECT_TRUE(ParseRankEnv({{"RANK", "0"}, {"WORLD_SIZE", "1048576"},
                            {"LOCAL_WORLD_SIZE", "8"},
                            {"STRATA_STORE", "tcp://h:1"},
                            {"STRATA_NODE_ADDR", "10.0.0.1"}})
                  .ok());
}

}  // namespace
}  // namespace strata::placement
