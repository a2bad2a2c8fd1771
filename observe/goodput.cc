#include "observe/goodput.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "observe/progress.h"

namespace strata::observe {

GoodputLedger::GoodputLedger(int64_t submit_ms)
    : submit_ms_(submit_ms), mark_ms_(submit_ms) {}

void GoodputLedger::Close(int64_t ms) {
  if (ms <= mark_ms_) return;
  const double s = (ms - mark_ms_) / 1e3;
  switch (phase_) {
    case Phase::kStarting:
      (first_attempt_ ? g_.startup_s : g_.restart_s) += s;
      break;
    case Phase::kRunning:  // a partial step: lost if the attempt fails
      g_.restart_s += s;
      break;
    case Phase::kHung:
      g_.hang_s += s;
      break;
    case Phase::kEnded:
      break;
  }
  mark_ms_ = ms;
}

double GoodputLedger::Baseline() const {
  if (recent_s_.empty()) return 0;
  std::vector<double> v(recent_s_.begin(), recent_s_.end());
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

void GoodputLedger::OnStep(int attempt, int64_t step, int64_t end_ms,
                           double step_s, double checkpoint_s) {
  if (job_ended_ || attempt < attempt_ || attempt <= ended_attempt_ ||
      end_ms <= mark_ms_) {
    return;
  }
  if (attempt > attempt_) {
    if (attempt_ > ended_attempt_) {  // an attempt we did not see end
      OnAttemptEnd(std::max(mark_ms_,
                            end_ms - static_cast<int64_t>(step_s * 1e3)));
    }
    attempt_ = attempt;
    last_step_ = -1;
  }
  if (step <= last_step_) return;
  last_step_ = step;
  // In a running attempt the whole interval since the last step end is
  // this step's (what the loop does between steps belongs to training);
  // otherwise the part before the step began stays with the phase
  // (start-up, restart, hang). The step's time is split below.
  const double interval_s = (end_ms - mark_ms_) / 1e3;
  const double d = phase_ == Phase::kRunning
                       ? interval_s
                       : std::clamp(step_s, 0.0, interval_s);
  Close(end_ms - static_cast<int64_t>(d * 1e3));
  mark_ms_ = end_ms;
  phase_ = Phase::kRunning;
  attempt_high_ = std::max(attempt_high_, step);
  if (step <= high_water_) {
    g_.recompute_s += d;
    return;
  }
  const double ckpt = std::clamp(checkpoint_s, 0.0, d);
  g_.checkpoint_s += ckpt;
  const double work = d - ckpt;
  if (straggling_ && !recent_s_.empty()) {
    const double slow = std::max(0.0, work - Baseline());
    g_.straggler_s += slow;
    g_.productive_s += work - slow;
    return;
  }
  g_.productive_s += work;
  recent_s_.push_back(work);
  if (recent_s_.size() > static_cast<size_t>(kBaselineSteps))
    recent_s_.pop_front();
}

void GoodputLedger::OnHang() {
  if (phase_ == Phase::kRunning) phase_ = Phase::kHung;
}

void GoodputLedger::OnStraggler() { straggling_ = true; }

void GoodputLedger::OnAttemptEnd(int64_t ms) {
  if (job_ended_) return;
  Close(ms);
  high_water_ = std::max(high_water_, attempt_high_);
  attempt_high_ = 0;
  first_attempt_ = false;
  phase_ = Phase::kStarting;
  straggling_ = false;
  recent_s_.clear();
  ended_attempt_ = std::max(attempt_, ended_attempt_ + 1);
  attempt_ = ended_attempt_;
}

void GoodputLedger::OnJobEnd(int64_t ms) {
  if (job_ended_) return;
  // What ran after the last step (the ranks' exit) is the end of the run,
  // not a failure: productive.
  if (phase_ == Phase::kRunning && ms > mark_ms_) {
    g_.productive_s += (ms - mark_ms_) / 1e3;
    mark_ms_ = ms;
  }
  Close(ms);
  phase_ = Phase::kEnded;
  job_ended_ = true;
  g_.wall_s = (ms - submit_ms_) / 1e3;
}

Goodput GoodputLedger::At(int64_t now_ms) const {
  Goodput g = g_;
  if (job_ended_) return g;
  g.wall_s = std::max<int64_t>(0, now_ms - submit_ms_) / 1e3;
  const double open_s = std::max<int64_t>(0, now_ms - mark_ms_) / 1e3;
  switch (phase_) {
    case Phase::kStarting:
      (first_attempt_ ? g.startup_s : g.restart_s) += open_s;
      break;
    case Phase::kRunning:  // the step under way
      g.productive_s += open_s;
      break;
    case Phase::kHung:
      g.hang_s += open_s;
      break;
    case Phase::kEnded:
      break;
  }
  return g;
}

control::GoodputState GoodputLedger::Save() const {
  control::GoodputState p;
  *p.mutable_totals() = ToProto(g_);
  p.set_submit_ms(submit_ms_);
  p.set_mark_ms(mark_ms_);
  p.set_phase(static_cast<int>(phase_));
  p.set_first_attempt(first_attempt_);
  p.set_straggling(straggling_);
  p.set_job_ended(job_ended_);
  p.set_attempt(attempt_);
  p.set_ended_attempt(ended_attempt_);
  p.set_last_step(last_step_);
  p.set_high_water(high_water_);
  p.set_attempt_high(attempt_high_);
  for (double s : recent_s_) p.add_recent_s(s);
  return p;
}

StatusOr<GoodputLedger> GoodputLedger::Restore(
    const control::GoodputState& p) {
  if (p.phase() < static_cast<int>(Phase::kStarting) ||
      p.phase() > static_cast<int>(Phase::kEnded)) {
    return absl::InvalidArgumentError(
        absl::StrCat("goodput state: unknown phase ", p.phase()));
  }
  if (p.mark_ms() < p.submit_ms() || p.recent_s_size() > kBaselineSteps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "goodput state: mark ", p.mark_ms(), " before submit ", p.submit_ms(),
        " or ", p.recent_s_size(), " baseline steps (at most ",
        kBaselineSteps, ")"));
  }
  GoodputLedger l(p.submit_ms());
  l.g_ = FromProto(p.totals());
  l.mark_ms_ = p.mark_ms();
  l.phase_ = static_cast<Phase>(p.phase());
  l.first_attempt_ = p.first_attempt();
  l.straggling_ = p.straggling();
  l.job_ended_ = p.job_ended();
  l.attempt_ = p.attempt();
  l.ended_attempt_ = p.ended_attempt();
  l.last_step_ = p.last_step();
  l.high_water_ = p.high_water();
  l.attempt_high_ = p.attempt_high();
  l.recent_s_.assign(p.recent_s().begin(), p.recent_s().end());
  return l;
}

