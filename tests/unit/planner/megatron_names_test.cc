// Model files with Megatron-core's names (issue 36 part 1): a recipe's
// model section loads unchanged, aliases agree with strata's names, MTP
// layers count, and every other name is refused by name.
#include "planner/megatron_names.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

// The architecture fields of Megatron-Bridge's DeepSeekV3ModelProvider
// (src/megatron/bridge/models/deepseek/deepseek_provider.py: the V3 class
// and the DeepSeekModelProvider defaults it inherits), as a recipe's model
// section writes them, with mtp_num_layers 1 as the DeepSeek-V3 recipes
// set it. Nothing renamed.
constexpr char kDeepSeekV3Recipe[] = R"(
num_layers: 61
hidden_size: 7168
ffn_hidden_size: 18432
num_attention_heads: 128
kv_channels: 128
num_moe_experts: 256
moe_ffn_hidden_size: 2048
moe_shared_expert_intermediate_size: 2048
moe_layer_freq: [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
moe_router_topk: 8
moe_router_num_groups: 8
moe_router_group_topk: 4
moe_router_topk_scaling_factor: 2.5
moe_aux_loss_coeff: 0.0001
make_vocab_size_divisible_by: 1280
moe_router_score_function: sigmoid
moe_router_enable_expert_bias: true
moe_router_bias_update_rate: 0.001
mscale: 1.0
mscale_all_dim: 1.0
vocab_size: 129280
normalization: RMSNorm
activation_func:
  _target_: torch.nn.functional.silu
  _call_: false
gated_linear_unit: true
position_embedding_type: rope
add_bias_linear: false
share_embeddings_and_output_weights: false
max_position_embeddings: 4096
seq_length: 4096
rotary_base: 10000.0
mtp_num_layers: 1
mtp_loss_scaling_factor: 0.1
attention_dropout: 0.0
hidden_dropout: 0.0
qk_layernorm: true
moe_grouped_gemm: true
moe_router_pre_softmax: true
moe_token_dispatcher_type: alltoall
moe_router_load_balancing_type: seq_aux_loss
moe_shared_expert_overlap: true
moe_router_dtype: fp32
q_lora_rank: 1536
kv_lora_rank: 512
qk_head_dim: 128
qk_pos_emb_head_dim: 64
v_head_dim: 128
rotary_scaling_factor: 40
init_method_std: 0.006
layernorm_epsilon: 1.0e-6
bf16: true
async_tensor_model_parallel_allreduce: true
attention_softmax_in_fp32: false
persist_layer_norm: true
num_layers_in_first_pipeline_stage: null
num_layers_in_last_pipeline_stage: null
account_for_embedding_in_pipeline_split: false
account_for_loss_in_pipeline_split: false
multi_latent_attention: true
apply_rope_fusion: false
bias_activation_fusion: true
bias_dropout_fusion: true
masked_softmax_fusion: true
gradient_accumulation_fusion: true
cross_entropy_loss_fusion: true
cross_entropy_fusion_impl: te
moe_permute_fusion: true
)";

std::string WriteModel(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name + ".yaml";
  std::ofstream(path) << text;
  return path;
}

StatusOr<ModelSpec> Load(const std::string& name, const std::string& text) {
  return LoadModel(WriteModel(name, text));
}

TEST(MegatronNamesTest, RecipeModelSectionLoadsUnchanged) {
  auto m = Load("dsv3-recipe", kDeepSeekV3Recipe);
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelSpec preset = *LoadModel("deepseek-v3");
  // Every field the preset gives, the recipe gives the same.
  EXPECT_EQ(m->num_experts(), 256);
  EXPECT_EQ(m->moe_num_dense_layers(), 3);
  EXPECT_EQ(m->moe_layer_freq(), 1);
  EXPECT_EQ(m->kv_channels(), 128);
  EXPECT_EQ(m->kv_lora_rank(), preset.kv_lora_rank());
  EXPECT_EQ(m->q_lora_rank(), preset.q_lora_rank());
  EXPECT_EQ(m->norm(), Norm::rmsnorm);
  EXPECT_EQ(m->activation(), Activation::swiglu);
  EXPECT_EQ(m->position_embedding(), PositionEmbedding::rope);
  EXPECT_FALSE(m->linear_bias());
  EXPECT_FALSE(m->tied_embeddings());
  EXPECT_FALSE(m->dropout());
  EXPECT_EQ(m->precision(), Precision::bf16);
  EXPECT_EQ(m->mtp_num_layers(), 1);
  // Same model as the preset, plus the MTP module: one layer (the mean
  // layer, 11.0B) and the 2h x h projection; DeepSeek-V3's card counts
  // 671B + 14B, its 14B with its own copies of the embedding and head
  // (2 x 0.93B), which Megatron-core shares with the main model.
  const ParamCount pp = CountParameters(preset, 4096);
  const ParamCount pm = CountParameters(*m, 4096);
  EXPECT_NEAR(pm.Total(61) - pp.Total(61), pp.per_layer + 2 * 7168.0 * 7168,
              1e8);
  EXPECT_NEAR(pm.Total(61) / 1e9, 682.0, 1.5);
}

