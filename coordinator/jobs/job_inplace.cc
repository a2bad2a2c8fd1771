// JobManager's in-place restart of one rank (docs/fault.md "In-place
// restart"): when a rank of an attempt whose ranks all opted in dies or
// hangs, the attempt is kept. The coordinator raises the attempt's
// generation in the KV ("<job>/<attempt>/inplace/generation", which every
// opted-in rank watches: their groups abort and they wait to re-form), has
// the rank's worker replace that rank alone (HeartbeatReply.replace), and
// records an `in_place_restart` event when the replacement's first step of
// the new generation arrives. Anything else while a replacement is under
// way (a second failure, a replacement that does not report within
// kReplaceTimeoutMs) restarts the attempt as before. A lost node whose
// ranks all opted in is replaced in place on a spare the same way
// (job_inplace_node.cc).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "control/codec.h"
#include "coordinator/jobs/attempt_plan.h"
#include "coordinator/jobs/job_manager.h"
#include "placement/rank_env.h"

namespace strata::coordinator {

using control::AttemptKey;

namespace {

// How long a replacement may take from the failure to its first step
// before the attempt is restarted instead: the ranks' own wait for a
// generation (train/in_place.h, 60 s) is the other side of it.
constexpr int64_t kReplaceTimeoutMs = 60000;
// In-place restarts per attempt; beyond, a failure restarts the attempt (a
// rank that keeps dying is better placed elsewhere).
constexpr int kMaxInPlacePerAttempt = 16;

}  // namespace

InPlaceState& JobManager::InPlaceOf(JobRuntime& rt) {
  if (rt.in_place.attempt != rt.info.attempt()) {
    rt.in_place = InPlaceState();
    rt.in_place.attempt = rt.info.attempt();
  }
  return rt.in_place;
}

bool JobManager::InPlaceAllowed(JobRuntime& rt, const std::string& what) {
  const control::JobInfo& job = rt.info;
  InPlaceState& st = InPlaceOf(rt);
  if (job.state() != control::RUNNING ||
      static_cast<int>(st.opted_in.size()) < job.ranks_size()) {
    return false;  // not every rank opted in: a full restart, as before
  }
  auto refuse = [&](const std::string& why) {
    events_->Record(job.job_id(), job.attempt(), "fault_action",
                    absl::StrCat("no in-place restart of ", what, " (", why,
                                 "): restarting the attempt"));
    return false;
  };
  if (st.pending) {
    const InPlaceState::Replacement& p = *st.pending;
    return refuse(absl::StrCat(
        p.lost_node.empty() ? absl::StrCat("rank ", p.ranks[0])
                            : absl::StrCat("node ", p.lost_node),
        "'s replacement is still under way"));
  }
  if (st.restarts >= kMaxInPlacePerAttempt) {
    return refuse(absl::StrCat(st.restarts, " in-place restarts already"));
  }
  return true;
}

bool JobManager::AnnounceGeneration(
    JobRuntime& rt, InPlaceState::Replacement p,
    const std::vector<std::pair<std::string, std::string>>& keys) {
  control::JobInfo& job = rt.info;
  InPlaceState& st = InPlaceOf(rt);
  const int generation = st.generation + 1;
  const std::string attempt = AttemptKey(job.job_id(), job.attempt());
  // What the generation's ranks read when they re-form (runtime/in_place.cc)
  // is written before the generation that makes them look.
  for (const auto& [key, value] : keys) {
    if (!kv_->Set(absl::StrCat(attempt, "/g", generation, "/", key), value)
             .ok()) {
      return false;
    }
  }
  if (!kv_->Set(attempt + "/inplace/generation", std::to_string(generation))
           .ok()) {
    return false;
  }
  int64_t last_step = 0;
  for (const auto& [r, report] : rt.latest_steps)
    last_step = std::max(last_step, report.step());
  p.since_ms = clock_->SteadyNowMs();
  p.last_step = last_step;
  st.generation = generation;
  ++st.restarts;
  st.pending = std::move(p);
  job.set_generation(generation);
  // Steps start over from the agreed one (which may be earlier), and the
  // detectors with them.
  rt.latest_steps.clear();
  FaultHandler::Reset(rt);
  return true;
}

bool JobManager::RestartInPlace(JobRuntime& rt, int rank,
                                const std::string& cause) {
  control::JobInfo& job = rt.info;
  if (rank < 0 || rank >= job.ranks_size() ||
      !InPlaceAllowed(rt, absl::StrCat("rank ", rank))) {
    return false;
  }
  auto refuse = [&](const std::string& why) {
    events_->Record(job.job_id(), job.attempt(), "fault_action",
                    absl::StrCat("no in-place restart of rank ", rank, " (",
                                 why, "): restarting the attempt"));
    return false;
  };
  // The rank's node and its worker.
  const AttemptIndex& index = IndexOf(rt);
  int node = -1;
  for (size_t n = 0; n < index.ranks_of_node.size(); ++n) {
    const auto& rs = index.ranks_of_node[n];
    if (std::find(rs.begin(), rs.end(), rank) != rs.end())
      node = static_cast<int>(n);
  }
  if (node < 0 || node >= job.nodes_size()) {
    return refuse("its node is not known");
  }
  InPlaceState::Replacement p{
      .ranks = {rank},
      .node = node < job.node_info_size() ? job.node_info(node).node_name()
                                          : job.nodes(node),
      .cause = cause,
      .lost_node = ""};
  if (!AnnounceGeneration(rt, std::move(p), {})) {
    return refuse("the KV store refused the generation");
  }
  const InPlaceState& st = rt.in_place;
  logger_->warn("{} attempt {}: in-place restart of rank {} on {} "
                "(generation {}) after: {}",
                job.job_id(), job.attempt(), rank, st.pending->node,
                st.generation, cause);
  (void)logs_->Note(job.job_id(),
                    absl::StrCat("[strata] attempt ", job.attempt(),
                                 ": replacing rank ", rank,
                                 " in place (generation ", st.generation,
                                 ") after: ", cause));
  return true;
}

bool JobManager::OnInPlaceStep(JobRuntime& rt, const control::StepReport& s) {
  InPlaceState& st = InPlaceOf(rt);
  if (s.generation() < st.generation) return false;  // an older generation's
  // A restarted coordinator forgot the generation; the ranks did not (the
  // next one must be newer than theirs).
  st.generation = std::max(st.generation, s.generation());
  if (s.in_place()) st.opted_in.insert(s.rank());
  if (!st.pending || !st.pending->Has(s.rank()) ||
      s.generation() != st.generation || !s.phase().empty() ||
      s.phase_end()) {
    return true;
  }
  const InPlaceState::Replacement& p = *st.pending;
  const int64_t ms = clock_->SteadyNowMs() - p.since_ms;
  // The report reaches the coordinator with the worker's next heartbeat:
  // the step itself ended that much earlier (its end time, taken as on
  // this clock; bounded by what was measured here).
  const int64_t late =
      s.end_unix_us() > 0
          ? std::clamp<int64_t>(clock_->NowMs() - s.end_unix_us() / 1000, 0,
                                ms)
          : 0;
  const int64_t from = std::max<int64_t>(0, s.step() - 1);
  const std::string what =
      p.lost_node.empty()
          ? absl::StrCat("rank ", p.ranks[0], " on ", p.node,
                         " replaced in place")
          : absl::StrCat("node ", p.lost_node, " (rank(s) ",
                         absl::StrJoin(p.ranks, ","),
                         ") replaced in place by spare ", p.node);
  const std::string message = absl::StrCat(
      what, ": generation ", st.generation, ", resumed from step ", from,
      " (the job had reached ", p.last_step, "), first step ", ms - late,
      " ms after the failure was seen (reported ", late,
      " ms after it ended)");
  events_->Record(rt.info.job_id(), rt.info.attempt(), "in_place_restart",
                  message, p.ranks[0], p.node, from, p.cause);
  st.pending.reset();
  return true;
}

bool JobManager::InPlaceLaunching(JobRuntime& rt, int rank) {
  const InPlaceState& st = InPlaceOf(rt);
  return st.pending.has_value() && st.pending->Has(rank);
}

void JobManager::AddReplaceOrders(const std::string& worker_id,
                                  JobRuntime& rt,
                                  control::HeartbeatReply* orders) {
  InPlaceState& st = InPlaceOf(rt);
  if (!st.pending || rt.info.state() != control::RUNNING) return;
  const std::vector<int>* on = RanksOn(rt, worker_id);
  if (on == nullptr) return;
  std::vector<int> due;
  for (int rank : *on) {
    if (st.pending->Has(rank) &&
        rt.info.ranks(rank).generation() < st.generation) {
      due.push_back(rank);
    }
  }
  if (due.empty()) return;  // every one runs the new generation
  const auto& prepared = IndexOf(rt).launches;
  if (!prepared.ok()) return;  // CheckInPlace times out
  auto launches = prepared->For(rt.info, due);
  if (!launches.ok()) return;
  for (control::RankLaunch& l : *launches) {
    l.set_generation(st.generation);
    (*l.mutable_env())[placement::kRestartGeneration] =
        std::to_string(st.generation);
    if (options_.rank_keys != nullptr) {
      control::CurveKeyPair keys = options_.rank_keys->Issue(
          rt.info.job_id(), rt.info.attempt(), l.rank());
      l.set_curve_public_key(keys.public_key);
      l.set_curve_secret_key(keys.secret_key);
    }
    *orders->add_replace() = std::move(l);
  }
}

void JobManager::CheckInPlace(JobRuntime& rt) {
  InPlaceState& st = InPlaceOf(rt);
  if (!st.pending || rt.info.state() != control::RUNNING) return;
  const int64_t ms = clock_->SteadyNowMs() - st.pending->since_ms;
  if (ms < kReplaceTimeoutMs) return;
  const std::string why = absl::StrCat(
      "rank(s) ", absl::StrJoin(st.pending->ranks, ","),
      "'s in-place replacement (generation ", st.generation,
      ") reported no step within ", kReplaceTimeoutMs, " ms");
  st.pending.reset();
  (void)FailAttempt(rt, why);
}

}  // namespace strata::coordinator
