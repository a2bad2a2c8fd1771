#include "coordinator/jobs/job_calibration.h"

#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/jobs/attempt_plan.h"

namespace strata::coordinator {

double Calibrator::StoredScale(const std::string& key) {
  auto stored = store_->Get(key);
  double scale = 1.0;
  if (!stored.ok() || !absl::SimpleAtod(*stored, &scale) || !(scale > 0)) {
    return 1.0;
  }
  return scale;
}

// The plan assumed the devices at the stored scale it used, so the devices'
// scale is that times `ratio`; it is stored (for the next plan on such
// devices) when it moved by more than 2%, the noise of a median of
// plan-check windows (docs/fault.md).
void Calibrator::Calibrate(const JobRuntime& rt, double ratio) {
  const control::JobInfo& job = rt.info;
  if (!(ratio > 0) || job.node_info_size() == 0) return;
  const double scale = rt.planned_scale * ratio;
  std::vector<control::WorkerInfo> nodes(job.node_info().begin(),
                                         job.node_info().end());
  const std::string key = CalibrationKey(nodes);
  const double stored = StoredScale(key);
  if (std::abs(scale / stored - 1) <= 0.02) return;
  if (!store_->Put(key, absl::StrCat(scale)).ok()) return;
  events_->Record(job.job_id(), job.attempt(), "calibrated",
                  absl::StrFormat("%s: stages compute %.2fx the plan; devices "
                                  "now at compute x%.3f (was x%.3f)",
                                  key, ratio, scale, stored));
}

}  // namespace strata::coordinator
