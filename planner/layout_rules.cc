#include "planner/layout_rules.h"

#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "planner/pipeline_layout.h"

namespace strata::planner::search_internal {
namespace {

bool PinsSplit(const PlanConstraints& fix) {
  return fix.has_first_stage_layers() || fix.has_last_stage_layers() ||
         fix.account_for_embedding() || fix.account_for_loss() ||
         fix.has_pipeline_layout();
}

Status Refuse(const PlanRequest& req, const std::string& rule) {
  return absl::InvalidArgumentError(absl::StrCat(
      "no parallel layout of model '", req.model.name(), "' uses exactly ",
      req.gpus, " GPUs with global batch ", req.job.global_batch(),
      " and the pinned --fix values: ", rule));
}

// The first rule a pinned tp breaks, or "".
std::string TpRule(const PlanRequest& req, int t) {
  const ModelSpec& m = req.model;
  const int gpn = req.cluster.gpus_per_node();
  const std::pair<const char*, int64_t> sizes[] = {
      {"GPUs per node", gpn},
      {"num_attention_heads", m.num_attention_heads()},
      {"num_query_groups", m.num_query_groups()},
      {"hidden_size", m.hidden_size()},
      {"ffn_hidden_size", m.ffn_hidden_size()},
      {"moe_shared_expert_intermediate_size",
       m.moe_shared_expert_intermediate_size()},
  };
  for (const auto& [name, size] : sizes) {
    if (size % t != 0) {
      return absl::StrCat("tp ", t, " must divide the ", size, " ", name,
                          " (TP splits them evenly and stays in a node)");
    }
  }
  return "";
}

}  // namespace

Status CheckPinnedSplit(const PlanRequest& req) {
  const PlanConstraints& fix = req.job.constraints();
  if (!PinsSplit(fix)) return absl::OkStatus();
  if (!fix.has_pp()) {
    return absl::InvalidArgumentError(
        "--fix first/last/embedding_stage/loss_stage/layout pin a split "
        "for one pipeline size: give --fix pp too");
  }
  const int p = fix.pp();
  int v = fix.has_vpp() ? fix.vpp() : 0;
  if (fix.has_pipeline_layout()) {
    ASSIGN_OR_RETURN(const int lv, LayoutVpp(fix.pipeline_layout(), p));
    if (v > 0 && v != lv) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fix layout holds ", p * lv, " virtual stages, vpp ", lv,
          " at pp ", p, "; --fix vpp=", v, " contradicts it"));
    }
    v = lv;
  }
  // Without a pinned vpp the rules are checked at vpp 1 here; other vpp
  // values that break them are skipped by the search.
  return PinnedStageLayers(fix, req.model, p, v > 0 ? v : 1).status();
}

Status NoLayoutError(const PlanRequest& req) {
  const PlanConstraints& fix = req.job.constraints();
  const ModelSpec& m = req.model;
  const int64_t n = req.gpus, batch = req.job.global_batch();
  const int l = m.num_layers();
  if (fix.has_tp()) {
    if (std::string r = TpRule(req, fix.tp()); !r.empty()) {
      return Refuse(req, r);
    }
  }
  const int seq = req.job.has_seq_length() ? req.job.seq_length()
                                           : m.seq_length();
  if (fix.has_cp() && seq % (2 * fix.cp()) != 0) {
    return Refuse(req, absl::StrCat("the sequence ", seq,
                                    " must divide by 2 x cp = ", 2 * fix.cp(),
                                    " (context parallelism's causal split)"));
  }
  if (fix.has_pp() && fix.pp() > l) {
    return Refuse(req, absl::StrCat("pp ", fix.pp(), " exceeds the ", l,
                                    " transformer layers (a stage needs one)"));
  }
  int64_t pinned = 1;
  std::string named;
  for (auto [has, value, name] :
       {std::tuple{fix.has_tp(), fix.tp(), "tp"},
        std::tuple{fix.has_cp(), fix.cp(), "cp"},
        std::tuple{fix.has_pp(), fix.pp(), "pp"},
        std::tuple{fix.has_dp(), fix.dp(), "dp"}}) {
    if (!has) continue;
    pinned *= value;
    absl::StrAppend(&named, named.empty() ? "" : " x ", name, " ", value);
  }
  if (pinned > 1 && n % pinned != 0) {
    return Refuse(req, absl::StrCat(named, " = ", pinned,
                                    " must divide the ", n, " GPUs"));
  }
  const bool all = fix.has_tp() && fix.has_cp() && fix.has_pp();
  const int64_t d = all ? n / pinned * (fix.has_dp() ? fix.dp() : 1) : 0;
  if (all && fix.has_dp() && pinned != n) {
    return Refuse(req, absl::StrCat(named, " = ", pinned, " must equal the ",
                                    n, " GPUs"));
  }
  if (d > 0 && batch % d != 0) {
    return Refuse(req, absl::StrCat("dp = gpus / (tp cp pp) = ", d,
                                    " must divide the global batch ", batch));
  }
  if (d > 0 && fix.has_micro_batch() && (batch / d) % fix.micro_batch() != 0) {
    return Refuse(req, absl::StrCat("the micro-batch ", fix.micro_batch(),
                                    " must divide the replica's batch ",
                                    batch / d, " (global batch / dp ", d, ")"));
  }
  if (fix.has_vpp() && fix.vpp() > 1) {
    const int v = fix.vpp();
    if (!fix.has_pp() || fix.pp() == 1) {
      if (fix.has_pp()) {
        return Refuse(req, "vpp > 1 (interleaved schedule) needs pp > 1");
      }
    } else {
      const int p = fix.pp();
      if (p * v > l + 2) {
        return Refuse(req, absl::StrCat(
                               "pp ", p, " x vpp ", v, " = ", p * v,
                               " virtual stages need a transformer layer "
                               "each, or ",
                               p * v - 2,
                               " with the embedding and the loss as virtual "
                               "stages of their own; the model has ",
                               l));
      }
      if (d > 0 && fix.has_micro_batch()) {
        const int64_t mb = batch / d / fix.micro_batch();
        if (mb % p != 0) {
          return Refuse(req, absl::StrCat(
                                 "the interleaved schedule (vpp > 1) needs "
                                 "the ",
                                 mb, " micro-batches to divide by pp ", p,
                                 " (Megatron-LM schedules.py)"));
        }
      }
    }
  }
  if (m.num_experts() > 0 && fix.has_ep() && d > 0) {
    const int64_t ranks = static_cast<int64_t>(fix.tp()) * fix.cp() * d;
    const int etp = fix.has_etp() ? fix.etp() : 1;
    if (ranks % (static_cast<int64_t>(fix.ep()) * etp) != 0) {
      return Refuse(req, absl::StrCat("ep ", fix.ep(), " x etp ", etp,
                                      " must divide a stage's tp x cp x dp = ",
                                      ranks, " ranks (MoE parallel folding)"));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "no parallel layout of model '", m.name(), "' uses exactly ", n,
      " GPUs with global batch ", batch,
      (fix.ByteSizeLong() > 0 ? " and the pinned --fix values" : ""),
      ": tp must divide ", req.cluster.gpus_per_node(),
      " (GPUs per node) and the attention heads, pp must be at most the ", l,
      " layers (pp x vpp at most ", l + 2,
      " with the embedding and loss as virtual stages), and dp = "
      "gpus/(tp pp cp) must divide the global batch",
      m.num_experts() > 0
          ? absl::StrCat("; for MoE, ep must divide the ", m.num_experts(),
                         " experts and ep x etp must divide tp x cp x dp")
          : std::string()));
}

}  // namespace strata::planner::search_internal
