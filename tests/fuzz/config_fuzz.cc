// libFuzzer target for config-file parsing and validation (common/config.h,
// planner::LoadModel / NormalizeModel, topology::ValidateCluster,
// planner::LoadJob ranges) and for planning what they accept.
//
// Input: the first byte picks the file kind the rest of the input is
// (model, cluster or job); the other two inputs are fixed small ones. Every
// input must be rejected with InvalidArgument or accepted; an accepted
// model and cluster are then planned with a 50 ms time budget, which must
// end in a report or a canonical planner error. ASan/UBSan in the fuzz
// build catch crashes, overflows and leaks; libFuzzer's -timeout and
// -rss_limit_mb catch runaway time and memory.
// Built by tests/fuzz/CMakeLists.txt (clang, -fsanitize=fuzzer); without
// libFuzzer, config_corpus_test replays tests/fuzz/config_corpus with it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/config.h"
#include "common/embedded.h"
#include "common/status.h"
#include "planner/job.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace sp = strata::planner;

namespace {

constexpr char kModel[] = R"(name: fuzz-model
num_layers: 4
hidden_size: 256
num_attention_heads: 4
vocab_size: 1000
seq_length: 512
)";

constexpr char kCluster[] = R"(name: fuzz-cluster
gpu: {name: g, peak_bf16_tflops: 100, memory_gib: 16, gemm_efficiency: 0.7,
      hbm_gbps: 1000}
gpus_per_node: 4
intra_node_gbps: 100
nics: [{count: 1, gbps: 100}]
num_nodes: 4
)";

// Parses and validates `text` as a model; InvalidArgument or OK.
strata::StatusOr<strata::ModelSpec> Model(const std::string& text) {
  strata::ModelSpec m;
  RETURN_IF_ERROR(
      strata::ParseConfig(text, "model.yaml", &m, sp::ModelRanges()));
  RETURN_IF_ERROR(sp::NormalizeModel(&m));
  return m;
}

strata::StatusOr<strata::ClusterSpec> Cluster(const std::string& text) {
  strata::ClusterSpec c;
  RETURN_IF_ERROR(strata::ParseConfig(text, "cluster.yaml", &c,
                                      strata::topology::ClusterRanges()));
  RETURN_IF_ERROR(strata::topology::ValidateCluster(c));
  return c;
}

strata::StatusOr<strata::JobSpec> Job(const std::string& text) {
  strata::JobSpec j;
  RETURN_IF_ERROR(strata::ParseConfig(text, "job.yaml", &j, sp::JobRanges()));
  RETURN_IF_ERROR(sp::ValidateJob(j, "job.yaml"));
  return j;
}

template <typename T>
bool Accepted(const strata::StatusOr<T>& r) {
  if (r.ok()) return true;
  STRATA_CHECK(absl::IsInvalidArgument(r.status()));
  STRATA_CHECK(!r.status().message().empty());
  return false;
}

}  // namespace

// LoadModel and LoadCluster link against the embedded presets; the clang
// fuzz build compiles the modules' sources without them.
#ifdef STRATA_FUZZ_NO_PRESETS
namespace strata {
extern const EmbeddedFile kModelPresets[] = {{"none", ""}};
extern const int kModelPresets_count = 0;
extern const EmbeddedFile kClusterPresets[] = {{"none", ""}};
extern const int kClusterPresets_count = 0;
}  // namespace strata
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int kind = data[0] % 3;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto model = Model(kind == 0 ? text : kModel);
  auto cluster = Cluster(kind == 1 ? text : kCluster);
  auto job = Job(kind == 2 ? text : "global_batch: 8\n");
  if (!Accepted(model) || !Accepted(cluster) || !Accepted(job)) return 0;

  sp::PlanRequest req;
  req.model = *model;
  req.cluster = *cluster;
  req.job = *job;
  if (!req.job.has_global_batch()) req.job.set_global_batch(8);
  req.gpus = cluster->num_nodes() > 0 ? strata::topology::ClusterGpus(*cluster)
                                      : cluster->gpus_per_node();
  if (req.gpus > sp::kMaxGpus) req.gpus = sp::kMaxGpus;
  req.top_k = 2;
  req.time_budget_s = 0.05;
  auto report = sp::PlanJob(req);
  if (report.ok()) {
    STRATA_CHECK(report->plans_size() > 0);
    STRATA_CHECK(report->plans(0).step_time_s() > 0);
  } else {
    const absl::StatusCode code = report.status().code();
    STRATA_CHECK(code == absl::StatusCode::kInvalidArgument ||
                 code == absl::StatusCode::kResourceExhausted ||
                 code == absl::StatusCode::kOutOfRange ||
                 code == absl::StatusCode::kDeadlineExceeded);
  }
  return 0;
}
