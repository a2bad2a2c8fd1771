// The dashboard's "download trace" (`/api/trace.json?job=ID`): the HTTP
// thread asks, the event loop makes the trace the way `strata trace` does
// (JobManager::Trace: kept steps, the ranks' flight recorders asked of their
// workers, clocks aligned) and hands the text back. The loop answers once
// every rank's records are in, or kCollectMs after the request with what
// arrived. Thread-safe: Get() on HTTP threads, Serve() on the loop.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/registry/worker_registry.h"

namespace strata::coordinator {

class TraceDownload {
 public:
  static constexpr int64_t kCollectMs = 4000;  // < the HTTP wait below
  static constexpr int64_t kWaitMs = 8000;
  static constexpr int kSteps = 100;

  explicit TraceDownload(const Clock* clock) : clock_(clock) {}

  // HTTP thread: the trace JSON of `job`, or the reason there is none
  // (NotFound, FailedPrecondition, DeadlineExceeded if the loop is stuck).
  StatusOr<std::string> Get(const std::string& job);
  // Loop: works on the pending requests.
  void Serve(JobManager& jobs, const WorkerRegistry& registry);

 private:
  const Clock* clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  // Requests share a ticket: the steady ms the first of them asked. A
  // reader takes the newest trace made for its ticket or a later one.
  std::map<std::string, int64_t> wanted_;  // job -> ticket
  struct Made {
    int64_t ticket;
    StatusOr<std::string> text;
  };
  std::map<std::string, Made> done_;  // job -> the newest
  // Serve() only: the request being polled per job (its collection and
  // pinned steps after the first reply).
  std::map<std::string, control::TraceRequest> polls_;
};

}  // namespace strata::coordinator
