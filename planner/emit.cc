#include "planner/emit.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/pipeline_layout.h"

namespace strata::planner {
namespace {

std::vector<std::string> MegatronFlags(const Plan& plan, const ModelSpec& m,
                                       std::string* comment) {
  std::vector<std::string> f;
  auto add = [&](const std::string& name, auto value) {
    f.push_back(absl::StrCat(name, " ", value));
  };
  add("--tensor-model-parallel-size", plan.tp());
  add("--pipeline-model-parallel-size", plan.pp());
  // The split: Megatron's default (l / p layers per stage, l / (p v) per
  // virtual stage) when it is the plan's, else the layout string, which
  // says any split (pipeline_layout.h) and fixes vpp itself.
  const auto& layers = plan.layers_per_stage();
  bool even = m.num_layers() % (plan.pp() * plan.vpp()) == 0;
  for (int l : layers) even &= l == m.num_layers() / plan.pp();
  if (even && plan.vpp() > 1) {
    add("--num-layers-per-virtual-pipeline-stage",
        m.num_layers() / (plan.pp() * plan.vpp()));
  } else if (!even && plan.pp() > 1) {
    add("--pipeline-model-parallel-layout",
        absl::StrCat("'",
                     LayoutString(std::vector<int>(layers.begin(),
                                                   layers.end()),
                                  plan.vpp(), m.mtp_num_layers()),
                     "'"));
  }
  add("--context-parallel-size", plan.cp());
  if (m.num_experts() > 0) {
    // Megatron-core MoE (megatron/core/transformer/moe/README.md, "MoE
    // Related Arguments"); EP and ETP fold into DP x CP and TP.
    add("--expert-model-parallel-size", std::max(1, plan.ep()));
    add("--expert-tensor-parallel-size", std::max(1, plan.etp()));
  }
  if (plan.sequence_parallel()) f.push_back("--sequence-parallel");
  add("--micro-batch-size", plan.micro_batch());
  add("--global-batch-size", plan.global_batch());
  add("--seq-length", plan.seq_length());
  add("--max-position-embeddings", plan.seq_length());
  if (plan.distributed_optimizer() || plan.zero_stage() == 1) {
    f.push_back("--use-distributed-optimizer");
  }
  // Optimizer offload: Megatron-core's CPU offload of its distributed
  // optimizer (docs.nvidia.com megatron-core "Optimizer CPU offload"); the
  // d2h/h2d overlap is the schedule the cost model assumes. Megatron has no
  // NVMe offload (DeepSpeed ZeRO-Infinity's offload_optimizer device nvme).
  if (plan.offload() == Offload::cpu) {
    f.push_back("--optimizer-cpu-offload");
    add("--optimizer-offload-fraction", "1.0");
    f.push_back("--use-precision-aware-optimizer");
    f.push_back("--overlap-cpu-optimizer-d2h-h2d");
  } else if (plan.offload() == Offload::nvme) {
    absl::StrAppend(comment,
                    "# offload nvme: Megatron-LM cannot offload to NVMe; "
                    "run this plan with DeepSpeed ZeRO-Infinity "
                    "(offload_optimizer: {device: nvme})\n");
  }
  if (plan.recompute() == Recompute::selective) {
    add("--recompute-granularity", "selective");
    if (m.num_experts() > 0) {
      // What the cost model's selective mode drops for MoE models.
      add("--recompute-modules", m.attention() == AttentionKernel::flash
                                     ? "moe_act layernorm"
                                     : "core_attn moe_act layernorm");
    }
  } else if (plan.recompute() == Recompute::full) {
    add("--recompute-granularity", "full");
    add("--recompute-method", "uniform");
    add("--recompute-num-layers", 1);
  }
  add("--num-layers", m.num_layers());
  add("--hidden-size", m.hidden_size());
  add("--ffn-hidden-size", m.ffn_hidden_size());
  add("--num-attention-heads", m.num_attention_heads());
  if (m.num_query_groups() != m.num_attention_heads()) {
    f.push_back("--group-query-attention");
    add("--num-query-groups", m.num_query_groups());
  }
  if (m.activation() == Activation::swiglu) f.push_back("--swiglu");
  if (m.position_embedding() == PositionEmbedding::rope) {
    add("--position-embedding-type", "rope");
  }
  if (m.norm() == Norm::rmsnorm) add("--normalization", "RMSNorm");
  if (!m.linear_bias()) f.push_back("--disable-bias-linear");
  if (!m.tied_embeddings()) {
    f.push_back("--untie-embeddings-and-output-weights");
  }
  if (m.has_kv_channels() && m.kv_lora_rank() == 0) {
    add("--kv-channels", m.kv_channels());
  }
  if (m.kv_lora_rank() > 0) {
    // Megatron-core multi-latent attention (DeepSeek-V2/V3).
    f.push_back("--multi-latent-attention");
    if (m.q_lora_rank() > 0) add("--q-lora-rank", m.q_lora_rank());
    add("--kv-lora-rank", m.kv_lora_rank());
    add("--qk-head-dim", m.kv_channels());
    add("--qk-pos-emb-head-dim", m.qk_pos_emb_head_dim());
    add("--v-head-dim", m.v_head_dim());
  }
  if (m.mtp_num_layers() > 0) add("--mtp-num-layers", m.mtp_num_layers());
  if (m.num_experts() > 0) {
    add("--num-experts", m.num_experts());
    add("--moe-router-topk", m.moe_router_topk());
    add("--moe-ffn-hidden-size", m.moe_ffn_hidden_size());
    if (m.moe_shared_expert_intermediate_size() > 0) {
      add("--moe-shared-expert-intermediate-size",
          m.moe_shared_expert_intermediate_size());
    }
    const int freq = m.has_moe_layer_freq() ? m.moe_layer_freq() : 1;
    if (m.moe_num_dense_layers() > 0 || freq > 1) {
      // A Python list expression: 0 = dense layer, 1 = MoE layer.
      std::vector<std::string> pattern;
      for (int i = 0; i < m.num_layers(); ++i) {
        const int j = i - m.moe_num_dense_layers();
        pattern.push_back(j >= 0 && j % freq == 0 ? "1" : "0");
      }
      add("--moe-layer-freq",
          absl::StrCat("'[", absl::StrJoin(pattern, ","), "]'"));
    }
    if (m.has_moe_capacity_factor()) {
      add("--moe-expert-capacity-factor", m.moe_capacity_factor());
    }
    add("--moe-token-dispatcher-type", "alltoall");
    f.push_back("--moe-grouped-gemm");
  }
  f.push_back("--bf16");
  if (plan.precision() == "fp8") {
    // Transformer Engine FP8 as Megatron-LM / NeMo recipes run it: E4M3
    // forward, E5M2 gradients, delayed scaling over 1024 steps of amax.
    add("--fp8-format", "hybrid");
    add("--fp8-amax-history-len", 1024);
    add("--fp8-amax-compute-algo", "max");
    if (plan.distributed_optimizer()) {
      // FP8 compute weights, gathered in FP8 (the cost model's memory and
      // all-gather volume assume it).
      f.push_back("--fp8-param-gather");
    }
  }
  return f;
}

}  // namespace

std::string EmitMegatron(const Plan& plan, const ModelSpec& model,
                         const std::string& note) {
  std::string comment;
  std::vector<std::string> flags = MegatronFlags(plan, model, &comment);
  return note + comment + absl::StrJoin(flags, " \\\n") + "\n";
}

std::string EmitTorchrun(const Plan& plan, const ModelSpec& model,
                         const ClusterSpec& cluster, int64_t gpus,
                         const std::string& note) {
  const int gpn = cluster.gpus_per_node();
  const int64_t nodes = (gpus + gpn - 1) / gpn;
  const int per_node = gpus < gpn ? static_cast<int>(gpus) : gpn;
  std::string comment;
  std::vector<std::string> flags = MegatronFlags(plan, model, &comment);
  std::string out = absl::StrCat(
      note, "# strata plan: tp=", plan.tp(), " pp=", plan.pp(),
      " dp=", plan.dp(), " cp=", plan.cp(),
      model.num_experts() > 0
          ? absl::StrCat(" ep=", plan.ep(), " etp=", plan.etp())
          : std::string(),
      " vpp=", plan.vpp(),
      " precision=", plan.precision().empty() ? "bf16" : plan.precision(),
      " on ", nodes, " node(s) x ", per_node, " GPUs.\n",
      "# Run on every node with NODE_RANK (0..", nodes - 1,
      ") and MASTER_ADDR (node 0's address) set.\n", comment,
      "export STRATA_TP=", plan.tp(), " STRATA_PP=", plan.pp(),
      " STRATA_DP=", plan.dp(), " STRATA_CP=", plan.cp(),
      model.num_experts() > 0
          ? absl::StrCat(" STRATA_EP=", plan.ep(), " STRATA_ETP=", plan.etp())
          : std::string(),
      "\n",
      "export CUDA_DEVICE_MAX_CONNECTIONS=1  # Megatron: ordered TP/SP "
      "kernels\n",
      "torchrun --nnodes=", nodes, " --nproc-per-node=", per_node,
      " --node-rank=$NODE_RANK --master-addr=$MASTER_ADDR "
      "--master-port=29500 \\\n  pretrain_gpt.py \\\n  ",
      absl::StrJoin(flags, " \\\n  "), "\n");
  return out;
}

}  // namespace strata::planner
