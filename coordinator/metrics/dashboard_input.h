// Gathers what the dashboard shows (dashboard_render.h) from the
// coordinator's owners, on the event loop: the jobs with their latest steps
// and goodput, per running job its heat map history (the newest
// kDashboardHeatmapSteps steps), its curve and events, the events of the
// kEndedJobs jobs that ended last, and the workers.
#pragma once

#include <cstdint>

#include "coordinator/jobs/event_log.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/metrics/dashboard_render.h"
#include "coordinator/registry/worker_registry.h"

namespace strata::coordinator {

inline constexpr int kDashboardEndedJobs = 3;

DashboardInput CollectDashboard(const JobManager& jobs, EventLog& events,
                                const WorkerRegistry& registry,
                                int64_t now_unix_ms);

}  // namespace strata::coordinator
