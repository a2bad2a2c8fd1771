// Fault handling of running jobs (docs/fault.md): a JobMonitor per running
// attempt (JobRuntime::fault) fed by every step report; findings stored as
// events and acted on as coordinator/fault/decide.h decides; a hang
// diagnosed from the ranks' flight recorders (asked of the workers in
// heartbeat replies, waited for at most kDiagnoseWaitMs) before the attempt
// is restarted. Holds no per-job state of its own; changes a job only
// through JobActions. Event-loop thread only.
#pragma once

#include <string>

#include "common/clock.h"
#include "common/logging.h"
#include "coordinator/fault/decide.h"
#include "coordinator/jobs/event_log.h"
#include "coordinator/jobs/job_calibration.h"
#include "coordinator/jobs/job_table.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

// What the fault handler may do to a job (JobManager implements it).
class JobActions {
 public:
  virtual ~JobActions() = default;
  // Stores `next` as the job's record, then applies it; the store's error
  // (job unchanged) otherwise.
  virtual Status Commit(JobRuntime& rt, control::JobInfo next) = 0;
  // Ends the running attempt: a restart while restarts are left, else the
  // job fails.
  virtual Status FailAttempt(JobRuntime& rt, const std::string& reason) = 0;
  // Replaces rank `rank` alone, the others kept (docs/fault.md "In-place
  // restart"), when the attempt allows it; false (nothing done) otherwise,
  // and the caller restarts the attempt as usual.
  virtual bool RestartInPlace(JobRuntime& rt, int rank,
                              const std::string& cause) {
    (void)rt, (void)rank, (void)cause;
    return false;
  }
};

class FaultHandler {
 public:
  // How long a hang diagnosis waits for the workers' flight recorders: a
  // few heartbeats (500 ms by default).
  static constexpr int64_t kDiagnoseWaitMs = 5000;

  // All must outlive the handler.
  FaultHandler(const Clock* clock, EventLog* events, Calibrator* calibrator,
               JobActions* actions)
      : clock_(clock),
        events_(events),
        calibrator_(calibrator),
        actions_(actions),
        logger_(GetLogger("CTRL")) {}

  // A step report of the running attempt: records the restart's cost at
  // the attempt's first step, feeds the detectors, acts on their findings.
  void OnStep(JobRuntime& rt, const control::StepReport& s);
  // A phase report (work outside the step loop, docs/fault.md "Phases"):
  // the hang detector's deadline for it.
  void OnPhase(JobRuntime& rt, const control::StepReport& s) {
    WatchOf(rt).monitor->OnPhase(s);
  }
  // Periodic: starts a hang diagnosis, or concludes one once every rank's
  // flight recorder came or the wait ran out.
  void Tick(JobRuntime& rt);
  // Diagnose orders for `worker_id` (running jobs diagnosing a hang with
  // ranks on it), and the flight recorders they bring back.
  void AddDiagnoseOrders(JobTable& table, const std::string& worker_id,
                         control::HeartbeatReply* orders);
  void OnFlights(JobTable& table,
                 const google::protobuf::RepeatedPtrField<control::RankFlight>& f);
  // The monitor's view of the job (null: it ended, nothing to show).
  static control::DiagnoseReply Diagnose(const JobRuntime* rt,
                                         const control::DiagnoseRequest& r);
  // The detectors start over (a changed policy's thresholds).
  static void Reset(JobRuntime& rt) { rt.fault = FaultWatch(); }

 private:
  FaultWatch& WatchOf(JobRuntime& rt);
  // Whether the hang diagnosis under way has what it waits for (every
  // rank's flight recorder, one stopped rank of an in-place attempt, or
  // kDiagnoseWaitMs passed).
  static bool DiagnosisDone(const JobRuntime& rt, const FaultWatch& w,
                            int64_t now);
  void ConcludeHang(JobRuntime& rt, FaultWatch& w);
  // Stores finding `e` as an event and acts on it as DecideFault says.
  void ActOn(JobRuntime& rt, const fault::FaultEvent& e,
             const FaultAssessment& assessed);
  void Apply(JobRuntime& rt, const FaultDecision& d);
  FaultCosts CostsOf(JobRuntime& rt);
  StatusOr<ReplanPrediction> PredictReplan(const JobRuntime& rt,
                                           const std::string& node,
                                           double speed) const;

  const Clock* clock_;
  EventLog* events_;
  Calibrator* calibrator_;
  JobActions* actions_;
  Logger logger_;
};

}  // namespace strata::coordinator
