// The coordinator's Prometheus exposition (`/metrics`, docs/observe.md):
// rendered on the event loop from what the coordinator already answers to
// `strata jobs` and `strata workers`, so the numbers match the CLI's. Pure.
//
// Series (base units, `_total` counters, bounded cardinality: per-rank
// series for at most `max_rank_series` ranks of a job, else the slowest
// that many):
//   strata_jobs{state}                      jobs per state
//   strata_job_state{job,state}             1 for the job's current state
//   strata_job_step{job}                    newest step any rank reported
//   strata_job_tokens_per_second{job}       global tokens / slowest rank's
//                                           step time
//   strata_job_step_seconds{job}            slowest rank's latest step time
//   strata_job_mfu_ratio{job}               the plan's MFU scaled by
//                                           predicted / measured step time
//   strata_job_restarts_total{job}
//   strata_job_checkpoint_stall_seconds_total{job}
//   strata_job_goodput_ratio{job}           productive / wall time
//   strata_job_lost_seconds{job,cause}      observe/goodput.h causes
//   strata_rank_step_seconds{job,rank}
//   strata_job_step_duration_seconds{job}   histogram, rank 0's steps
//   strata_heartbeat_round_trip_seconds     histogram, as workers measured
//   strata_workers{state}                   alive / lost
//   strata_worker_heartbeat_age_seconds{worker}
//   strata_coordinator_state_writable       1 or 0
//   strata_coordinator_refused_changes_total
//   strata_control_rejected_total{reason}   from `rejected` (ZAP, codec, ...)
//   strata_coordinator_loop_step_seconds{clock}
//                                           histogram: how long each request
//                                           or tick held the event loop, in
//                                           wall and thread CPU time
//                                           (server/loop_stats.h)
//   strata_coordinator_render_cpu_seconds_total{what}
//                                           CPU spent making /metrics, the
//                                           dashboard JSON and traces
//                                           (observability's own cost)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "observe/metrics.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

struct MetricsInput {
  control::JobsReply jobs;                  // with each job's latest steps
  control::ListWorkersReply workers;        // with the coordinator's health
  std::map<std::string, int64_t> rejected;  // reason -> count
  // what (metrics, dashboard, trace) -> thread CPU seconds rendering it.
  std::map<std::string, double> render_cpu_seconds;
  int64_t now_unix_ms = 0;
  int max_rank_series = 64;
  // Histograms the owners keep (observe::SecondsBuckets()): rank 0's step
  // times per job, heartbeat round trips as the workers measured them.
  std::map<std::string, observe::HistogramCounts> step_seconds;
  observe::HistogramCounts heartbeat_rtt;
  // Event-loop steps (server/loop_stats.h): bucket bounds in seconds, and
  // the steps' wall and CPU times; no series while `buckets` is empty.
  struct LoopSteps {
    std::vector<double> buckets;
    observe::HistogramCounts wall, cpu;
  } loop_steps;
};

// The text exposition (format 0.0.4).
std::string RenderMetrics(const MetricsInput& in);

}  // namespace strata::coordinator
