#include "coordinator/jobs/job_faults.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "control/codec.h"
#include "coordinator/jobs/attempt_plan.h"
#include "fault/wavefront.h"

namespace strata::coordinator {

using control::AttemptKey;

namespace {

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

// What the ranks' flight recorders say: every group's progress, the ranks
// that sent none, those stopped (SIGSTOP), and their errors and stacks.
struct Flights {
  std::vector<fault::GroupProgress> progress;
  std::vector<std::string> silent, notes;
  std::vector<int> stopped;
};
Flights ReadFlights(const control::JobInfo& job,
                    const std::map<int, control::RankFlight>& flights) {
  Flights out;
  for (int r = 0; r < job.ranks_size(); ++r) {
    auto it = flights.find(r);
    if (it == flights.end()) {
      out.silent.push_back(std::to_string(r));
      continue;
    }
    const control::RankFlight& f = it->second;
    if (f.stopped()) out.stopped.push_back(r);
    if (!f.error().empty())
      out.notes.push_back(absl::StrCat("rank ", r, ": ", f.error()));
    if (!f.stack().empty())
      out.notes.push_back(absl::StrCat("rank ", r, ": ", f.stack()));
    for (const auto& g : f.groups()) {
      out.progress.push_back(
          {r, g.group(), g.entered_seq(), g.completed_seq(), g.op()});
    }
  }
  return out;
}

// Who the others wait for, and where.
struct HangVerdict {
  std::vector<int> culprits;
  bool inside = false;   // stopped inside a collective every member entered
  bool earlier = false;  // in a collective others already finished
};
HangVerdict Judge(const fault::Wavefront& wave, const std::vector<int>& stopped) {
  HangVerdict v;
  // Every member entered and data stopped moving: a stopped process inside
  // the collective is the one the others wait for.
  v.culprits = wave.culprits;
  v.inside = v.culprits.empty() && !stopped.empty();
  if (v.inside) v.culprits = stopped;
  // Stopped in a collective others already finished (they wait in the next
  // one, or outside any).
  for (const auto& g : wave.groups) {
    for (int r : v.culprits) {
      const bool in_waiting =
          std::find(g.waiting.begin(), g.waiting.end(), r) != g.waiting.end();
      v.earlier |=
          std::find(g.behind.begin(), g.behind.end(), r) != g.behind.end() ||
          (in_waiting && !g.done.empty());
    }
  }
  return v;
}

std::string HangSummary(const HangVerdict& v, const fault::Wavefront& wave,
                        const std::string& text) {
  if (v.culprits.empty()) return text;
  const std::string who =
      absl::StrCat("rank(s) ", absl::StrJoin(v.culprits, ","));
  if (v.inside && wave.groups.empty()) {
    return absl::StrCat(who, " stopped outside any collective (", text,
                        "; the others wait elsewhere, e.g. a checkpoint)");
  }
  if (v.inside) {
    return absl::StrCat(who,
                        v.earlier ? " stopped inside a collective the others "
                                    "finished ("
                                  : " stopped inside the collective the "
                                    "others wait in (",
                        text, ")");
  }
  return absl::StrCat(who, " never entered the collective the others wait in (",
                      text, ")");
}

// Every rank of the running attempt opted in to in-place restart and no
// replacement is under way (job_inplace.cc).
bool InPlaceReady(const JobRuntime& rt) {
  return rt.in_place.attempt == rt.info.attempt() && !rt.in_place.pending &&
         static_cast<int>(rt.in_place.opted_in.size()) >= rt.info.ranks_size();
}

// The node rank `rank` runs on ("" when the plan does not place it).
std::string NodeOf(const control::JobInfo& job, int rank) {
  std::string node;
  for (const auto& m : job.plan().placement().ranks()) {
    if (m.rank() == rank && m.node() >= 0 && m.node() < job.node_info_size()) {
      node = job.node_info(m.node()).node_name();
    }
  }
  return node;
}

}  // namespace

FaultWatch& FaultHandler::WatchOf(JobRuntime& rt) {
  FaultWatch& w = rt.fault;
  const control::JobInfo& job = rt.info;
  if (w.attempt != job.attempt() || w.monitor == nullptr) {
    w = FaultWatch();
    w.attempt = job.attempt();
    const auto& predicted = job.plan().stage_compute_s();
    w.monitor = std::make_unique<JobMonitor>(
        *clock_, fault::Resolve(job.spec().fault()), RankMetas(job),
        std::vector<double>(predicted.begin(), predicted.end()));
  }
  return w;
}

void FaultHandler::OnStep(JobRuntime& rt, const control::StepReport& s) {
  const control::JobInfo& job = rt.info;
  // The first step of an attempt that followed a failure: what the restart
  // cost.
  if (rt.restart.began_ms) {
    const int64_t ms = clock_->SteadyNowMs() - *rt.restart.began_ms;
    rt.restart.cost_ms = ms;
    rt.restart.began_ms.reset();
    events_->Record(job.job_id(), job.attempt(), "running_again",
                    absl::StrCat("first step ", ms,
                                 " ms after the previous attempt failed"));
  }
  FaultWatch& w = WatchOf(rt);
  const fault::ResolvedPolicy policy = fault::Resolve(job.spec().fault());
  const std::vector<fault::FaultEvent> found = w.monitor->OnStep(s);
  if (auto ratio = w.monitor->TakePlanCalibration()) {
    calibrator_->Calibrate(rt, *ratio);
  }
  for (const fault::FaultEvent& e : found) {
    const FaultAssessment a =
        Assess(e, policy, e.kind == fault::EventKind::kSlowLink
                              ? WatchOf(rt).monitor->SlowLinkSuspect()
                              : std::nullopt);
    if (a.slows_job) rt.goodput.OnStraggler();
    ActOn(rt, e, a);
    if (rt.info.state() != control::RUNNING) return;
  }
}

void FaultHandler::Tick(JobRuntime& rt) {
  FaultWatch& w = WatchOf(rt);
  const int64_t now = clock_->SteadyNowMs();
  if (!w.stall) {
    w.stall = w.monitor->CheckHang();
    if (!w.stall) return;
    w.diagnose_since_ms = now;
    w.flights.clear();
    logger_->warn(
        "{} attempt {}: no step progress for {} ms (deadline {} "
        "ms); reading the ranks' flight recorders",
        rt.info.job_id(), rt.info.attempt(), w.stall->stalled_ms,
        w.stall->deadline_ms);
    return;
  }
  if (DiagnosisDone(rt, w, now)) ConcludeHang(rt, w);
}

bool FaultHandler::DiagnosisDone(const JobRuntime& rt, const FaultWatch& w,
                                 int64_t now) {
  const bool all = static_cast<int>(w.flights.size()) >= rt.info.ranks_size();
  // An attempt that restarts in place (docs/fault.md "In-place restart")
  // replaces one stopped rank as soon as its worker said so, without
  // waiting for the other ranks' stacks.
  const bool stopped_one =
      InPlaceReady(rt) &&
      std::count_if(w.flights.begin(), w.flights.end(), [](const auto& f) {
        return f.second.stopped();
      }) == 1;
  return all || stopped_one || now - w.diagnose_since_ms >= kDiagnoseWaitMs;
}

void FaultHandler::AddDiagnoseOrders(JobTable& table,
                                     const std::string& worker_id,
                                     control::HeartbeatReply* orders) {
  for (auto& [id, rt] : table.active()) {
    if (!rt.fault.stall || rt.info.state() != control::RUNNING) continue;
    if (IndexOf(rt).node_of_worker.contains(worker_id)) {
      orders->add_diagnose(AttemptKey(id, rt.fault.attempt));
    }
  }
}

void FaultHandler::OnFlights(
    JobTable& table,
    const google::protobuf::RepeatedPtrField<control::RankFlight>& flights) {
  for (const auto& f : flights) {
    JobRuntime* rt = table.FindActive(f.job_id());
    if (rt == nullptr || !rt->fault.stall ||
        rt->fault.attempt != f.attempt()) {
      continue;
    }
    rt->fault.flights[f.rank()] = f;
  }
  // Concluded at once rather than at the next tick: the orders that follow
  // (an in-place replacement on this very worker) then go out in the reply
  // to the heartbeat that brought the flight recorders, not in the next one.
  for (const auto& f : flights) {
    JobRuntime* rt = table.FindActive(f.job_id());
    if (rt != nullptr && rt->fault.stall &&
        rt->info.state() == control::RUNNING &&
        rt->fault.attempt == rt->info.attempt() &&
        DiagnosisDone(*rt, rt->fault, clock_->SteadyNowMs())) {
      ConcludeHang(*rt, rt->fault);
    }
  }
}

void FaultHandler::ConcludeHang(JobRuntime& rt, FaultWatch& w) {
  const control::JobInfo& job = rt.info;
  rt.goodput.OnHang();
  const Flights flights = ReadFlights(job, w.flights);
  const fault::Wavefront wave = fault::ComputeWavefront(flights.progress);
  fault::FaultEvent e = fault::HangDetector::ToEvent(*w.stall);
  std::string text = fault::DescribeWavefront(wave);
  if (!flights.silent.empty()) {
    absl::StrAppend(&text, "; no flight recorder from rank(s) ",
                    absl::StrJoin(flights.silent, ","), " within ",
                    kDiagnoseWaitMs, " ms");
  }
  const HangVerdict verdict = Judge(wave, flights.stopped);
  if (verdict.culprits.size() == 1) {
    e.rank = verdict.culprits[0];
    e.node = NodeOf(job, e.rank);
  } else if (flights.stopped.size() == 1 &&
             (InPlaceReady(rt) ||
              std::find(verdict.culprits.begin(), verdict.culprits.end(),
                        flights.stopped[0]) != verdict.culprits.end())) {
    // Several ranks missing from the collective, one of them stopped: the
    // others wait on it outside any collective (e.g. the checkpoint
    // commit's leader waiting for its vote), so it is the one to replace.
    e.rank = flights.stopped[0];
    e.node = NodeOf(job, e.rank);
  }
  e.evidence = absl::StrCat(e.evidence, "; ", text);
  for (const std::string& n : flights.notes)
    absl::StrAppend(&e.evidence, "; ", n.substr(0, 2000));
  w.monitor->SetLastWavefront(text);
  w.stall.reset();
  FaultAssessment a = Assess(e, fault::Resolve(job.spec().fault()), {});
  a.summary = HangSummary(verdict, wave, text);
  ActOn(rt, e, a);
}

FaultCosts FaultHandler::CostsOf(JobRuntime& rt) {
  const FaultWatch& w = WatchOf(rt);
  FaultCosts c;
  c.total_steps = w.monitor->TotalSteps();
  c.latest_step = w.monitor->LatestStep();
  c.median_step_s = w.monitor->MedianStepSeconds();
  if (rt.restart.cost_ms) c.measured_restart_s = *rt.restart.cost_ms / 1000.0;
  c.policy_restart_s = fault::Resolve(rt.info.spec().fault()).restart_cost_s;
  return c;
}

StatusOr<ReplanPrediction> FaultHandler::PredictReplan(
    const JobRuntime& rt, const std::string& node, double speed) const {
  const control::JobInfo& job = rt.info;
  google::protobuf::Map<std::string, double> speeds = job.node_speed();
  speeds[node] = speed;
  std::vector<control::WorkerInfo> nodes(job.node_info().begin(),
                                         job.node_info().end());
  // The scale the running plan used, so both predictions compare alike.
  ASSIGN_OR_RETURN(Plan next,
                   PlanAttempt(job.spec(), nodes, speeds, rt.planned_scale));
  return ReplanPrediction{
      .step_s = next.step_time_s(),
      .tp = next.tp(),
      .pp = next.pp(),
      .dp = next.dp(),
      .layers_per_stage = {next.layers_per_stage().begin(),
                           next.layers_per_stage().end()}};
}

void FaultHandler::ActOn(JobRuntime& rt, const fault::FaultEvent& e,
                         const FaultAssessment& assessed) {
  const control::JobInfo& job = rt.info;
  events_->Record(job.job_id(), job.attempt(), e, assessed.summary);
  logger_->warn("{} attempt {}: {}: {}; evidence: {}", job.job_id(),
                job.attempt(), fault::EventKindName(e.kind), assessed.summary,
                e.evidence);
  if (assessed.action == FaultPolicy::report) return;
  // A hang of one rank whose attempt opted in: that rank alone is replaced
  // (the finding and its evidence are stored above all the same).
  if (e.kind == fault::EventKind::kHang &&
      assessed.action == FaultPolicy::restart && e.rank >= 0 &&
      actions_->RestartInPlace(rt, e.rank,
                               absl::StrCat("hang: ", assessed.summary))) {
    return;
  }
  const JobLaunch& l = job.spec().launch();
  const FaultCase c{
      .kind = e.kind,
      .slowdown = e.slowdown,
      .assessed = assessed,
      .nodes = job.node_info_size(),
      .launch_nodes = l.nodes(),
      .launch_min_nodes = l.min_nodes(),
      .has_model = !l.model().empty(),
      .node_speed = job.node_speed().contains(assessed.node)
                        ? job.node_speed().at(assessed.node)
                        : 1.0,
      .plan_step_s = job.plan().step_time_s()};
  Apply(rt, DecideFault(c, CostsOf(rt),
                        [&](const std::string& node, double speed) {
                          return PredictReplan(rt, node, speed);
                        }));
}

void FaultHandler::Apply(JobRuntime& rt, const FaultDecision& d) {
  using Act = FaultDecision::Act;
  const std::string id = rt.info.job_id();
  const int attempt = rt.info.attempt();
  if (d.act == Act::kEvict || d.act == Act::kRebalance) {
    control::JobInfo next = rt.info;
    if (d.act == Act::kEvict) next.add_evicted_nodes(d.node);
    if (d.act == Act::kRebalance) (*next.mutable_node_speed())[d.node] = d.node_speed;
    if (!actions_->Commit(rt, std::move(next)).ok()) return;
  }
  if (!d.event_kind.empty()) events_->Record(id, attempt, d.event_kind, d.event_text);
  if (d.act != Act::kNone) (void)actions_->FailAttempt(rt, d.reason);
}

control::DiagnoseReply FaultHandler::Diagnose(
    const JobRuntime* rt, const control::DiagnoseRequest& request) {
  control::DiagnoseReply d;
  if (rt != nullptr && rt->fault.monitor != nullptr) {
    d = rt->fault.monitor->Diagnose(request.history(), request.first_step(),
                                    request.last_step());
    d.set_attempt(rt->fault.attempt);
  }
  d.set_job_id(request.job_id());
  return d;
}

}  // namespace strata::coordinator