control::Goodput ToProto(const Goodput& g) {
  control::Goodput p;
  p.set_wall_s(g.wall_s);
  p.set_productive_s(g.productive_s);
  p.set_startup_s(g.startup_s);
  p.set_restart_s(g.restart_s);
  p.set_hang_s(g.hang_s);
  p.set_recompute_s(g.recompute_s);
  p.set_checkpoint_s(g.checkpoint_s);
  p.set_straggler_s(g.straggler_s);
  return p;
}

Goodput FromProto(const control::Goodput& p) {
  Goodput g;
  g.wall_s = p.wall_s();
  g.productive_s = p.productive_s();
  g.startup_s = p.startup_s();
  g.restart_s = p.restart_s();
  g.hang_s = p.hang_s();
  g.recompute_s = p.recompute_s();
  g.checkpoint_s = p.checkpoint_s();
  g.straggler_s = p.straggler_s();
  return g;
}

std::string DescribeGoodput(const Goodput& g) {
  std::vector<std::string> lost;
  auto add = [&](const char* name, double s) {
    if (s < 0.05) return;
    lost.push_back(absl::StrCat(
        name, " ", s < 60 ? absl::StrFormat("%.1fs", s) : FormatDuration(s)));
  };
  add("startup", g.startup_s);
  add("restart", g.restart_s);
  add("hang", g.hang_s);
  add("recompute", g.recompute_s);
  add("checkpoint", g.checkpoint_s);
  add("straggler", g.straggler_s);
  return absl::StrFormat("%.1f%% of %s%s%s", 100 * g.ratio(),
                         FormatDuration(g.wall_s), lost.empty() ? "" : "; lost: ",
                         absl::StrJoin(lost, ", "));
}

}  // namespace strata::observe
