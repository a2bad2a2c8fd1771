// Per-step telemetry of a rank (docs/architecture.md): section times, tokens
// and loss, sent as one control.StepReport per step over a ZeroMQ PUSH socket
// to the worker's $STRATA_TELEMETRY endpoint. Sending never blocks training: a
// full queue (worker gone or slow) drops the report. Without an endpoint
// the timer only keeps the last report. One thread.
#pragma once

#include <chrono>
#include <functional>
#include <utility>
#include <map>
#include <memory>
#include <string>

#include "proto/control.pb.h"

namespace strata {

class StepTimer {
 public:
  StepTimer(std::string endpoint, std::string job_id, int rank);
  ~StepTimer();

  // Adds `seconds` to section `name` of the current step.
  void Add(const std::string& name, double seconds);
  // RAII section: StepTimer::Scope s(timer, "forward");
  class Scope {
   public:
    Scope(StepTimer& t, std::string name);
    ~Scope();

   private:
    StepTimer& t_;
    std::string name_;
    std::chrono::steady_clock::time_point start_;
  };
  // Closes the step (its time runs from the previous EndStep or creation)
  // and sends the report. `loss` NaN when this rank has none. With a
  // collective time source, the step's sections also get "wait" and
  // "comm": the growth of its cumulative (wait, comm) seconds since the
  // previous step (comm::Backend::comm_time, summed over the rank's groups).
  void EndStep(int64_t step, int64_t tokens, double loss);
  // The run's last step, carried by every report from then on (progress
  // and the fault policy's remaining-time estimate; 0: unknown).
  void SetTotalSteps(int64_t total) { total_steps_ = total; }
  using CommSource = std::function<std::pair<double, double>()>;
  void SetCommSource(CommSource source);
  const control::StepReport& last() const { return last_; }
  uint64_t dropped() const { return dropped_; }

 private:
  struct Socket;
  std::unique_ptr<Socket> socket_;
  std::string job_id_;
  int rank_;
  std::map<std::string, double> sections_;
  CommSource comm_source_;
  std::pair<double, double> comm_seen_{0, 0};
  int64_t total_steps_ = 0;
  std::chrono::steady_clock::time_point step_start_;
  control::StepReport last_;
  uint64_t dropped_ = 0;
};

}  // namespace strata