TEST(MegatronNamesTest, MtpLayersCostTimeOnTheLastStage) {
  ModelSpec with = *Load("dsv3-mtp", kDeepSeekV3Recipe);
  ModelSpec without = with;
  without.set_mtp_num_layers(0);
  auto plan = [](const ModelSpec& m) {
    PlanRequest req;
    req.model = m;
    req.cluster = *topology::LoadCluster("dgx-h100");
    req.gpus = 1024;
    req.top_k = 1;
    req.with_placement = false;
    req.job.set_global_batch(8192);
    PlanConstraints* f = req.job.mutable_constraints();
    f->set_tp(2);
    f->set_pp(8);
    f->set_vpp(4);
    f->set_ep(64);
    f->set_etp(1);
    f->set_micro_batch(1);
    f->set_precision(Precision::fp8);
    f->set_zero_stage(1);
    f->set_distributed_optimizer(true);
    auto r = PlanJob(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->plans(0) : Plan();
  };
  const Plan a = plan(with), b = plan(without);
  EXPECT_GT(a.step_time_s(), b.step_time_s());
  // The balanced split moves layers off the last stage that holds it.
  EXPECT_LT(a.layers_per_stage(7), b.layers_per_stage(7));
}

struct Refusal {
  const char* text;
  const char* message;
};

TEST(MegatronNamesTest, RefusesByNameWithTheNearestOrTheRule) {
  const std::string base =
      "num_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\n"
      "vocab_size: 100\nseq_length: 128\n";
  const Refusal cases[] = {
      {"num_attention_head: 4\n",
       "field 'num_attention_head': unknown field in ModelSpec (nearest known "
       "field: 'num_attention_heads'"},
      {"moe_router_topkk: 2\n", "nearest known field: 'moe_router_topk'"},
      {"tensor_model_parallel_size: 2\n",
       "a parallel layout setting (2), not part of the model: remove it and "
       "give it to strata plan as --fix tp=N"},
      {"pipeline_model_parallel_layout: Et|tL\n", "--fix layout=STRING"},
      {"linear_attention_freq: 4\n",
       "field 'linear_attention_freq': Megatron-core's linear-attention "
       "layers, which strata's cost model does not represent"},
      {"window_size: [128, 0]\nwindow_attn_skip_freq: 2\n"
       "softmax_type: learnable\n",
       ""},  // valid: gpt-oss's alternating windows and sinks
      {"window_size: [128, 128]\n", "expected null or [w, 0]"},
      {"window_attn_skip_freq: [0, 1]\n", "per-layer lists are not modelled"},
      {"window_attn_skip_freq: 2\n", "needs window_size > 0"},
      {"softmax_type: sparsemax\n",
       "expected vanilla, off-by-one or learnable"},
      {"num_moe_experts: 8\nnum_experts: 16\n",
       "sets 'num_experts' to '16', which 'num_moe_experts' already set to "
       "'8'"},
      {"num_moe_experts: 8\nmoe_layer_freq: [1, 0]\n", ""},  // valid
      {"num_moe_experts: 8\nmoe_layer_freq: [1, 1, 1]\n",
       "the list has 3 entries for num_layers 2"},
      {"num_moe_experts: 8\nmoe_layer_freq: [0, 1, 1, 0]\n",
       "entry 3 breaks the period 1"},
      {"normalization: BatchNorm\n", "expected RMSNorm or LayerNorm"},
      {"multi_latent_attention: true\n", "true needs kv_lora_rank > 0"},
      {"gated_linear_unit: true\nactivation: gelu\n",
       "sets 'activation' to 'swiglu', which 'activation' already set to "
       "'gelu'"},
      // Run settings of the recipes (planner/megatron_run_fields.h).
      {"moe_token_dispatcher_type: deepep\n",
       "field 'moe_token_dispatcher_type': expected one of alltoall, "
       "allgather, flex"},
      {"moe_flex_dispatcher_backend: nccl\n",
       "expected one of deepep, hybridep"},
      {"cuda_graph_impl: full_iteration\n", "whole-iteration CUDA graph"},
      {"cuda_graph_impl: cudnn\n",
       "expected one of none, local, transformer_engine"},
      {"cuda_graph_scope: [moe_router, moe]\n", "drop-and-pad MoE layers"},
      {"cuda_graph_scope: [moe_routr]\n",
       "unknown CUDA-graph scope 'moe_routr' (nearest: 'moe_router'"},
      {"cuda_graph_modules: full_iteration\n", "whole-iteration"},
      {"overlap_moe_expert_parallel_comm: true\n", "combined-1F1B"},
      {"delay_wgrad_compute: yes please\n", "expected true or false"},
      {"cuda_graph_scop: [attn]\n",
       "nearest known field: 'cuda_graph_scope'"},
      {"moe_token_dispatcher_type: flex\nmoe_flex_dispatcher_backend: "
       "deepep\noverlap_moe_expert_parallel_comm: false\n",
       ""},  // valid: DeepSeek-V3's H100 recipe without the overlap
  };
  int i = 0;
  for (const Refusal& c : cases) {
    auto m = Load("refuse" + std::to_string(i++), base + c.text);
    if (c.message[0] == '\0') {
      EXPECT_TRUE(m.ok()) << c.text << m.status();
      continue;
    }
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(m.status().message()).find(c.message),
              std::string::npos)
        << c.text << " -> " << m.status().message();
  }
}

