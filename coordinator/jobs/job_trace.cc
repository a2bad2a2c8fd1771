// JobManager's part of `strata trace` (docs/observe.md "Traces"): the step
// reports of the running attempt kept for traces, the collection of the
// ranks' flight recorders (asked of the workers in heartbeat replies) and
// the reply the CLI turns into a Perfetto trace.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "control/codec.h"
#include "coordinator/jobs/job_manager.h"

namespace strata::coordinator {

using control::AttemptKey;

namespace {

// Step reports kept per attempt for traces (~150 bytes each): at most
// kTraceKeptSteps over all ranks, at least kTraceMinSteps per rank.
constexpr int64_t kTraceKeptSteps = 64 << 10;
constexpr int64_t kTraceMinSteps = 16;
// A collection older than this is started afresh by the next request; the
// CLI gives up waiting well before (cli/trace_command.cc).
constexpr int64_t kTraceCollectMs = 10000;
// A reply stays well inside the 4 MiB control frame (control/codec.h): a
// step report with its sections is ~170 bytes, a record ~45.
constexpr int kReplySteps = 8000;
constexpr int kReplyOps = 30000;

}  // namespace

bool JobManager::Watched::Collecting(int64_t now) const {
  return trace_since_ms >= 0 && now - trace_since_ms < kTraceCollectMs;
}

void JobManager::KeepForTrace(const control::JobInfo& job, Watched& w,
                              const control::StepReport& s) {
  auto& kept = w.trace_steps[s.rank()];
  control::StepReport& r = kept.emplace_back(s);
  r.clear_links();
  const size_t cap = static_cast<size_t>(std::max<int64_t>(
      kTraceMinSteps,
      kTraceKeptSteps / std::max<int64_t>(1, job.ranks_size())));
  while (kept.size() > cap) kept.pop_front();
}

void JobManager::AddTraceOrders(const std::string& worker_id,
                                control::HeartbeatReply* orders) {
  const int64_t now = clock_->SteadyNowMs();
  for (auto& [id, w] : watched_) {
    if (!w.Collecting(now)) continue;
    auto job = jobs_.find(id);
    if (job == jobs_.end() || job->second.state() != control::RUNNING) continue;
    const AttemptIndex& index = Index(job->second);
    auto node = index.node_of_worker.find(worker_id);
    if (node == index.node_of_worker.end()) continue;
    for (int r : index.ranks_of_node[node->second]) {
      if (!w.traces.contains(r)) {
        control::TraceOrder* order = orders->add_trace();
        order->set_attempt(AttemptKey(id, w.attempt));
        order->set_collection(w.trace_collection);
        break;
      }
    }
  }
}

void JobManager::OnTraces(
    const google::protobuf::RepeatedPtrField<control::RankTrace>& traces) {
  const int64_t now = clock_->SteadyNowMs();
  for (const auto& t : traces) {
    auto w = watched_.find(t.job_id());
    if (w == watched_.end() || !w->second.Collecting(now) ||
        w->second.attempt != t.attempt() ||
        w->second.trace_collection != t.collection()) {
      continue;  // not for the collection under way (an earlier one's
                 // records may end before the steps now asked for)
    }
    w->second.traces[t.rank()] = t;
  }
}

StatusOr<control::TraceReply> JobManager::Trace(
    const control::TraceRequest& request, const WorkerRegistry& registry) {
  const std::string& job_id = request.job_id();
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  }
  int64_t first = request.first_step(), last = request.last_step();
  if (first < 0 || last < 0 || (last > 0 && first > last) ||
      request.newest_steps() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad step range ", first, ":", last, " (newest ",
                     request.newest_steps(), ")"));
  }
  const control::JobInfo& job = it->second;
  if (job.state() != control::RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " is ", control::JobState_Name(job.state()),
        ": traces come from the ranks of a running attempt"));
  }
  Watched& w = WatchedOf(job);
  if (first == 0 && last == 0 && request.newest_steps() > 0) {
    // Pinned to the steps reported now: the records, read later, hold them.
    int64_t newest = 0;
    for (const auto& [rank, kept] : w.trace_steps) {
      if (!kept.empty()) newest = std::max(newest, kept.back().step());
    }
    first = std::max<int64_t>(1, newest - request.newest_steps() + 1);
    last = newest;  // 0 while none is reported: up to the newest
  }
  // A new request needs records read after it: one collected for an
  // earlier request may end before the steps it asks for (a job at 5 ms a
  // step passes 2,000 steps in the collection window). A poll is served by
  // its own collection or a newer one, while it runs.
  const int64_t now = clock_->SteadyNowMs();
  if (request.collection() == 0 || request.collection() > w.trace_collection ||
      !w.Collecting(now)) {
    ++w.trace_collection;
    w.trace_since_ms = now;
    w.traces.clear();
  }
  control::TraceReply out;
  out.set_job_id(job_id);
  out.set_attempt(w.attempt);
  out.set_collection(w.trace_collection);
  out.set_first_step(first);
  out.set_last_step(last);
  for (const auto& r : job.plan().placement().ranks()) {
    control::TraceRankInfo* info = out.add_ranks();
    info->set_rank(r.rank());
    if (r.node() < 0 || r.node() >= job.node_info_size()) continue;
    const auto& node = job.node_info(r.node());
    info->set_node(node.node_name());
    const control::WorkerInfo* worker = registry.Find(node.worker_id());
    if (worker != nullptr && worker->has_clock()) {
      *info->mutable_clock() = worker->clock();
    }
  }
  // Per rank: its steps in range, and the time they cover on its node's
  // clock, which bounds its records (the newest go in when over the caps).
  std::map<int, std::pair<int64_t, int64_t>> window_us;
  std::vector<const control::StepReport*> steps;
  for (const auto& [rank, kept] : w.trace_steps) {
    for (const auto& s : kept) {
      if (s.step() < first || (last > 0 && s.step() > last)) continue;
      steps.push_back(&s);
      const int64_t end = s.unix_ms() * 1000;
      const int64_t begin = end - static_cast<int64_t>(s.step_seconds() * 1e6);
      auto [wi, fresh] = window_us.try_emplace(rank, begin, end);
      wi->second.first = std::min(wi->second.first, begin);
      wi->second.second = std::max(wi->second.second, end);
    }
  }
  std::stable_sort(steps.begin(), steps.end(), [](auto* a, auto* b) {
    return a->step() > b->step();  // newest first, for the cap
  });
  if (steps.size() > static_cast<size_t>(kReplySteps)) {
    out.set_dropped_steps(static_cast<int64_t>(steps.size()) - kReplySteps);
    steps.resize(kReplySteps);
  }
  std::stable_sort(steps.begin(), steps.end(), [](auto* a, auto* b) {
    return a->rank() != b->rank() ? a->rank() < b->rank()
                                  : a->step() < b->step();
  });
  for (const auto* s : steps) *out.add_steps() = *s;

  const bool ranged = first > 0 || last > 0;
  std::vector<std::pair<int, const control::CollectiveRecord*>> ops;
  for (const auto& [rank, t] : w.traces) {
    auto wi = window_us.find(rank);
    for (const auto& op : t.ops()) {
      if (ranged) {
        if (wi == window_us.end() || op.entered_us() < wi->second.first)
          continue;
        if (last > 0 && op.entered_us() > wi->second.second) continue;
      }
      ops.emplace_back(rank, &op);
    }
  }
  if (ops.size() > static_cast<size_t>(kReplyOps)) {
    std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
      return a.second->entered_us() > b.second->entered_us();
    });
    out.set_dropped_ops(static_cast<int64_t>(ops.size()) - kReplyOps);
    ops.resize(kReplyOps);
  }
  std::map<int, control::RankTrace*> by_rank;
  for (const auto& [rank, t] : w.traces) {
    control::RankTrace* copy = out.add_collectives();
    copy->set_job_id(t.job_id());
    copy->set_attempt(t.attempt());
    copy->set_rank(rank);
    copy->set_error(t.error());
    by_rank[rank] = copy;
  }
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
    return a.second->entered_us() < b.second->entered_us();
  });
  for (const auto& [rank, op] : ops) *by_rank[rank]->add_ops() = *op;

  for (int r = 0; r < job.ranks_size(); ++r) {
    if (!w.traces.contains(r)) out.add_pending(r);
  }
  auto events = events_->List(job_id, 0);
  if (events.ok()) {
    for (auto& e : *events->mutable_events()) {
      if (e.attempt() == w.attempt) *out.add_events() = std::move(e);
    }
  }
  return out;
}

std::vector<control::StepReport> JobManager::Curve(
    const std::string& job_id) const {
  auto w = watched_.find(job_id);
  if (w == watched_.end() || w->second.trace_steps.empty()) return {};
  const auto& kept = w->second.trace_steps;
  const std::deque<control::StepReport>* pick = &kept.begin()->second;
  for (const auto& [rank, steps] : kept) {
    if (!steps.empty() && steps.back().loss() == steps.back().loss()) {
      pick = &steps;  // not NaN: this rank computes the loss
      break;
    }
  }
  return {pick->begin(), pick->end()};
}

}  // namespace strata::coordinator
