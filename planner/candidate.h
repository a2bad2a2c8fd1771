// One point of the planner's search space.
#pragma once

#include <string>

#include "proto/plan.pb.h"

namespace strata::planner {

struct Candidate {
  int tp = 1;  // tensor parallel (with sequence parallelism when > 1)
  int pp = 1;  // pipeline stages
  int dp = 1;  // data-parallel replicas
  int cp = 1;  // context parallel (sequence split across ranks)
  // MoE layers: expert parallel and expert tensor parallel sizes, folded
  // into each stage's tp x cp x dp ranks (Megatron-core "MoE parallel
  // folding": ep x etp divides tp x cp x dp; the experts' data-parallel
  // size is tp cp dp / (ep etp)). 1 for dense models.
  int ep = 1;
  int etp = 1;
  int vpp = 1;  // virtual stages per pipeline rank (interleaved 1F1B)
  int micro_batch = 1;
  int num_microbatches = 1;  // per pipeline per step: B / (micro_batch dp)
  // 0-3 per Rajbhandari et al. (DeepSpeed ZeRO); distributed_optimizer is
  // Megatron-LM's sharded optimizer (ZeRO-1 with fp32 gradients) and implies
  // zero_stage == 1.
  int zero_stage = 0;
  bool distributed_optimizer = false;
  Recompute::Mode recompute = Recompute::none;
  // Sequence parallelism (Korthikanti et al. 2022) alongside TP > 1; the
  // search always turns it on, `--fix sp=0` models systems without it.
  bool sequence_parallel = true;
  // Where the optimizer states live: GPU (none), CPU memory with CPU Adam
  // (ZeRO-Offload), or NVMe streamed through the CPU (ZeRO-Infinity).
  Offload::Kind offload = Offload::none;

  int64_t Gpus() const { return static_cast<int64_t>(tp) * pp * dp * cp; }
  // "tp=8 pp=4 dp=2 cp=1 vpp=5 mbs=1 zero=1 recompute=selective" (with
  // " ep=8 etp=1" after cp when either is above 1, and " offload=cpu" at
  // the end when offloading)
  std::string ToString() const;
  // Data-parallel replicas of an expert: tp cp dp / (ep etp).
  int64_t ExpertDp() const {
    return static_cast<int64_t>(tp) * cp * dp /
           (static_cast<int64_t>(ep) * etp);
  }
};

// A Plan holding only `c`'s parallel sizes (tp, pp, dp, cp, vpp): what a
// launcher with fixed sizes starts from before it adds a placement.
Plan SizesPlan(const Candidate& c);

}  // namespace strata::planner