// The run settings of Megatron-Bridge's Qwen3-30B-A3B DGX-B200 recipe
// (scripts/performance/configs/qwen/qwen3_workload_base_configs.py at
// 5776a6d: cuda_graph_impl transformer_engine, cuda_graph_scope
// [moe_router, moe_preprocess]; the alltoall dispatcher of its provider)
// load and change nothing the planner sees: the graphs leave the expert
// block's host work and the dispatcher's synchronisation outside
// (docs/planner.md "The host-bound expert block"), so the host-bound term
// still applies in full.
TEST(MegatronNamesTest, RecipeRunSettingsLeaveTheModelUnchanged) {
  const std::string model =
      "num_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\n"
      "vocab_size: 100\nseq_length: 128\nnum_moe_experts: 8\n"
      "moe_router_topk: 2\nmoe_ffn_hidden_size: 32\n";
  auto plain = Load("run-plain", model);
  auto recipe = Load(
      "run-recipe",
      model +
          "moe_token_dispatcher_type: alltoall\n"
          "moe_flex_dispatcher_backend: null\n"
          "cuda_graph_impl: transformer_engine\n"
          "cuda_graph_scope: [attn, moe_router, moe_preprocess]\n"
          "overlap_moe_expert_parallel_comm: false\n"
          "delay_wgrad_compute: false\n");
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  recipe->clear_name();  // the file's path
  plain->clear_name();
  EXPECT_EQ(recipe->SerializeAsString(), plain->SerializeAsString());
}

// Hostile files with Megatron names get ParseConfig's refusal, not a
// crash in the translation's YAML parse.
TEST(MegatronNamesTest, DeepNestingIsRefusedNotParsed) {
  const std::string head = "num_layers: 2\nnum_moe_experts: ";
  std::string flow = head + std::string(100000, '[') + std::string(100000, ']');
  std::string block = head + "\n";
  for (int i = 1; i < 3000; ++i) block += std::string(i, ' ') + "- \n";
  for (const std::string& text : {flow, block}) {
    auto m = Load("deep", text);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument)
        << m.status();
  }
}

TEST(MegatronNamesTest, StrataNamesPassThroughUntouched) {
  const std::string text = "num_layers: 2\nhidden_size: 64\n";
  auto out = TranslateMegatronNames(text, "x");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, text);
  // Every preset still loads (they use only ModelSpec names).
  for (const std::string& name : ModelPresetNames()) {
    EXPECT_TRUE(LoadModel(name).ok()) << name;
  }
  EXPECT_EQ(NearestModelField("hiden_size"), "hidden_size");
}

}  // namespace
}  // namespace strata::planner
