// `strata run --inject KIND:key=value,...`: faults injected into a running
// local job from outside its processes (docs/fault.md), once any rank
// reports step `step`:
//   slow:rank=R,factor=F[,step=N][,duration=S][,period_ms=P]
//   hang:rank=R[,step=N][,duration=S]
//   kill-rank:rank=R[,step=N]
//   kill-worker:node=K[,step=N]      (node-K of strata run's workers)
//   slow-node:node=K,factor=F[,step=N][,duration=S][,period_ms=P]
//                                    (every rank node-K runs, in every
//                                    attempt: a slow machine)
// Ranks are slowed, stopped and killed by strata-inject (fault/inject/),
// workers by strata run itself.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace strata::cli {

struct InjectSpec {
  enum class Kind { kSlow, kHang, kKillRank, kKillWorker, kSlowNode };
  Kind kind = Kind::kSlow;
  int rank = -1;
  int node = -1;
  double factor = 0;
  int64_t step = 1;
  double duration_s = -1;  // < 0: slow until the run ends; hang forever
  int period_ms = 100;
  std::string text;  // as given, for messages
};

// InvalidArgument naming the spec and the bad key or value.
StatusOr<InjectSpec> ParseInjectSpec(const std::string& text);

// strata-inject's arguments for a rank fault on the rank's process `pid`
// (slow-node: on the processes below the worker `pid`). By pid, not by job
// id and rank: two `strata run`s on one machine both have a job-1 with a
// rank 1.
std::vector<std::string> InjectArgs(const InjectSpec& spec, int pid);

}  // namespace strata::cli
