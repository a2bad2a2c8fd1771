// `strata trace` and the dashboard's curves (docs/observe.md "Traces"): the
// step reports of the running attempt kept per rank (JobRuntime::trace), the
// collection of the ranks' collective records (asked of the workers in
// heartbeat replies) and the reply the CLI turns into a Perfetto trace.
// Holds no per-job state of its own. Event-loop thread only.
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "coordinator/jobs/event_log.h"
#include "coordinator/jobs/job_table.h"
#include "coordinator/registry/worker_registry.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

class TraceCollector {
 public:
  // Both must outlive the collector.
  TraceCollector(const Clock* clock, EventLog* events)
      : clock_(clock), events_(events) {}

  // Keeps step report `s` of the running attempt (links dropped): at most
  // kKeptSteps over all ranks, at least kMinSteps per rank.
  static constexpr int64_t kKeptSteps = 64 << 10;
  static constexpr int64_t kMinSteps = 16;
  void Keep(JobRuntime& rt, const control::StepReport& s);

  // Trace orders for `worker_id`: one per running job whose collection is
  // under way and still misses a rank placed on that worker.
  void AddOrders(JobTable& table, const std::string& worker_id,
                 control::HeartbeatReply* orders);
  // Records a worker read for the collection under way; others are dropped.
  void OnTraces(JobTable& table,
                const google::protobuf::RepeatedPtrField<control::RankTrace>& t);

  // The reply for a running job (JobManager::Trace); the range was checked.
  control::TraceReply Reply(JobRuntime& rt, const control::TraceRequest& request,
                            const WorkerRegistry& registry);
  // The kept step reports of one rank, by step: the lowest rank that
  // reports a loss (pipeline: the last stage), else the lowest rank.
  static std::vector<control::StepReport> Curve(const JobRuntime& rt);

 private:
  // The attempt's buffer, reset when the attempt changed.
  static TraceBuffer& BufferOf(JobRuntime& rt);
  bool Collecting(const TraceBuffer& b) const;
  // The step range a request asks for (newest_steps pinned to the steps
  // reported now).
  static std::pair<int64_t, int64_t> Range(const TraceBuffer& b,
                                           const control::TraceRequest& r);

  const Clock* clock_;
  EventLog* events_;
};

}  // namespace strata::coordinator
