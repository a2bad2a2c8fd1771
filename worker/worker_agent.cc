#include "worker/worker_agent.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "control/codec.h"
#include "worker/flight_reader.h"

namespace strata::worker {

WorkerAgent::WorkerAgent(const Clock* clock, control::Client* client,
                         RankRunner* ranks, StepSource* steps,
                         WorkerAgentOptions options, Logger logger)
    : clock_(clock),
      client_(client),
      ranks_(ranks),
      steps_(steps),
      options_(std::move(options)),
      logger_(std::move(logger)),
      interval_ms_(options_.initial_interval_ms),
      next_report_ms_(clock->SteadyNowMs()),
      last_ok_ms_(clock->SteadyNowMs()),
      stop_grace_ms_(options_.stop_grace_ms),
      jitter_(options_.jitter_seed),
      limiter_(logger_, {}, clock) {}

int64_t WorkerAgent::MsUntilNextReport() const {
  return std::max<int64_t>(0, next_report_ms_ - clock_->SteadyNowMs());
}

Status WorkerAgent::Step() {
  ranks_->Poll();
  for (const auto& [id, text] : stacks_.Poll(clock_->SteadyNowMs())) {
    AddStack(id, text);
  }
  // Forwarded only for ranks this worker started (docs/security.md
  // "Telemetry"): a rank cannot make its worker speak for another job.
  std::set<std::pair<std::string, int>> started;
  for (const auto& r : ranks_->Reports()) started.insert({r.job_id(), r.rank()});
  for (auto& s : steps_->TakeChanged()) {
    if (!started.contains({s.job_id(), s.rank()})) {
      limiter_.Warn(s.job_id(), "foreign step",
                    "dropped a step report for rank {} of {}: this worker "
                    "did not start it",
                    s.rank(), s.job_id());
      continue;
    }
    latest_steps_[{s.job_id(), s.rank()}] = s;
    auto& queue = unsent_steps_[{s.job_id(), s.rank()}];
    queue.push_back(std::move(s));
    // Bounded while the coordinator is away: the oldest steps go first.
    if (queue.size() > static_cast<size_t>(kMaxQueuedSteps)) queue.pop_front();
  }
  const int64_t now = clock_->SteadyNowMs();
  // A rank that changed state is reported at once, unless the coordinator
  // is failing (then the backoff holds).
  if (ranks_->TakeDirty() && failures_ == 0) {
    next_report_ms_ = std::min(next_report_ms_, now);
  }
  limiter_.Flush();
  if (now < next_report_ms_) return absl::OkStatus();
  const int timeout_ms = static_cast<int>(
      std::min(interval_ms_ * 2, options_.max_call_timeout_ms));
  control::Request report = BuildReport();
  call_sent_us_ = clock_->NowUs();
  auto reply = client_->Call(report, timeout_ms);
  const int64_t after = clock_->SteadyNowMs();
  if (!reply.ok()) return OnFailure(reply.status(), after);
  OnReply(*reply, after);
  return absl::OkStatus();
}

void WorkerAgent::AddStack(int id, const std::string& text) {
  auto it = dumping_.find(id);
  if (it == dumping_.end()) return;
  control::RankFlight& f = it->second;
  if (!text.empty()) {
    f.set_stack(f.stack().empty() ? text : absl::StrCat(f.stack(), "; ", text));
  }
  flights_.push_back(std::move(f));
  dumping_.erase(it);
  next_report_ms_ = std::min(next_report_ms_, clock_->SteadyNowMs());
}

control::Request WorkerAgent::BuildReport() {
  control::Request req;
  report_has_logs_ = false;
  if (worker_id_.empty()) {
    auto* reg = req.mutable_register_worker();
    reg->set_node_name(options_.node_name);
    reg->set_incarnation(options_.incarnation);
    reg->set_address(options_.address);
    reg->set_replica_endpoint(options_.replica_endpoint);
    *reg->mutable_probe() = options_.probe;
    for (auto& r : ranks_->Reports()) *reg->add_ranks() = std::move(r);
    return req;
  }
  auto* hb = req.mutable_heartbeat();
  hb->set_worker_id(worker_id_);
  for (auto& r : ranks_->Reports()) *hb->add_ranks() = std::move(r);
  if (failures_ == 0) {
    for (auto& c : ranks_->CollectLogs(options_.max_log_bytes_per_heartbeat)) {
      *hb->add_logs() = std::move(c);
    }
    report_has_logs_ = true;
  }
  for (const auto& [key, queue] : unsent_steps_) {
    for (const auto& s : queue) *hb->add_steps() = s;
  }
  for (const auto& f : flights_) *hb->add_flights() = f;
  for (const auto& t : traces_) *hb->add_traces() = t;
  if (auto e = clock_sync_.Estimate()) *hb->mutable_clock() = *e;
  hb->set_last_rtt_us(last_rtt_us_);
  if (options_.mem_notices) {
    for (auto& n : options_.mem_notices()) *hb->add_mem_notices() = std::move(n);
  }
  return req;
}

void WorkerAgent::OnReply(const control::Reply& reply, int64_t now) {
  if (failures_ > 0) {
    logger_->warn(
        "coordinator at {} answers again after {} ms and {} failed call(s)",
        options_.coordinator, now - last_ok_ms_, failures_);
  }
  failures_ = 0;
  last_ok_ms_ = now;
  stopped_for_grace_ = false;
  if (reply.has_register_worker()) {
    OnRegistered(reply.register_worker(), now);
    return;
  }
  const auto& hb = reply.heartbeat();
  if (hb.reregister()) {
    logger_->warn("coordinator at {} does not know {}; re-registering",
                  options_.coordinator, worker_id_);
    worker_id_.clear();
    next_report_ms_ = now;
    return;
  }
  const int64_t received_us = clock_->NowUs();
  last_rtt_us_ = std::max<int64_t>(0, received_us - call_sent_us_);
  clock_sync_.Add(call_sent_us_, hb.coordinator_unix_us(), received_us,
                  hb.coordinator_recv_unix_us());
  if (report_has_logs_) ranks_->CommitLogs();
  unsent_steps_.clear();
  flights_.clear();
  traces_.clear();
  DumpForDiagnosis(hb, now);
  ReadTraces(hb);
  if (hb.grace_ms() > 0) stop_grace_ms_ = hb.grace_ms();
  for (const auto& key : hb.stop()) ranks_->Stop(key, hb.grace_ms());
  for (const auto& order : hb.launch()) ranks_->Launch(order);
  for (const auto& order : hb.replace()) ranks_->Replace(order);
  // Telemetry of ranks no longer held is not re-sent.
  std::set<std::string> held;
  for (const auto& r : ranks_->Reports()) held.insert(r.job_id());
  std::erase_if(latest_steps_,
                [&](const auto& kv) { return !held.contains(kv.first.first); });
  // Busy (ranks running) or a job's hot spare (orders must reach it fast):
  // the busy rate.
  next_report_ms_ = now + (ranks_->running() > 0 || hb.spare()
                               ? std::min(interval_ms_, options_.busy_report_ms)
                               : interval_ms_);
  if (!flights_.empty() || !traces_.empty()) next_report_ms_ = now;
}

void WorkerAgent::OnRegistered(const control::RegisterWorkerReply& r,
                               int64_t now) {
  worker_id_ = r.worker_id();
  if (r.heartbeat_interval_ms() > 0) interval_ms_ = r.heartbeat_interval_ms();
  logger_->info("registered with {} as {} (heartbeat {} ms)",
                options_.coordinator, worker_id_, interval_ms_);
  // The coordinator may be new: tell it how far each rank got.
  unsent_steps_.clear();
  for (const auto& [key, s] : latest_steps_) unsent_steps_[key].push_back(s);
  next_report_ms_ = now;  // fetch orders now
}

void WorkerAgent::DumpForDiagnosis(const control::HeartbeatReply& hb,
                                   int64_t now) {
  // A hang diagnosis: the flight recorders and stacks of this node's ranks
  // of the attempt, sent with the heartbeat after the stacks are in. The
  // coordinator repeats the order until every worker answered: an attempt
  // answered in the last kRediagnoseMs is not dumped again.
  std::erase_if(diagnosed_, [&](const auto& kv) {
    return now - kv.second >= kRediagnoseMs;
  });
  for (const auto& key : hb.diagnose()) {
    if (diagnosed_.contains(key)) continue;
    diagnosed_[key] = now;
    for (const auto& r : ranks_->Reports()) {
      if (control::AttemptKey(r.job_id(), r.attempt()) != key || r.pid() <= 0)
        continue;
      const int id = next_dump_id_++;
      dumping_[id] = ReadRankFlight(r.job_id(), r.attempt(), r.rank(), r.pid());
      if (auto text = stacks_.Start(id, r.pid(), now)) AddStack(id, *text);
    }
  }
}

void WorkerAgent::ReadTraces(const control::HeartbeatReply& hb) {
  // A trace: every operation the flight recorders of this node's ranks of
  // the attempt hold, read once per collection.
  if (!traced_.empty()) {  // forget attempts no longer held
    std::set<std::string> attempts;
    for (const auto& r : ranks_->Reports()) {
      attempts.insert(control::AttemptKey(r.job_id(), r.attempt()));
    }
    std::erase_if(traced_,
                  [&](const auto& kv) { return !attempts.contains(kv.first); });
  }
  for (const auto& order : hb.trace()) {
    auto [last, fresh] =
        traced_.try_emplace(order.attempt(), order.collection());
    if (!fresh && last->second == order.collection()) continue;
    last->second = order.collection();
    for (const auto& r : ranks_->Reports()) {
      if (control::AttemptKey(r.job_id(), r.attempt()) != order.attempt() ||
          r.pid() <= 0)
        continue;
      traces_.push_back(
          ReadRankTrace(r.job_id(), r.attempt(), r.rank(), r.pid()));
      traces_.back().set_collection(order.collection());
    }
  }
  // The heartbeat must stay inside a control frame: each rank keeps its
  // newest records of an equal share.
  if (!traces_.empty()) {
    const int share = kMaxTraceOps / static_cast<int>(traces_.size());
    for (auto& t : traces_) {
      if (t.ops_size() > share) {
        t.mutable_ops()->DeleteSubrange(0, t.ops_size() - share);
      }
    }
  }
}

Status WorkerAgent::OnFailure(const Status& status, int64_t now) {
  ++failures_;
  if (worker_id_.empty() && absl::IsInvalidArgument(status)) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordinator at ", options_.coordinator,
                     " rejected the registration of ", options_.node_name, ": ",
                     status.message()));
  }
  const int64_t silent_ms = now - last_ok_ms_;
  if (silent_ms > options_.coordinator_grace_ms) StopRanksAfterGrace(silent_ms);
  // retry_initial_ms x 2^(failures - 1), at most the heartbeat interval,
  // minus a random part.
  int64_t delay = options_.retry_initial_ms;
  for (int i = 1; i < failures_ && delay < interval_ms_; ++i) delay *= 2;
  delay = std::min(delay, interval_ms_);
  if (options_.retry_jitter > 0) {
    std::uniform_real_distribution<double> cut(0, options_.retry_jitter);
    delay -= static_cast<int64_t>(static_cast<double>(delay) * cut(jitter_));
  }
  delay = std::max<int64_t>(delay, 1);
  next_report_ms_ = now + delay;
  limiter_.Warn(
      options_.coordinator, "unreachable",
      "coordinator at {} unreachable for {} ms ({} failed call(s): "
      "{}); retrying in {} ms; ranks kept for {} ms more",
      options_.coordinator, silent_ms, failures_, std::string(status.message()),
      delay, std::max<int64_t>(0, options_.coordinator_grace_ms - silent_ms));
  return absl::OkStatus();
}

void WorkerAgent::StopRanksAfterGrace(int64_t silent_ms) {
  if (stopped_for_grace_) return;
  stopped_for_grace_ = true;
  std::set<std::string> attempts;
  for (const auto& r : ranks_->Reports()) {
    attempts.insert(absl::StrCat(r.job_id(), "/", r.attempt()));
  }
  if (attempts.empty()) return;
  logger_->error(
      "no answer from the coordinator at {} for {} ms (grace {} ms, "
      "--coordinator-grace-ms): stopping {} running rank(s) of attempt(s) "
      "{}; this worker keeps retrying and will take new work when it answers",
      options_.coordinator, silent_ms, options_.coordinator_grace_ms,
      ranks_->running(), absl::StrJoin(attempts, ", "));
  for (const auto& key : attempts) ranks_->Stop(key, stop_grace_ms_);
}

}  // namespace strata::worker
