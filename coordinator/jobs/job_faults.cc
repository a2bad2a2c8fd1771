// JobManager's fault handling (docs/fault.md): a JobMonitor per running
// attempt fed by every step report; straggler findings stored as events and
// acted on by the job's policy; a hang diagnosed from the ranks' flight
// recorders (asked of the workers in heartbeat replies, waited for at most
// kDiagnoseWaitMs) before the attempt is restarted.
#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "control/codec.h"
#include "coordinator/jobs/attempt_plan.h"
#include "coordinator/jobs/job_manager.h"
#include "fault/wavefront.h"
#include "planner/job.h"

namespace strata::coordinator {

using control::AttemptKey;

namespace {

// How long a hang diagnosis waits for the workers' flight recorders: a few
// heartbeats (500 ms by default).
constexpr int64_t kDiagnoseWaitMs = 5000;

std::vector<JobMonitor::RankMeta> RankMetas(const control::JobInfo& job) {
  std::vector<JobMonitor::RankMeta> out;
  for (const auto& r : job.plan().placement().ranks()) {
    JobMonitor::RankMeta m;
    m.rank = r.rank();
    m.stage = r.pp_rank();
    if (r.node() >= 0 && r.node() < job.node_info_size()) {
      m.node = job.node_info(r.node()).node_name();
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

JobManager::Watched& JobManager::WatchedOf(const control::JobInfo& job) {
  Watched& w = watched_[job.job_id()];
  if (w.attempt != job.attempt() || w.monitor == nullptr) {
    w = Watched();
    w.attempt = job.attempt();
    const auto& predicted = job.plan().stage_compute_s();
    w.monitor = std::make_unique<JobMonitor>(
        *clock_, fault::Resolve(job.spec().fault()), RankMetas(job),
        std::vector<double>(predicted.begin(), predicted.end()));
  }
  return w;
}

void JobManager::Watch(control::JobInfo& job, const control::StepReport& s) {
  // The first step of an attempt that followed a failure: what the restart
  // cost.
  if (auto began = restart_began_ms_.find(job.job_id());
      began != restart_began_ms_.end()) {
    const int64_t ms = clock_->SteadyNowMs() - began->second;
    restart_cost_ms_[job.job_id()] = ms;
    restart_began_ms_.erase(began);
    events_->Record(job.job_id(), job.attempt(), "running_again",
                    absl::StrCat("first step ", ms,
                                 " ms after the previous attempt failed"));
  }
  Watched& w = WatchedOf(job);
  KeepForTrace(job, w, s);
  const fault::ResolvedPolicy policy = fault::Resolve(job.spec().fault());
  const std::vector<fault::FaultEvent> found = w.monitor->OnStep(s);
  if (auto ratio = w.monitor->TakePlanCalibration()) Calibrate(job, *ratio);
  for (const fault::FaultEvent& e : found) {
    // A slow rank, stage or link: steps beyond the baseline are lost to it.
    if (e.kind != fault::EventKind::kUnbalancedPlan) LedgerOf(job).OnStraggler();
    if (e.kind == fault::EventKind::kUnbalancedPlan) {
      // The plan, not the hardware: reported only.
      ActOn(job, e, FaultPolicy::report,
            absl::StrFormat("stages differ %.2fx as the plan predicted, "
                            "found at step %d",
                            e.slowdown, e.step),
            "");
    } else if (e.kind == fault::EventKind::kPlanMismatch) {
      // A stage computing slower than predicted is slow hardware (or a
      // straggler) like a rank slower than its peers, and takes the
      // straggler policy; it finds a slow node whose stage has no peers
      // doing the same work (pipeline stages on a node of their own).
      ActOn(job, e, policy.straggler,
            absl::StrFormat("stage %d%s computes %.2fx slower than planned "
                            "relative to the other stages, found at step %d",
                            e.stage,
                            e.node.empty() ? "" : absl::StrCat(" on ", e.node),
                            e.slowdown, e.step),
            e.node);
    } else if (e.kind == fault::EventKind::kSlowLink) {
      // Evicting for a link takes the node every slow pair includes; with
      // none (a single pair), the finding names no node to take.
      fault::FaultEvent act = e;
      act.node = w.monitor->SlowLinkSuspect().value_or("");
      ActOn(job, e, policy.slow_link,
            absl::StrFormat("link %s -> %s sends %.2fx slower than its "
                            "reference, found at step %d",
                            e.node, e.peer_node, e.slowdown, e.step),
            act.node);
    } else {
      ActOn(job, e, policy.straggler,
            absl::StrFormat("rank %d on %s is %.2fx slower (%s), confirmed "
                            "at step %d",
                            e.rank, e.node, e.slowdown, e.section, e.step),
            e.node);
    }
    if (job.state() != control::RUNNING) return;
  }
}

void JobManager::WatchTick(control::JobInfo& job) {
  Watched& w = WatchedOf(job);
  const int64_t now = clock_->SteadyNowMs();
  if (!w.stall) {
    w.stall = w.monitor->CheckHang();
    if (!w.stall) return;
    w.diagnose_since_ms = now;
    w.flights.clear();
    logger_->warn(
        "{} attempt {}: no step progress for {} ms (deadline {} "
        "ms); reading the ranks' flight recorders",
        job.job_id(), job.attempt(), w.stall->stalled_ms, w.stall->deadline_ms);
    return;
  }
  const bool all = static_cast<int>(w.flights.size()) >= job.ranks_size();
  if (all || now - w.diagnose_since_ms >= kDiagnoseWaitMs) ConcludeHang(job, w);
}

void JobManager::AddDiagnoseOrders(const std::string& worker_id,
                                   control::HeartbeatReply* orders) {
  for (auto& [id, w] : watched_) {
    if (!w.stall) continue;
    auto job = jobs_.find(id);
    if (job == jobs_.end() || job->second.state() != control::RUNNING) continue;
    const AttemptIndex& index = Index(job->second);
    if (index.node_of_worker.contains(worker_id)) {
      orders->add_diagnose(AttemptKey(id, w.attempt));
    }
  }
}

void JobManager::OnFlights(
    const google::protobuf::RepeatedPtrField<control::RankFlight>& flights) {
  for (const auto& f : flights) {
    auto w = watched_.find(f.job_id());
    if (w == watched_.end() || !w->second.stall ||
        w->second.attempt != f.attempt()) {
      continue;
    }
    w->second.flights[f.rank()] = f;
  }
}

void JobManager::ConcludeHang(control::JobInfo& job, Watched& w) {
  LedgerOf(job).OnHang();
  std::vector<fault::GroupProgress> progress;
  std::vector<std::string> silent, notes;
  std::vector<int> stopped;
  for (int r = 0; r < job.ranks_size(); ++r) {
    auto it = w.flights.find(r);
    if (it == w.flights.end()) {
      silent.push_back(std::to_string(r));
      continue;
    }
    const control::RankFlight& f = it->second;
    if (f.stopped()) stopped.push_back(r);
    if (!f.error().empty())
      notes.push_back(absl::StrCat("rank ", r, ": ", f.error()));
    if (!f.stack().empty())
      notes.push_back(absl::StrCat("rank ", r, ": ", f.stack()));
    for (const auto& g : f.groups()) {
      progress.push_back(
          {r, g.group(), g.entered_seq(), g.completed_seq(), g.op()});
    }
  }
  const fault::Wavefront wave = fault::ComputeWavefront(progress);
  fault::FaultEvent e = fault::HangDetector::ToEvent(*w.stall);
  std::string text = fault::DescribeWavefront(wave);
  if (!silent.empty()) {
    absl::StrAppend(&text, "; no flight recorder from rank(s) ",
                    absl::StrJoin(silent, ","), " within ", kDiagnoseWaitMs,
                    " ms");
  }
  // Every member entered and data stopped moving: a stopped process inside
  // the collective is the one the others wait for.
  std::vector<int> culprits = wave.culprits;
  const bool inside = culprits.empty() && !stopped.empty();
  if (inside) culprits = stopped;
  // Stopped in a collective others already finished (they wait in the next
  // one, or outside any).
  bool earlier = false;
  for (const auto& g : wave.groups) {
    for (int r : culprits) {
      const bool in_waiting =
          std::find(g.waiting.begin(), g.waiting.end(), r) != g.waiting.end();
      earlier |= std::find(g.behind.begin(), g.behind.end(), r) !=
                     g.behind.end() ||
                 (in_waiting && !g.done.empty());
    }
  }
  if (culprits.size() == 1) {
    e.rank = culprits[0];
    for (const auto& m : job.plan().placement().ranks()) {
      if (m.rank() == e.rank && m.node() >= 0 &&
          m.node() < job.node_info_size()) {
        e.node = job.node_info(m.node()).node_name();
      }
    }
  }
  e.evidence = absl::StrCat(e.evidence, "; ", text);
  for (const std::string& n : notes)
    absl::StrAppend(&e.evidence, "; ", n.substr(0, 2000));
  w.monitor->SetLastWavefront(text);
  w.stall.reset();
  const std::string summary =
      culprits.empty() ? text
      : inside && wave.groups.empty()
          ? absl::StrCat("rank(s) ", absl::StrJoin(culprits, ","),
                         " stopped outside any collective (", text,
                         "; the others wait elsewhere, e.g. a checkpoint)")
      : inside
          ? absl::StrCat("rank(s) ", absl::StrJoin(culprits, ","),
                         earlier ? " stopped inside a collective the others "
                                   "finished ("
                                 : " stopped inside the collective the "
                                   "others wait in (",
                         text, ")")
          : absl::StrCat("rank(s) ", absl::StrJoin(culprits, ","),
                         " never entered the collective the others wait in (",
                         text, ")");
  ActOn(job, e, fault::Resolve(job.spec().fault()).hang, summary, e.node);
}

std::pair<bool, std::string> JobManager::WorthRestart(
    const control::JobInfo& job, const fault::FaultEvent& e) {
  // A hang makes no progress at all: always worth it.
  if (e.kind == fault::EventKind::kHang) return {true, ""};
  const Watched& w = WatchedOf(job);
  const int64_t total = w.monitor->TotalSteps();
  const int64_t remaining = total - w.monitor->LatestStep();
  if (total <= 0) {
    return {false, "the ranks do not report their total steps, so the time "
                   "the slowdown loses cannot be predicted"};
  }
  // The job runs at the slow rank's pace: each remaining step takes
  // (1 - 1/slowdown) of its time more than without it (issue: act when
  // slowdown x remaining steps x step time exceeds the restart cost).
  const double step_s = w.monitor->MedianStepSeconds();
  const double slowdown = std::max(1.0, e.slowdown);
  const double loss_s = step_s * (1 - 1 / slowdown) * std::max<int64_t>(0, remaining);
  auto measured = restart_cost_ms_.find(job.job_id());
  const bool have = measured != restart_cost_ms_.end();
  const double cost_s =
      have ? measured->second / 1000.0
           : fault::Resolve(job.spec().fault()).restart_cost_s;
  std::string why = absl::StrFormat(
      "predicted loss %.1f s (%d remaining steps x %.3f s x (1 - 1/%.2f)) vs "
      "restart cost %.1f s (%s)",
      loss_s, remaining, step_s, slowdown, cost_s,
      have ? "measured on this job" : "fault.restart_cost_s");
  return {loss_s > cost_s, why};
}

StatusOr<std::pair<google::protobuf::Map<std::string, double>, std::string>>
JobManager::Rebalanced(const control::JobInfo& job, const fault::FaultEvent& e,
                       const std::string& node) const {
  if (e.kind == fault::EventKind::kSlowLink) {
    return absl::FailedPreconditionError(
        "a slow link is not slow compute (evict takes the node)");
  }
  if (job.spec().launch().model().empty()) {
    return absl::FailedPreconditionError(
        "the job has no launch.model: only the planner splits layers by "
        "speed");
  }
  if (node.empty() || !(e.slowdown > 1)) {
    return absl::FailedPreconditionError(
        "the finding names no node or no slowdown");
  }
  google::protobuf::Map<std::string, double> speeds = job.node_speed();
  const double was = speeds.contains(node) ? speeds.at(node) : 1.0;
  speeds[node] = was / e.slowdown;
  std::vector<control::WorkerInfo> nodes(job.node_info().begin(),
                                         job.node_info().end());
  // The scale the running plan used, so both predictions compare alike.
  const auto used = planned_scale_.find(job.job_id());
  ASSIGN_OR_RETURN(Plan next,
                   PlanAttempt(job.spec(), nodes, speeds,
                               used == planned_scale_.end() ? 1.0
                                                            : used->second));
  // As it runs, the synchronous job goes at its slowest rank's pace: the
  // current plan's prediction times the slowdown.
  const double now_s = job.plan().step_time_s() * e.slowdown;
  const double next_s = next.step_time_s();
  const std::string layers = absl::StrJoin(next.layers_per_stage(), ",");
  const std::string figures = absl::StrFormat(
      "at %.2fx speed the planner predicts %.3f s/step with tp=%d pp=%d dp=%d "
      "layers [%s], against %.3f s/step as it runs",
      speeds[node], next_s, next.tp(), next.pp(), next.dp(), layers, now_s);
  // A re-plan that gains under 5% does not repay a restart's uncertainty.
  if (!(next_s > 0) || next_s > 0.95 * now_s) {
    return absl::FailedPreconditionError(
        absl::StrCat("no gain: ", figures));
  }
  return std::make_pair(std::move(speeds), figures);
}

void JobManager::ActOn(control::JobInfo& job, const fault::FaultEvent& e,
                       FaultPolicy::Action action, const std::string& summary,
                       const std::string& evict_node) {
  const int attempt = job.attempt();
  events_->Record(job.job_id(), attempt, e, summary);
  logger_->warn("{} attempt {}: {}: {}; evidence: {}", job.job_id(), attempt,
                fault::EventKindName(e.kind), summary, e.evidence);
  if (action == FaultPolicy::report) return;
  const char* kind = fault::EventKindName(e.kind);
  auto [worth, cost] = WorthRestart(job, e);
  if (!worth) {
    events_->Record(job.job_id(), attempt, "fault_action",
                    absl::StrCat("report after ", kind, " (policy ",
                                 fault::ActionName(action),
                                 " not applied: ", cost, ")"));
    return;
  }
  std::string why = absl::StrCat(kind, ": ", summary);
  if (action == FaultPolicy::rebalance) {
    auto speeds = Rebalanced(job, e, evict_node);
    if (!speeds.ok()) {
      const bool hang = e.kind == fault::EventKind::kHang;
      events_->Record(job.job_id(), attempt, "fault_action",
                      absl::StrCat(hang ? "restart" : "report", " after ",
                                   kind, " (rebalance refused: ",
                                   speeds.status().message(), ")"));
      if (!hang) return;
    } else {
      control::JobInfo next = job;
      *next.mutable_node_speed() = speeds->first;
      if (!Commit(job, std::move(next)).ok()) return;
      events_->Record(job.job_id(), attempt, "rebalanced",
                      absl::StrCat("node ", evict_node, " after ", kind, ": ",
                                   summary, "; ", speeds->second,
                                   cost.empty() ? "" : "; ", cost));
      absl::StrAppend(&why, " (re-planned with node ", evict_node,
                      " at its measured speed)");
      (void)FailAttempt(job, why);
      return;
    }
  } else if (action == FaultPolicy::evict) {
    // Without the culprit's node the next attempt is placed on what is left
    // (a spare, or fewer nodes down to launch.min_nodes) and re-planned.
    const JobLaunch& l = job.spec().launch();
    const int left = job.node_info_size() - 1;
    const int floor = l.nodes() == 0 ? 1 : l.min_nodes() > 0 ? l.min_nodes()
                                                             : l.nodes();
    std::string refused;
    if (evict_node.empty()) {
      refused = "the finding names no node";
    } else if (left < floor) {
      refused = absl::StrCat("it would leave ", left, " node(s), below ",
                             l.min_nodes() > 0 ? "launch.min_nodes"
                                               : "launch.nodes",
                             " ", floor);
    }
    if (!refused.empty()) {
      const bool hang = e.kind == fault::EventKind::kHang;
      events_->Record(job.job_id(), attempt, "fault_action",
                      absl::StrCat(hang ? "restart" : "report", " after ",
                                   kind, " (evict refused: ", refused, ")"));
      if (!hang) return;
    } else {
      control::JobInfo next = job;
      next.add_evicted_nodes(evict_node);
      if (!Commit(job, std::move(next)).ok()) return;
      events_->Record(job.job_id(), attempt, "evicted",
                      absl::StrCat("node ", evict_node, " after ", kind, ": ",
                                   summary, cost.empty() ? "" : "; ", cost));
      absl::StrAppend(&why, " (node ", evict_node, " evicted)");
      (void)FailAttempt(job, why);
      return;
    }
  } else {
    events_->Record(job.job_id(), attempt, "fault_action",
                    absl::StrCat(fault::ActionName(action), " after ", kind,
                                 cost.empty() ? "" : ": ", cost));
  }
  (void)FailAttempt(job, why);
}

StatusOr<control::JobInfo> JobManager::SetFaultPolicy(
    const std::string& job_id,
    const google::protobuf::RepeatedPtrField<std::string>& settings) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  }
  control::JobInfo& job = it->second;
  if (!Active(job)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " already ended (",
                     control::JobState_Name(job.state()), ")"));
  }
  control::JobInfo next = job;
  for (const std::string& kv : settings) {
    RETURN_IF_ERROR(
        fault::ApplyFaultSetting(kv, next.mutable_spec()->mutable_fault()));
  }
  RETURN_IF_ERROR(planner::ValidateJob(next.spec(), "job " + job_id));
  RETURN_IF_ERROR(Commit(job, std::move(next)));
  watched_.erase(job_id);  // detectors start over with the new thresholds
  events_->Record(job_id, job.attempt(), "fault_policy",
                  absl::StrCat("set ", absl::StrJoin(settings, " ")));
  return job;
}

StatusOr<control::DiagnoseReply> JobManager::Diagnose(
    const control::DiagnoseRequest& request) const {
  const std::string& job_id = request.job_id();
  auto job = jobs_.find(job_id);
  if (job == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  }
  control::DiagnoseReply d;
  auto w = watched_.find(job_id);
  if (w != watched_.end() && w->second.monitor != nullptr) {
    d = w->second.monitor->Diagnose(request.history(), request.first_step(),
                                    request.last_step());
    d.set_attempt(w->second.attempt);
  }
  d.set_job_id(job_id);
  return d;
}

double JobManager::StoredComputeScale(const std::string& key) {
  auto stored = store_->Get(key);
  double scale = 1.0;
  if (!stored.ok() || !absl::SimpleAtod(*stored, &scale) || !(scale > 0)) {
    return 1.0;
  }
  return scale;
}

// A plan check found the job's stages computing `ratio` times the planned
// time. The plan assumed the devices at the stored scale it used, so the
// devices' scale is that times `ratio`; it is stored (for the next plan on
// such devices) when it moved by more than 2%, the noise of a median of
// plan-check windows (docs/fault.md).
void JobManager::Calibrate(const control::JobInfo& job, double ratio) {
  if (!(ratio > 0) || job.node_info_size() == 0) return;
  const auto used = planned_scale_.find(job.job_id());
  const double scale =
      (used == planned_scale_.end() ? 1.0 : used->second) * ratio;
  std::vector<control::WorkerInfo> nodes(job.node_info().begin(),
                                         job.node_info().end());
  const std::string key = CalibrationKey(nodes);
  const double stored = StoredComputeScale(key);
  if (std::abs(scale / stored - 1) <= 0.02) return;
  if (!store_->Put(key, absl::StrCat(scale)).ok()) return;
  events_->Record(job.job_id(), job.attempt(), "calibrated",
                  absl::StrFormat("%s: stages compute %.2fx the plan; devices "
                                  "now at compute x%.3f (was x%.3f)",
                                  key, ratio, scale, stored));
}

}  // namespace strata::coordinator
