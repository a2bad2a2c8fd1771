// One point of the planner's search space.
#pragma once

#include <string>

#include "proto/plan.pb.h"

namespace strata::planner {

struct Candidate {
  int tp = 1;   // tensor parallel (with sequence parallelism when > 1)
  int pp = 1;   // pipeline stages
  int dp = 1;   // data-parallel replicas
  int cp = 1;   // context parallel (sequence split across ranks)
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
  // "tp=8 pp=4 dp=2 cp=1 vpp=5 mbs=1 zero=1 recompute=selective", plus
  // " offload=cpu" when offloading
  std::string ToString() const;
};

// A Plan holding only `c`'s parallel sizes (tp, pp, dp, cp, vpp): what a
// launcher with fixed sizes starts from before it adds a placement.
Plan SizesPlan(const Candidate& c);

}  // namespace strata::planner
