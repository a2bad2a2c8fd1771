// The coordinator's read-only HTTP routes (docs/observe.md): /metrics
// (Prometheus text), the dashboard page (/) and its JSON
// (/api/dashboard.json), and trace downloads (/api/trace.json?job=ID).
// Every handler runs on an HTTP thread and reads only thread-safe sources:
// snapshots the loop publishes (observe::Published) and the trace hand-off
// (TraceDownload). The sources must outlive the HTTP server.
#pragma once

#include <map>
#include <string>

#include "coordinator/metrics/trace_download.h"
#include "observe/http_server.h"
#include "observe/published.h"

namespace strata::coordinator {

// Serves the newest snapshot of `source` as `content_type`; 503 with the
// reason while there is none.
observe::HttpHandler SnapshotRoute(observe::Published* source,
                                   const char* content_type);

// The dashboard page, compiled into the binary (observe/dashboard/).
observe::HttpResponse DashboardPage(const observe::HttpRequest& request);

// The trace JSON of ?job=ID: 400 without a job (or one over 128 bytes),
// 404 unknown job, 503 the loop did not make it in time, 409 no trace.
observe::HttpHandler TraceRoute(TraceDownload* traces);

// The four routes above, keyed by path.
std::map<std::string, observe::HttpHandler> CoordinatorRoutes(
    observe::Published* metrics, observe::Published* dashboard,
    TraceDownload* traces);

}  // namespace strata::coordinator
