#include "coordinator/jobs/job_trace.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "control/codec.h"

namespace strata::coordinator {

using control::AttemptKey;

namespace {

// A collection older than this is started afresh by the next request; the
// CLI gives up waiting well before (cli/trace_command.cc).
constexpr int64_t kTraceCollectMs = 10000;
// A reply stays well inside the 4 MiB control frame (control/codec.h): a
// step report with its sections is ~170 bytes, a record ~45.
constexpr int kReplySteps = 8000;
constexpr int kReplyOps = 30000;

// Per rank, the time its steps in range cover on its node's clock (us):
// what bounds its records.
using Windows = std::map<int, std::pair<int64_t, int64_t>>;

// The steps in [first, last] (last 0: all), the newest kReplySteps when
// over the cap, by rank and step; their windows.
Windows AddSteps(const TraceBuffer& b, int64_t first, int64_t last,
                 control::TraceReply* out) {
  Windows window_us;
  std::vector<const control::StepReport*> steps;
  for (const auto& [rank, kept] : b.steps) {
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
    out->set_dropped_steps(static_cast<int64_t>(steps.size()) - kReplySteps);
    steps.resize(kReplySteps);
  }
  std::stable_sort(steps.begin(), steps.end(), [](auto* a, auto* b) {
    return a->rank() != b->rank() ? a->rank() < b->rank()
                                  : a->step() < b->step();
  });
  for (const auto* s : steps) *out->add_steps() = *s;
  return window_us;
}

// Every rank's collective records within its steps' window (all of them
// when no range was asked), the newest kReplyOps when over the cap, in
// time order.
void AddCollectives(const TraceBuffer& b, const Windows& window_us,
                    bool ranged, int64_t last, control::TraceReply* out) {
  std::vector<std::pair<int, const control::CollectiveRecord*>> ops;
  for (const auto& [rank, t] : b.traces) {
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
    out->set_dropped_ops(static_cast<int64_t>(ops.size()) - kReplyOps);
    ops.resize(kReplyOps);
  }
  std::map<int, control::RankTrace*> by_rank;
  for (const auto& [rank, t] : b.traces) {
    control::RankTrace* copy = out->add_collectives();
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
}

// Each rank's node and its worker's clock estimate.
void AddRanks(const control::JobInfo& job, const WorkerRegistry& registry,
              control::TraceReply* out) {
  for (const auto& r : job.plan().placement().ranks()) {
    control::TraceRankInfo* info = out->add_ranks();
    info->set_rank(r.rank());
    if (r.node() < 0 || r.node() >= job.node_info_size()) continue;
    const auto& node = job.node_info(r.node());
    info->set_node(node.node_name());
    const control::WorkerInfo* worker = registry.Find(node.worker_id());
    if (worker != nullptr && worker->has_clock()) {
      *info->mutable_clock() = worker->clock();
    }
  }
}

}  // namespace

TraceBuffer& TraceCollector::BufferOf(JobRuntime& rt) {
  if (rt.trace.attempt != rt.info.attempt()) {
    rt.trace = TraceBuffer();
    rt.trace.attempt = rt.info.attempt();
  }
  return rt.trace;
}

bool TraceCollector::Collecting(const TraceBuffer& b) const {
  return b.since_ms >= 0 && clock_->SteadyNowMs() - b.since_ms < kTraceCollectMs;
}

void TraceCollector::Keep(JobRuntime& rt, const control::StepReport& s) {
  auto& kept = BufferOf(rt).steps[s.rank()];
  control::StepReport& r = kept.emplace_back(s);
  r.clear_links();
  const size_t cap = static_cast<size_t>(std::max<int64_t>(
      kMinSteps, kKeptSteps / std::max<int64_t>(1, rt.info.ranks_size())));
  while (kept.size() > cap) kept.pop_front();
}

void TraceCollector::AddOrders(JobTable& table, const std::string& worker_id,
                               control::HeartbeatReply* orders) {
  for (auto& [id, rt] : table.active()) {
    const TraceBuffer& b = rt.trace;
    if (!Collecting(b) || rt.info.state() != control::RUNNING) continue;
    const std::vector<int>* ranks = RanksOn(rt, worker_id);
    if (ranks == nullptr) continue;
    for (int r : *ranks) {
      if (!b.traces.contains(r)) {
        control::TraceOrder* order = orders->add_trace();
        order->set_attempt(AttemptKey(id, b.attempt));
        order->set_collection(b.collection);
        break;
      }
    }
  }
}

void TraceCollector::OnTraces(
    JobTable& table,
    const google::protobuf::RepeatedPtrField<control::RankTrace>& traces) {
  for (const auto& t : traces) {
    JobRuntime* rt = table.FindActive(t.job_id());
    if (rt == nullptr) continue;
    TraceBuffer& b = rt->trace;
    if (!Collecting(b) || b.attempt != t.attempt() ||
        b.collection != t.collection()) {
      continue;  // not for the collection under way (an earlier one's
                 // records may end before the steps now asked for)
    }
    b.traces[t.rank()] = t;
  }
}

std::pair<int64_t, int64_t> TraceCollector::Range(
    const TraceBuffer& b, const control::TraceRequest& request) {
  int64_t first = request.first_step(), last = request.last_step();
  if (first == 0 && last == 0 && request.newest_steps() > 0) {
    // Pinned to the steps reported now: the records, read later, hold them.
    int64_t newest = 0;
    for (const auto& [rank, kept] : b.steps) {
      if (!kept.empty()) newest = std::max(newest, kept.back().step());
    }
    first = std::max<int64_t>(1, newest - request.newest_steps() + 1);
    last = newest;  // 0 while none is reported: up to the newest
  }
  return {first, last};
}

control::TraceReply TraceCollector::Reply(JobRuntime& rt,
                                          const control::TraceRequest& request,
                                          const WorkerRegistry& registry) {
  TraceBuffer& b = BufferOf(rt);
  const auto [first, last] = Range(b, request);
  // A new request needs records read after it: one collected for an
  // earlier request may end before the steps it asks for (a job at 5 ms a
  // step passes 2,000 steps in the collection window). A poll is served by
  // its own collection or a newer one, while it runs.
  if (request.collection() == 0 || request.collection() > b.collection ||
      !Collecting(b)) {
    ++b.collection;
    b.since_ms = clock_->SteadyNowMs();
    b.traces.clear();
  }
  const control::JobInfo& job = rt.info;
  control::TraceReply out;
  out.set_job_id(job.job_id());
  out.set_attempt(b.attempt);
  out.set_collection(b.collection);
  out.set_first_step(first);
  out.set_last_step(last);
  AddRanks(job, registry, &out);
  const Windows windows = AddSteps(b, first, last, &out);
  AddCollectives(b, windows, first > 0 || last > 0, last, &out);
  for (int r = 0; r < job.ranks_size(); ++r) {
    if (!b.traces.contains(r)) out.add_pending(r);
  }
  auto events = events_->List(job.job_id(), 0);
  if (events.ok()) {
    for (auto& e : *events->mutable_events()) {
      if (e.attempt() == b.attempt) *out.add_events() = std::move(e);
    }
  }
  return out;
}

std::vector<control::StepReport> TraceCollector::Curve(const JobRuntime& rt) {
  const auto& kept = rt.trace.steps;
  if (kept.empty()) return {};
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
