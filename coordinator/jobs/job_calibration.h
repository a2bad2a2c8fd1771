// Self-calibration of the planner's compute model (docs/planner.md
// "Calibration"): the stored compute scale of a kind of device, read when an
// attempt is planned, and updated from the plan checks of the jobs running
// on such devices. Keyed by device (attempt_plan.h CalibrationKey) in the
// StateStore, so it outlives jobs and coordinator restarts; the scale each
// job's current plan used is JobRuntime::planned_scale. Event-loop thread
// only.
#pragma once

#include <string>

#include "coordinator/jobs/event_log.h"
#include "coordinator/jobs/job_runtime.h"
#include "coordinator/state/state_store.h"

namespace strata::coordinator {

class Calibrator {
 public:
  // Both must outlive the calibrator.
  Calibrator(StateStore* store, EventLog* events)
      : store_(store), events_(events) {}

  // The stored compute scale under `key`; 1 when none (or unreadable).
  double StoredScale(const std::string& key);
  // A plan check found the job's stages computing `measured_over_predicted`
  // times the planned time: stores the devices' new scale when it moved by
  // more than 2% and records a "calibrated" event.
  void Calibrate(const JobRuntime& rt, double measured_over_predicted);

 private:
  StateStore* store_;
  EventLog* events_;
};

}  // namespace strata::coordinator
