// A job's progress as `strata status JOB` shows it (docs/observe.md): step
// out of the run's total, percent, tokens/s, the step time, and the time
// left. Pure.
//
// From the latest step report of each rank (JobInfo.steps): the step is the
// lowest any rank reached (the job is as far as its slowest rank), the
// total comes from the reports (StepReport.total_steps, 0: unknown), tokens
// per second and step time are the median over ranks of tokens /
// step_seconds and step_seconds. The ETTR shown (effective training time
// ratio, the share of wall time spent on steps, as Meta's Llama 3 and
// ByteDance's ByteRobust report it) is steps done x step time / wall time
// since the submit (at most 1). The time left is the remaining steps at
// the run's rate so far, wall time / steps done = step time / ETTR: restarts,
// queueing and start-up so far stretch the estimate as they would the rest
// of the run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "proto/control.pb.h"

namespace strata::observe {

struct Progress {
  int64_t step = -1;        // -1: no step reported yet
  int64_t total = 0;        // 0: unknown
  double percent = 0;       // of total, when known
  double tokens_per_s = 0;  // 0: unknown
  double step_s = 0;
  double ettr = 1;          // (0, 1]
  std::optional<double> eta_s;  // unknown without a total or a step time
  // Model FLOPs utilisation (PaLM's definition, Chowdhery et al. 2022
  // App. B) at the median step time: MeasuredMfu.
  std::optional<double> mfu;
  int64_t checkpoint_step = 0;  // newest committed checkpoint (0: none)
  int32_t restarts = 0;
};

Progress ComputeProgress(const control::JobInfo& job, int64_t now_unix_ms);

// MFU at a measured step time: the plan's MFU x its predicted step time /
// `step_s` (the FLOPs per step are the plan's); nullopt for plans without
// a FLOP count (jobs the planner did not plan) or without a step time.
std::optional<double> MeasuredMfu(const Plan& plan, double step_s);

// "step 120/1000 (12.0%), 1040 tokens/s, 0.306 s/step, MFU 41%, ETA 4m29s
// (ETTR 93%), checkpoint step 110, 1 restart".
std::string DescribeProgress(const Progress& p);

// "4m29s", "1h02m", "35s".
std::string FormatDuration(double seconds);

}  // namespace strata::observe
