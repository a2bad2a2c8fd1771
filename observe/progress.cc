#include "observe/progress.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace strata::observe {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

Progress ComputeProgress(const control::JobInfo& job, int64_t now_unix_ms) {
  Progress p;
  std::vector<double> tps, step_s;
  for (const control::StepReport& s : job.steps()) {
    p.step = p.step < 0 ? s.step() : std::min(p.step, s.step());
    p.total = std::max(p.total, s.total_steps());
    p.checkpoint_step = std::max(p.checkpoint_step, s.checkpoint_step());
    if (s.step_seconds() > 0) {
      step_s.push_back(s.step_seconds());
      if (s.tokens() > 0) tps.push_back(s.tokens() / s.step_seconds());
    }
  }
  p.tokens_per_s = Median(tps);
  p.step_s = Median(step_s);
  p.restarts = job.restart_count();
  p.mfu = MeasuredMfu(job.plan(), p.step_s);
  if (p.step < 0) return p;
  if (p.total > 0) p.percent = 100.0 * std::min(p.step, p.total) / p.total;
  const double wall_s = (now_unix_ms - job.submit_unix_ms()) / 1000.0;
  if (wall_s > 0 && p.step_s > 0 && p.step > 0) {
    p.ettr = std::clamp(p.step * p.step_s / wall_s, 0.01, 1.0);
  }
  // The rate so far (wall time per step since the submit) is the step time
  // divided by the ETTR; it is used unclipped, as the latest reports' step
  // time is a noisier estimate than the whole run's rate.
  const int64_t left = std::max<int64_t>(0, p.total - p.step);
  if (p.total > 0 && wall_s > 0 && p.step > 0) {
    p.eta_s = left * wall_s / p.step;
  } else if (p.total > 0 && p.step_s > 0) {
    p.eta_s = left * p.step_s;
  }
  return p;
}

std::optional<double> MeasuredMfu(const Plan& plan, double step_s) {
  if (!(plan.mfu() > 0 && plan.step_time_s() > 0 && step_s > 0)) {
    return std::nullopt;
  }
  return plan.mfu() * plan.step_time_s() / step_s;
}

std::string FormatDuration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, s / 60 % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

std::string DescribeProgress(const Progress& p) {
  if (p.step < 0) return "no step reported yet";
  std::string out =
      p.total > 0 ? absl::StrFormat("step %d/%d (%.1f%%)", p.step, p.total,
                                    p.percent)
                  : absl::StrFormat("step %d (total unknown)", p.step);
  if (p.tokens_per_s > 0)
    absl::StrAppend(&out, absl::StrFormat(", %.0f tokens/s", p.tokens_per_s));
  if (p.step_s > 0)
    absl::StrAppend(&out, absl::StrFormat(", %.3f s/step", p.step_s));
  if (p.mfu) absl::StrAppend(&out, absl::StrFormat(", MFU %.0f%%", 100 * *p.mfu));
  if (p.eta_s) {
    absl::StrAppend(&out, ", ETA ", FormatDuration(*p.eta_s),
                    absl::StrFormat(" (ETTR %.0f%%)", 100 * p.ettr));
  }
  if (p.checkpoint_step > 0) {
    absl::StrAppend(&out, ", checkpoint step ", p.checkpoint_step);
  }
  if (p.restarts > 0) {
    absl::StrAppend(&out, ", ", p.restarts,
                    p.restarts == 1 ? " restart" : " restarts");
  }
  return out;
}

}  // namespace strata::observe
