#include "coordinator/server/http_routes.h"

#include <utility>

#include "common/embedded.h"

namespace strata {
extern const EmbeddedFile kDashboardFiles[];  // observe/dashboard/index.html
}

namespace strata::coordinator {

using observe::HttpRequest;
using observe::HttpResponse;

observe::HttpHandler SnapshotRoute(observe::Published* source,
                                   const char* content_type) {
  return [source, content_type](const HttpRequest&) {
    HttpResponse r;
    auto text = source->Get();
    r.status = text.ok() ? 200 : 503;
    r.content_type = content_type;
    r.body = text.ok() ? *text : std::string(text.status().message());
    return r;
  };
}

HttpResponse DashboardPage(const HttpRequest&) {
  HttpResponse r;
  r.content_type = "text/html; charset=utf-8";
  r.body = kDashboardFiles[0].contents;
  return r;
}

observe::HttpHandler TraceRoute(TraceDownload* traces) {
  return [traces](const HttpRequest& req) {
    HttpResponse r;
    auto job = req.params.find("job");
    if (job == req.params.end() || job->second.empty() ||
        job->second.size() > 128) {
      r.status = 400;
      r.body = "give the job: /api/trace.json?job=JOB_ID\n";
      return r;
    }
    auto text = traces->Get(job->second);
    if (!text.ok()) {
      r.status = absl::IsNotFound(text.status())           ? 404
                 : absl::IsDeadlineExceeded(text.status()) ? 503
                                                           : 409;
      r.body = std::string(text.status().message()) + "\n";
      return r;
    }
    r.content_type = "application/json";
    r.body = *std::move(text);
    return r;
  };
}

std::map<std::string, observe::HttpHandler> CoordinatorRoutes(
    observe::Published* metrics, observe::Published* dashboard,
    TraceDownload* traces) {
  return {{"/metrics",
           SnapshotRoute(metrics, "text/plain; version=0.0.4; charset=utf-8")},
          {"/", DashboardPage},
          {"/api/dashboard.json", SnapshotRoute(dashboard, "application/json")},
          {"/api/trace.json", TraceRoute(traces)}};
}

}  // namespace strata::coordinator
