// JobManager's intake of what ranks report through their workers (rank
// states and the orders they lead to, step telemetry, output relay) and the
// placement facts it is checked against (docs/security.md "Telemetry").
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "control/codec.h"
#include "coordinator/jobs/attempt_plan.h"
#include "coordinator/jobs/job_manager.h"

namespace strata::coordinator {

using control::AttemptKey;

// What a worker's rank report says about the attempts it holds.
struct JobManager::ReportOutcome {
  std::set<std::string> stop;                    // attempts to stop
  std::set<std::pair<std::string, int>> held;    // (job, rank) still wanted
  std::set<std::string> touched;                 // jobs whose ranks changed
};

bool JobManager::MayRelayLogs(const std::string& worker_id,
                              const std::string& job_id, int attempt,
                              int rank) {
  const control::JobInfo* job = table_.Held(job_id);
  std::optional<control::JobInfo> stored;
  if (job == nullptr) {
    auto record = table_.Record(job_id);  // output of a job that aged out
    if (!record.ok()) return false;
    job = &stored.emplace(*std::move(record));
  }
  if (attempt < 0 || attempt > job->attempt() || rank < 0 ||
      rank >= job->ranks_size()) {
    return false;
  }
  if (attempt < job->attempt() || job->state() != control::RUNNING) {
    return true;
  }
  return PlacedOn(worker_id, job_id, attempt, rank);
}

bool JobManager::PlacedOn(const std::string& worker_id,
                          const std::string& job_id, int attempt, int rank) {
  JobRuntime* rt = table_.FindActive(job_id);
  if (rt == nullptr || rt->info.state() != control::RUNNING) return false;
  const control::JobInfo& job = rt->info;
  if ((attempt >= 0 && attempt != job.attempt()) || rank < 0 ||
      rank >= job.ranks_size()) {
    return false;
  }
  const std::vector<int>* ranks = RanksOn(*rt, worker_id);
  return ranks != nullptr &&
         std::find(ranks->begin(), ranks->end(), rank) != ranks->end();
}

void JobManager::OnMemNotices(
    const std::string& worker_id,
    const google::protobuf::RepeatedPtrField<control::MemTierNotice>& n) {
  for (const auto& notice : n) {
    JobRuntime* rt = table_.FindActive(notice.job_id());
    if (rt == nullptr || RanksOn(*rt, worker_id) == nullptr) continue;
    events_->Record(notice.job_id(), rt->info.attempt(), "mem_tier",
                    absl::StrCat("worker ", worker_id, " (", notice.kind(),
                                 "): ", notice.message().substr(0, 1024)));
  }
}

void JobManager::OnLogs(
    const google::protobuf::RepeatedPtrField<control::LogChunk>& chunks) {
  for (const auto& c : chunks) {
    if (table_.Held(c.job_id()) == nullptr && !table_.Record(c.job_id()).ok()) {
      continue;
    }
    Status s = logs_->Append(c);
    // Logged when output starts and stops being lost, not for every chunk
    // (a full disk would otherwise add a line per heartbeat).
    if (!s.ok() && !losing_output_) {
      logger_->error("storing job output (first loss: {}): {}", c.job_id(),
                     s.ToString());
    } else if (s.ok() && losing_output_) {
      logger_->info("storing job output again");
    }
    losing_output_ = !s.ok();
  }
}

bool JobManager::KeepStep(JobRuntime& rt, const control::StepReport& report) {
  auto& latest = rt.latest_steps;
  if (auto prev = latest.find(report.rank());
      prev != latest.end() && report.step() <= prev->second.step()) {
    return false;  // steps only move forward
  }
  // The job's declared length is what it said first; a later report cannot
  // stretch it (docs/security.md "Telemetry").
  int64_t& declared = rt.declared_steps;
  if (declared == 0 && report.total_steps() > 0) {
    declared = report.total_steps();
  }
  if (declared > 0 && report.step() > declared) return false;
  control::StepReport& s = latest[report.rank()] = report;
  s.set_total_steps(declared);
  return true;
}

int JobManager::OnSteps(
    const std::string& worker_id,
    const google::protobuf::RepeatedPtrField<control::StepReport>& steps) {
  int dropped = 0;
  for (const auto& report : steps) {
    JobRuntime* rt = PlacedOn(worker_id, report.job_id(), -1, report.rank())
                         ? table_.FindActive(report.job_id())
                         : nullptr;
    if (rt != nullptr && !OnInPlaceStep(*rt, report)) {
      ++dropped;  // an in-place restart's older generation
      continue;
    }
    if (rt != nullptr && (!report.phase().empty() || report.phase_end())) {
      faults_.OnPhase(*rt, report);  // not a step
      continue;
    }
    if (rt == nullptr || !KeepStep(*rt, report)) {
      ++dropped;
      continue;
    }
    const control::StepReport& s = rt->latest_steps.at(report.rank());
    // The job moves in lock-step: rank 0's steps.
    if (s.rank() == 0) GoodputBook::OnRankZeroStep(*rt, s);
    traces_.Keep(*rt, s);
    faults_.OnStep(*rt, control::StepReport(s));
  }
  Retire();
  return dropped;
}

void JobManager::ApplyRankReport(const std::string& worker_id,
                                 const control::RankReport& r,
                                 ReportOutcome* out) {
  JobRuntime* rt = table_.FindActive(r.job_id());
  if (rt == nullptr || rt->info.state() != control::RUNNING ||
      rt->info.attempt() != r.attempt() || r.rank() < 0 ||
      r.rank() >= rt->info.ranks_size()) {
    out->stop.insert(AttemptKey(r.job_id(), r.attempt()));
    return;
  }
  if (!PlacedOn(worker_id, r.job_id(), r.attempt(), r.rank())) {
    // A rank this worker was never given: it must not speak for it
    // (docs/security.md "Telemetry"). Whatever it runs of that attempt is
    // stopped.
    logger_->warn("{} reported rank {} of {} attempt {}, which is not "
                  "placed on it; ignored",
                  worker_id, r.rank(), r.job_id(), r.attempt());
    out->stop.insert(AttemptKey(r.job_id(), r.attempt()));
    return;
  }
  const std::string id = rt->info.job_id();
  out->held.insert({id, r.rank()});
  control::RankReport* cur = rt->info.mutable_ranks(r.rank());
  if (cur->state() == r.state() && cur->pid() == r.pid()) return;
  const bool exited = r.state() == control::RANK_EXITED ||
                      r.state() == control::RANK_FAILED_TO_START;
  // An exit cannot be acted on while the store is unwritable: it stays
  // unseen, and the worker reports it again with its next heartbeat.
  if (exited && !Writable()) return;
  const control::RankReport before = *cur;
  *cur = r;
  out->touched.insert(id);
  const std::string what =
      absl::StrCat("rank ", r.rank(), " on ", worker_id, " ", DescribeExit(r));
  if (exited) events_->Record(id, rt->info.attempt(), "rank_exited", what);
  if (!Failed(r)) return;
  if (RestartInPlace(*rt, r.rank(), what)) return;  // the others go on
  if (!FailAttempt(*rt, what).ok()) {
    *rt->info.mutable_ranks(r.rank()) = before;  // seen again with the next report
    return;
  }
  out->stop.insert(AttemptKey(r.job_id(), r.attempt()));
}

void JobManager::AddLaunchOrders(const std::string& worker_id, JobRuntime& rt,
                                 ReportOutcome& seen,
                                 control::HeartbeatReply* orders) {
  // A copy: FailAttempt replaces the record.
  const std::string id = rt.info.job_id();
  const std::vector<int>* placed = RanksOn(rt, worker_id);
  if (placed == nullptr) return;
  std::vector<int> to_launch;
  for (int rank : *placed) {
    // Held, or being replaced in place (replace orders, job_inplace.cc).
    if (seen.held.contains({id, rank}) || InPlaceLaunching(rt, rank)) continue;
    if (rt.info.ranks(rank).state() == control::RANK_STATE_UNSPECIFIED) {
      to_launch.push_back(rank);
      continue;
    }
    const int attempt = rt.info.attempt();
    to_launch.clear();
    if (FailAttempt(rt, absl::StrCat("rank ", rank, " vanished from ",
                                     worker_id, " (worker restarted?)"))
            .ok()) {
      seen.stop.insert(AttemptKey(id, attempt));
    }
    break;
  }
  if (rt.info.state() != control::RUNNING) return;
  const auto& prepared = IndexOf(rt).launches;
  auto launches = prepared.ok() ? prepared->For(rt.info, to_launch)
                                : StatusOr<std::vector<control::RankLaunch>>(
                                      prepared.status());
  if (!launches.ok()) {
    (void)Finish(rt, control::FAILED,
                 absl::StrCat("attempt ", rt.info.attempt(), ": ",
                              launches.status().message()));
    return;
  }
  for (auto& l : *launches) {
    if (options_.rank_keys != nullptr) {
      control::CurveKeyPair keys =
          options_.rank_keys->Issue(id, rt.info.attempt(), l.rank());
      l.set_curve_public_key(keys.public_key);
      l.set_curve_secret_key(keys.secret_key);
    }
    *orders->add_launch() = std::move(l);
  }
  if (seen.touched.contains(id) &&
      std::all_of(rt.info.ranks().begin(), rt.info.ranks().end(), ExitedZero)) {
    (void)Finish(rt, control::SUCCEEDED,
                 absl::StrCat("all ", rt.info.ranks_size(), " ranks exited 0"));
  }
}

void JobManager::OnWorkerReport(
    const std::string& worker_id,
    const google::protobuf::RepeatedPtrField<control::RankReport>& ranks,
    control::HeartbeatReply* orders) {
  ReportOutcome seen;
  for (const auto& r : ranks) ApplyRankReport(worker_id, r, &seen);
  for (auto& [id, rt] : table_.active()) {
    const auto& spares = rt.info.spare_workers();
    if (std::find(spares.begin(), spares.end(), worker_id) != spares.end()) {
      orders->set_spare(true);  // docs/fault.md "Hot spares"
    }
    if (rt.info.state() != control::RUNNING) continue;
    AddLaunchOrders(worker_id, rt, seen, orders);
    if (rt.info.state() == control::RUNNING)
      AddReplaceOrders(worker_id, rt, orders);
  }
  faults_.AddDiagnoseOrders(table_, worker_id, orders);
  traces_.AddOrders(table_, worker_id, orders);
  // Rank states are not persisted on every change: after a coordinator
  // restart the workers report them again on re-registration.
  for (const auto& key : seen.stop) orders->add_stop(key);
  orders->set_grace_ms(options_.default_grace_ms);
  for (const auto& r : ranks) {
    const control::JobInfo* job = table_.Held(r.job_id());
    if (job != nullptr && job->spec().launch().stop_grace_ms() > 0) {
      orders->set_grace_ms(job->spec().launch().stop_grace_ms());
    }
  }
  Retire();
}

}  // namespace strata::coordinator
