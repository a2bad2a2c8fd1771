#include "coordinator/fault/job_monitor.h"

#include <algorithm>
#include <set>

namespace strata::coordinator {
namespace {

std::vector<fault::RankInfo> Infos(const std::vector<JobMonitor::RankMeta>& r) {
  std::vector<fault::RankInfo> out;
  for (const auto& m : r) out.push_back({m.rank, m.node, m.stage});
  return out;
}

std::vector<int> Ids(const std::vector<JobMonitor::RankMeta>& r) {
  std::vector<int> out;
  for (const auto& m : r) out.push_back(m.rank);
  return out;
}

// Sections that are not the rank's own work: time in collectives, and the
// running totals (docs/runtime.md: *_total).
bool OwnWork(const std::string& name) {
  return name != "wait" && name != "comm" && !name.ends_with("_total");
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

void Keep(std::vector<double>& v, double x) {
  v.push_back(x);
  if (v.size() > 60) v.erase(v.begin());
}

}  // namespace

JobMonitor::JobMonitor(const Clock& clock, const fault::ResolvedPolicy& policy,
                       std::vector<RankMeta> ranks,
                       std::vector<double> predicted_stage_s)
    : clock_(clock),
      stragglers_(policy.straggler_options, Infos(ranks)),
      hang_(policy.hang_options, clock, Ids(ranks)),
      links_(policy.slow_link_options),
      predicted_stage_s_(std::move(predicted_stage_s)) {
  for (auto& m : ranks) ranks_[m.rank] = std::move(m);
}

void JobMonitor::OnPhase(const control::StepReport& r) {
  if (!ranks_.contains(r.rank())) return;
  if (r.phase_end()) {
    hang_.OnPhaseEnd(r.rank());
  } else {
    hang_.OnPhaseBegin(r.rank(), r.phase(), r.phase_deadline_ms());
  }
  hang_reported_ = false;
}

std::vector<fault::FaultEvent> JobMonitor::OnStep(
    const control::StepReport& r) {
  if (!ranks_.contains(r.rank())) return {};
  hang_.OnStep(r.rank(), r.step(), r.step_seconds());
  hang_reported_ = false;
  last_step_[r.rank()] = std::max(last_step_[r.rank()], r.step());
  latest_step_ = std::max(latest_step_, r.step());
  // The declared length is the first one reported; a later report cannot
  // stretch it to defeat the restart-cost guard (docs/security.md).
  if (r.total_steps() > 0 && total_steps_ == 0) {
    total_steps_ = r.total_steps();
    hang_.SetLastStep(total_steps_);
  }
  Keep(step_seconds_, r.step_seconds());

  const auto& sec = r.section_seconds();
  auto get = [&](const char* k) {
    auto it = sec.find(k);
    return it == sec.end() ? 0.0 : it->second;
  };
  const double wait = get("wait"), comm = get("comm");
  const double compute = std::max(0.0, r.step_seconds() - wait - comm);
  fault::StepSample sample;
  sample.rank = r.rank();
  sample.step = r.step();
  double own = 0;
  for (const auto& [name, s] : sec) {
    if (OwnWork(name)) own += s;
  }
  if (own > 0) {
    for (const auto& [name, s] : sec) {
      if (OwnWork(name)) sample.sections[name] = s * compute / own;
    }
  } else {
    sample.sections["compute"] = compute;
  }
  sample.sections["wait"] = wait;  // a wait section: not compute
  Keep(waits_[r.rank()], wait);
  auto& h = history_[r.rank()];
  h.push_back({r.step(), compute, wait});
  const size_t keep = static_cast<size_t>(std::max<int64_t>(
      kHistorySteps, kHistoryCells / static_cast<int64_t>(ranks_.size())));
  while (h.size() > keep) h.pop_front();

  const std::string& src = ranks_.at(r.rank()).node;
  for (const control::LinkSample& l : r.links()) {
    auto peer = ranks_.find(l.peer_rank());
    if (peer == ranks_.end() || src.empty() || peer->second.node.empty()) {
      continue;
    }
    links_.Add({src, peer->second.node, l.bytes(), l.busy_seconds()});
  }

  Pending& p = pending_[r.step()];
  p.samples[r.rank()] = std::move(sample);
  p.wait[r.rank()] = wait;
  if (r.recorded_ops() > 0) {
    recorded_ = true;
    p.in_collectives[r.rank()] = std::clamp(r.recorded_share(), 0.0, 1.0);
  }
  p.step_s[r.rank()] = std::max(0.0, r.step_seconds());
  std::vector<fault::FaultEvent> out;
  // Complete steps, and steps too old to wait for, in order.
  while (!pending_.empty()) {
    auto first = pending_.begin();
    const bool complete = first->second.samples.size() == ranks_.size();
    const bool stale = pending_.rbegin()->first - first->first >= kPendingSteps;
    if (!complete && !stale) break;
    for (auto& e : Feed(first->second)) out.push_back(std::move(e));
    pending_.erase(first);
  }
  const int64_t now = clock_.SteadyNowMs();
  if (!r.links().empty() &&
      (links_checked_ms_ < 0 || now - links_checked_ms_ >= 1000)) {
    links_checked_ms_ = now;
    for (auto& e : CheckLinks()) {
      e.step = r.step();
      out.push_back(std::move(e));
    }
  }
  if (!predicted_stage_s_.empty() &&
      (plan_checked_ms_ < 0 || now - plan_checked_ms_ >= kPlanCheckMs)) {
    for (auto& e : CheckStages()) {
      e.step = r.step();
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::optional<double> JobMonitor::TakePlanCalibration() {
  if (!calibration_fresh_) return std::nullopt;
  calibration_fresh_ = false;
  return plan_check_.calibration;
}

std::vector<fault::FaultEvent> JobMonitor::CheckStages() {
  std::map<int, std::vector<double>> per_stage;  // stage -> rank medians
  for (const auto& [rank, cells] : history_) {
    if (cells.size() < static_cast<size_t>(kPlanWindow)) continue;
    std::vector<double> c;
    for (auto it = cells.end() - kPlanWindow; it != cells.end(); ++it) {
      c.push_back(it->compute);
    }
    per_stage[ranks_.at(rank).stage].push_back(Median(std::move(c)));
  }
  std::vector<fault::StageTime> stages;
  for (size_t s = 0; s < predicted_stage_s_.size(); ++s) {
    auto it = per_stage.find(static_cast<int>(s));
    if (it == per_stage.end() || predicted_stage_s_[s] <= 0) return {};
    const double measured = Median(it->second);
    if (measured <= 0) return {};
    stages.push_back({static_cast<int>(s), predicted_stage_s_[s], measured});
  }
  plan_checked_ms_ = clock_.SteadyNowMs();
  stage_times_ = stages;
  calibration_fresh_ = true;
  plan_check_ = fault::CheckPlan(stages);
  std::vector<fault::FaultEvent> out;
  for (fault::FaultEvent e : plan_check_.events) {
    if (!plan_reported_.insert({e.kind, e.stage}).second) continue;
    // The stage's node when all its ranks share one: what evict takes and
    // rebalance slows down.
    std::set<std::string> nodes;
    for (const auto& [rank, m] : ranks_) {
      if (m.stage == e.stage) nodes.insert(m.node);
    }
    if (nodes.size() == 1) {
      e.node = *nodes.begin();
      e.evidence += "; the stage runs on " + e.node;
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<fault::FaultEvent> JobMonitor::CheckLinks() {
  slow_now_ = links_.Check();
  std::set<std::pair<std::string, std::string>> slow;
  for (const auto& e : slow_now_) slow.insert({e.node, e.peer_node});
  for (auto it = slow_reported_.begin(); it != slow_reported_.end();) {
    const bool still = slow.contains(it->first);
    it->second = still ? 0 : it->second + 1;
    it = it->second >= kLinkClearChecks ? slow_reported_.erase(it) : ++it;
  }
  const std::optional<std::string> suspect = SlowLinkSuspect();
  std::vector<fault::FaultEvent> out;
  for (const fault::FaultEvent& e : slow_now_) {
    if (!slow_reported_.try_emplace({e.node, e.peer_node}, 0).second) continue;
    out.push_back(e);
    if (suspect) {
      out.back().evidence += "; all " + std::to_string(slow_now_.size()) +
                             " slow pairs include " + *suspect +
                             ": its link is the likely cause";
    }
  }
  return out;
}

std::optional<std::string> JobMonitor::SlowLinkSuspect() const {
  if (slow_now_.size() < 2) return std::nullopt;
  return fault::SlowLinkDetector::CommonNode(slow_now_);
}

std::vector<fault::FaultEvent> JobMonitor::Feed(Pending& p) {
  // Lateness: in a recorded attempt only from the workers' reading of the
  // flight recorders, as the share of time the others spent in collectives
  // beyond this rank's, times its own step (a rank without a record has
  // none: nothing shows it arrived late); otherwise from the waits the
  // ranks report, which only jobs whose collectives strata does not record
  // still rely on.
  const bool recorded = recorded_;
  const std::map<int, double>& spent = recorded ? p.in_collectives : p.wait;
  const bool known = recorded ? spent.size() >= 2
                              : p.samples.size() == ranks_.size();
  double most = 0;
  for (const auto& [rank, s] : spent) most = std::max(most, s);
  std::vector<fault::FaultEvent> out;
  for (auto& [rank, sample] : p.samples) {
    if (known || recorded) {
      auto own = spent.find(rank);
      const double scale = recorded ? p.step_s[rank] : 1.0;
      sample.late_s =
          known && own != spent.end() ? (most - own->second) * scale : 0.0;
      Keep(lates_[rank], *sample.late_s);
    }
    for (auto& e : stragglers_.Add(sample)) {
      e.evidence += recorded ? "; arrivals from the flight recorders"
                             : "; arrivals from the waits the ranks report";
      e.self_reported = !recorded;
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::optional<fault::Stall> JobMonitor::CheckHang() {
  if (hang_reported_) return std::nullopt;
  auto stall = hang_.Check();
  if (stall) hang_reported_ = true;
  return stall;
}

double JobMonitor::MedianStepSeconds() const { return Median(step_seconds_); }

control::DiagnoseReply JobMonitor::Diagnose(bool history, int64_t first,
                                            int64_t last) const {
  control::DiagnoseReply d;
  d.set_hang_deadline_ms(hang_.DeadlineMs());
  d.set_last_wavefront(wavefront_);
  std::set<std::pair<std::string, std::string>> slow;
  for (const auto& e : slow_now_) slow.insert({e.node, e.peer_node});
  for (const auto& [key, stat] : links_.Matrix()) {
    control::LinkDiagnosis* l = d.add_links();
    l->set_src_node(key.first);
    l->set_dst_node(key.second);
    l->set_mb_per_s(stat.bytes_per_s / 1e6);
    l->set_baseline_mb_per_s(stat.baseline_bytes_per_s / 1e6);
    l->set_samples(stat.samples);
    l->set_slow(slow.contains(key));
  }
  for (size_t i = 0; i < stage_times_.size(); ++i) {
    control::StageDiagnosis* st = d.add_stages();
    st->set_stage(stage_times_[i].stage);
    st->set_predicted_s(stage_times_[i].predicted_s);
    st->set_measured_s(stage_times_[i].measured_s);
    st->set_calibrated_ratio(plan_check_.calibrated_ratio[i]);
  }
  d.set_plan_calibration(plan_check_.calibration);
  for (const auto& [rank, m] : ranks_) {
    control::RankDiagnosis* r = d.add_ranks();
    r->set_rank(rank);
    r->set_node(m.node);
    r->set_stage(m.stage);
    auto ls = last_step_.find(rank);
    r->set_last_step(ls == last_step_.end() ? -1 : ls->second);
    const fault::StragglerScore s = stragglers_.Score(rank);
    r->set_relative(s.relative);
    r->set_individual(s.individual);
    r->set_flagged(s.flagged);
    r->set_late_s(s.late_s);
    auto w = waits_.find(rank);
    r->set_wait_s(w == waits_.end() ? 0 : Median(w->second));
    r->set_compute_s(s.compute_s);
    if (!history) continue;
    auto h = history_.find(rank);
    if (h == history_.end()) continue;
    const size_t per_rank = static_cast<size_t>(
        std::max<int64_t>(1, kReplyCells / static_cast<int64_t>(ranks_.size())));
    std::vector<Cell> cells;
    for (const Cell& c : h->second) {
      if (c.step < first || (last > 0 && c.step > last)) continue;
      cells.push_back(c);
    }
    if (cells.size() > per_rank) cells.erase(cells.begin(), cells.end() - per_rank);
    for (const Cell& c : cells) {
      r->add_steps(c.step);
      r->add_step_compute_s(c.compute);
      r->add_step_wait_s(c.wait);
    }
  }
  return d;
}

}  // namespace strata::coordinator
