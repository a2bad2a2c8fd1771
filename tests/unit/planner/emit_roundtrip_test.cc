// `--emit megatron` carries the plan (issue 36): the flags it prints, read
// back as --fix values, reproduce the same plan (layout, schedule,
// optimizer, offload, precision, layer split) and the same predicted step.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "planner/emit.h"
#include "planner/launch_plan.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

// "--flag value" and "--switch" lines of EmitMegatron's output ('#' lines
// skipped, a trailing " \" dropped).
std::map<std::string, std::string> Flags(const std::string& text) {
  std::map<std::string, std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripSuffix(absl::StripAsciiWhitespace(line), "\\");
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> kv = absl::StrSplit(line, absl::MaxSplits(' ', 1));
    std::string value = kv.size() > 1 ? kv[1] : "";
    if (value.size() >= 2 && value.front() == '\'') {
      value = value.substr(1, value.size() - 2);
    }
    out[kv[0]] = value;
  }
  return out;
}

int Int(const std::map<std::string, std::string>& f, const std::string& k) {
  int v = 0;
  auto it = f.find(k);
  EXPECT_TRUE(it != f.end() && absl::SimpleAtoi(it->second, &v)) << k;
  return v;
}

// What a user reading the Megatron flags would pin with --fix.
PlanConstraints FixFromFlags(const std::map<std::string, std::string>& f,
                             const ModelSpec& m) {
  PlanConstraints c;
  c.set_tp(Int(f, "--tensor-model-parallel-size"));
  c.set_pp(Int(f, "--pipeline-model-parallel-size"));
  c.set_cp(Int(f, "--context-parallel-size"));
  c.set_micro_batch(Int(f, "--micro-batch-size"));
  if (f.count("--num-layers-per-virtual-pipeline-stage")) {
    c.set_vpp(m.num_layers() /
              (c.pp() * Int(f, "--num-layers-per-virtual-pipeline-stage")));
    c.set_even_layers(true);
  } else if (f.count("--pipeline-model-parallel-layout")) {
    c.set_pipeline_layout(f.at("--pipeline-model-parallel-layout"));
  } else {
    c.set_vpp(1);
    c.set_even_layers(true);
  }
  if (f.count("--expert-model-parallel-size")) {
    c.set_ep(Int(f, "--expert-model-parallel-size"));
    c.set_etp(Int(f, "--expert-tensor-parallel-size"));
  }
  const bool distopt = f.count("--use-distributed-optimizer") > 0;
  c.set_distributed_optimizer(distopt);
  c.set_zero_stage(distopt ? 1 : 0);
  c.set_offload(f.count("--optimizer-cpu-offload") ? Offload::cpu
                                                   : Offload::none);
  c.set_precision(f.count("--fp8-format") ? Precision::fp8 : Precision::bf16);
  if (c.tp() > 1) c.set_sequence_parallel(f.count("--sequence-parallel") > 0);
  auto rc = f.find("--recompute-granularity");
  c.set_recompute(rc == f.end()             ? Recompute::none
                  : rc->second == "full"    ? Recompute::full
                                            : Recompute::selective);
  return c;
}

struct Case {
  const char* label;
  const char* model;
  int64_t gpus;
  int64_t batch;
  int seq;
  std::map<std::string, int> fix;  // tp, pp, vpp, ep, etp, mbs
  bool fp8;
  int mtp;
};

TEST(EmitRoundTripTest, EmittedFlagsReproduceThePlanThroughFix) {
  const Case cases[] = {
      // The case: the emitted plan offloads the optimizer.
      {"llama3-70b 64 GPUs gbs 512", "llama3-70b", 64, 512, 8192, {}, false,
       0},
      {"llama3-8b 8 GPUs", "llama3-8b", 8, 128, 8192, {}, false, 0},
      // Uneven: 94 layers at pp 32 vpp 3 (embedding and loss as stages).
      {"qwen3-235b pp32 vpp3", "qwen3-235b-a22b", 512, 2048, 4096,
       {{"tp", 2}, {"pp", 32}, {"vpp", 3}, {"ep", 8}, {"etp", 1}, {"mbs", 1}},
       true, 0},
      // The balanced split of a searched plan.
      {"llama3-405b 1024 GPUs", "llama3-405b", 1024, 512, 8192,
       {{"tp", 8}, {"pp", 8}}, true, 0},
      // MTP on the last stage.
      {"deepseek-v3 mtp", "deepseek-v3", 1024, 8192, 4096,
       {{"tp", 2}, {"pp", 8}, {"vpp", 4}, {"ep", 64}, {"etp", 1}, {"mbs", 1}},
       true, 1},
      {"mixtral-8x7b", "mixtral-8x7b", 64, 256, 4096,
       {{"tp", 1}, {"pp", 4}, {"vpp", 8}, {"ep", 8}, {"etp", 1}, {"mbs", 1}},
       false, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    PlanRequest req;
    req.model = *LoadModel(c.model);
    req.model.set_mtp_num_layers(c.mtp);
    req.cluster = *topology::LoadCluster("dgx-h100");
    req.gpus = c.gpus;
    req.top_k = 1;
    req.job.set_global_batch(c.batch);
    req.job.set_seq_length(c.seq);
    PlanConstraints* f = req.job.mutable_constraints();
    for (const auto& [k, v] : c.fix) {
      if (k == "tp") f->set_tp(v);
      if (k == "pp") f->set_pp(v);
      if (k == "vpp") f->set_vpp(v);
      if (k == "ep") f->set_ep(v);
      if (k == "etp") f->set_etp(v);
      if (k == "mbs") f->set_micro_batch(v);
    }
    if (c.fp8) f->set_precision(Precision::fp8);
    auto launch = PlanForLaunch(req);
    ASSERT_TRUE(launch.ok()) << launch.status();
    const Plan& emitted = launch->plan;
    const std::string text = EmitMegatron(emitted, req.model, launch->note);
    PlanRequest back;
    back.model = req.model;
    back.cluster = req.cluster;
    back.gpus = c.gpus;
    back.top_k = 1;
    back.with_placement = false;
    back.megatron_compatible = true;
    const auto flags = Flags(text);
    back.job.set_global_batch(Int(flags, "--global-batch-size"));
    back.job.set_seq_length(Int(flags, "--seq-length"));
    *back.job.mutable_constraints() = FixFromFlags(flags, req.model);
    auto again = PlanJob(back);
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << text;
    const Plan& p = again->plans(0);
    EXPECT_EQ(PlanConfiguration(p), PlanConfiguration(emitted)) << text;
    EXPECT_EQ(std::vector<int>(p.layers_per_stage().begin(),
                               p.layers_per_stage().end()),
              std::vector<int>(emitted.layers_per_stage().begin(),
                               emitted.layers_per_stage().end()))
        << text;
    EXPECT_NEAR(p.step_time_s(), emitted.step_time_s(),
                1e-9 * emitted.step_time_s())
        << text;
  }
}

}  // namespace
}  // namespace strata::planner
