// Per-step telemetry of a rank (docs/architecture.md): section times, tokens
// and loss, sent as one control.StepReport per step over a ZeroMQ PUSH socket
// to the worker's $STRATA_TELEMETRY endpoint. The calling thread only builds
// the report and appends it to an in-memory outbox (an uncontended mutex, no
// system call, no wake-up of another thread): a sender thread wakes every
// kSendInterval on its own, serialises what the outbox holds and sends it,
// so nothing on the step path waits for ZeroMQ's I/O thread or the worker
// (on oversubscribed cores each such wake-up cost a torch rank 1.5-1.9 ms a
// step; docs/results.md "PyTorch"). Reports thus reach the worker up to
// kSendInterval late, in order. Sending never blocks training: a full
// socket queue (worker gone or slow) or an outbox past kMaxOutbox drops
// reports (counted by dropped()). Destruction sends what is left. Without
// an endpoint the timer only keeps the last report. The public methods run
// on one thread (the rank's training thread).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <utility>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "proto/control.pb.h"

namespace strata {

class StepTimer {
 public:
  // How long a report may wait in the outbox: well under every consumer's
  // resolution (the hang deadline and the straggler detector's confirm_s
  // are seconds; fault/straggler_detector.h).
  static constexpr std::chrono::milliseconds kSendInterval{100};
  // Reports the outbox holds at most (a sender starved for seconds); more
  // are dropped, as a full socket queue drops them.
  static constexpr size_t kMaxOutbox = 4096;

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
  // The newest committed checkpoint's step the rank knows (0: none),
  // carried by every report from then on (`strata status`).
  void SetCheckpointStep(int64_t step) { checkpoint_step_ = step; }
  // In-place restart (docs/fault.md "In-place restart"): every report from
  // then on says the rank opted in, and the generation of its groups.
  void SetInPlace(bool on, int generation) {
    in_place_ = on;
    generation_ = generation;
  }
  // Work outside the step loop (evaluation, saving, loading): the rank
  // tells the coordinator it entered phase `name`, whose hang deadline is
  // `deadline_seconds` (<= 0: the job policy's default), instead of the
  // step deadline. EndPhase (or the next EndStep) ends it; the next step's
  // time runs from the phase's end (unless `restart_step_clock` is false:
  // the phase was part of the step). One phase at a time: a second
  // BeginPhase replaces the first.
  void BeginPhase(const std::string& name, double deadline_seconds);
  void EndPhase(bool restart_step_clock = true);
  bool in_phase() const { return in_phase_; }
  using CommSource = std::function<std::pair<double, double>()>;
  void SetCommSource(CommSource source);
  // The rank's network connections, cumulative (comm::LinkCounter): each
  // report gets their growth since the previous one as StepReport.links,
  // per peer. The streams to a peer run in parallel (a large message is
  // striped over them), so the longest busy time is the peer's.
  struct Link {
    int peer = -1;
    int stream = 0;
    int64_t bytes = 0;
    int64_t busy_us = 0;
  };
  using LinkSource = std::function<std::vector<Link>()>;
  void SetLinkSource(LinkSource source) { link_source_ = std::move(source); }
  const control::StepReport& last() const { return last_; }
  // Reports dropped so far (outbox or socket queue full). Any thread.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  struct Sender;  // the socket, the outbox and the sender thread
  std::unique_ptr<Sender> sender_;
  std::string job_id_;
  int rank_;
  std::map<std::string, double> sections_;
  CommSource comm_source_;
  std::pair<double, double> comm_seen_{0, 0};
  LinkSource link_source_;
  std::map<std::pair<int, int>, std::pair<int64_t, int64_t>>
      links_seen_;  // (peer, stream) -> (bytes, busy_us)
  void AddLinks(control::StepReport& r);
  control::StepReport PhaseReport() const;
  // Appends `r` to the outbox (no system call).
  void Send(control::StepReport r);
  bool in_phase_ = false;
  int64_t total_steps_ = 0;
  int64_t checkpoint_step_ = 0;
  bool in_place_ = false;
  int generation_ = 0;
  std::chrono::steady_clock::time_point step_start_;
  control::StepReport last_;
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace strata
