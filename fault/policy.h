// A job's fault policy (proto FaultPolicy, the `fault:` section of a job
// file, `--fault key=value` of `strata submit`/`run`, and `strata fault set
// JOB key=value` on a running job): what the coordinator does per finding,
// and the detectors' options it implies. Pure.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/status.h"
#include "fault/hang_detector.h"
#include "fault/slow_link_detector.h"
#include "fault/straggler_detector.h"
#include "proto/job.pb.h"

namespace strata::fault {

// The policy with defaults filled in.
struct ResolvedPolicy {
  FaultPolicy::Action straggler = FaultPolicy::report;
  FaultPolicy::Action slow_link = FaultPolicy::report;
  FaultPolicy::Action hang = FaultPolicy::restart;
  StragglerOptions straggler_options;
  HangOptions hang_options;
  SlowLinkOptions slow_link_options;
  double restart_cost_s = 30;  // until the job measured one
};
ResolvedPolicy Resolve(const FaultPolicy& policy);

// The keys `key=value` settings accept, in the order docs/fault.md lists
// them: straggler, slow_link, hang (report|restart|evict) and the
// FaultPolicy thresholds by field name.
const std::vector<std::string>& FaultKeys();

// Applies one "key=value" to `policy`. InvalidArgument naming the key when
// it is unknown (listing the known ones), the value is not a number or not
// an action, or no '=' is given. Ranges are checked by ValidateJob
// (planner/job.h, fields "fault.*") on the whole job afterwards.
Status ApplyFaultSetting(absl::string_view key_value, FaultPolicy* policy);

// "report", "restart", "evict" or "default".
const char* ActionName(FaultPolicy::Action action);

}  // namespace strata::fault
