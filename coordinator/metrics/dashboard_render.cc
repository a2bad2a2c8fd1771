#include "coordinator/metrics/dashboard_render.h"

#include "observe/spare_pool.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "observe/goodput.h"
#include "observe/json_writer.h"
#include "observe/progress.h"
#include "observe/spare_pool.h"

namespace strata::coordinator {
namespace {

using observe::JsonNumber;
using observe::JsonString;

std::string Num(double v, int decimals = 4) {
  return std::isfinite(v) ? JsonNumber(v, decimals) : "null";
}

std::string ProgressJson(const control::JobInfo& job, int64_t now) {
  const observe::Progress p = observe::ComputeProgress(job, now);
  return absl::StrCat(
      "{\"step\":", p.step, ",\"total\":", p.total,
      ",\"percent\":", Num(p.percent, 2), ",\"tokens_per_s\":",
      Num(p.tokens_per_s, 1), ",\"step_s\":", Num(p.step_s),
      ",\"mfu\":", p.mfu ? Num(*p.mfu) : "null",
      ",\"eta_s\":", p.eta_s ? Num(*p.eta_s, 1) : "null",
      ",\"ettr\":", Num(p.ettr), ",\"checkpoint_step\":", p.checkpoint_step,
      ",\"text\":", JsonString(observe::DescribeProgress(p)), "}");
}

std::string GoodputJson(const control::Goodput& proto) {
  const observe::Goodput g = observe::FromProto(proto);
  return absl::StrCat(
      "{\"wall_s\":", Num(g.wall_s, 2), ",\"ratio\":", Num(g.ratio()),
      ",\"productive_s\":", Num(g.productive_s, 2), ",\"lost\":{",
      "\"startup\":", Num(g.startup_s, 2), ",\"restart\":", Num(g.restart_s, 2),
      ",\"hang\":", Num(g.hang_s, 2), ",\"recompute\":", Num(g.recompute_s, 2),
      ",\"checkpoint\":", Num(g.checkpoint_s, 2),
      ",\"straggler\":", Num(g.straggler_s, 2), "},\"text\":",
      JsonString(observe::DescribeGoodput(g)), "}");
}

std::string PlanJson(const control::JobInfo& job) {
  if (!job.has_plan()) return "null";
  const Plan& p = job.plan();
  std::vector<std::string> nodes;
  for (const auto& n : job.node_info()) nodes.push_back(JsonString(n.node_name()));
  return absl::StrCat("{\"tp\":", p.tp(), ",\"pp\":", p.pp(), ",\"dp\":", p.dp(),
                      ",\"cp\":", std::max(1, p.cp()), ",\"layers\":[",
                      absl::StrJoin(p.layers_per_stage(), ","), "],\"nodes\":[",
                      absl::StrJoin(nodes, ","), "]}");
}

std::string CurveJson(const std::vector<control::StepReport>& curve) {
  std::vector<std::string> points;
  const size_t every =
      std::max<size_t>(1, (curve.size() + kDashboardCurvePoints - 1) /
                              kDashboardCurvePoints);
  for (size_t i = 0; i < curve.size(); ++i) {
    if (i % every != 0 && i + 1 != curve.size()) continue;
    const auto& s = curve[i];
    const double tps = s.step_seconds() > 0 ? s.tokens() / s.step_seconds() : 0;
    points.push_back(absl::StrCat("[", s.step(), ",", Num(s.loss(), 6), ",",
                                  Num(tps, 1), "]"));
  }
  return absl::StrCat("[", absl::StrJoin(points, ","), "]");
}

std::string HeatmapJson(const control::DiagnoseReply& d) {
  std::set<int64_t> all;
  for (const auto& r : d.ranks()) all.insert(r.steps().begin(), r.steps().end());
  std::vector<int64_t> steps(all.begin(), all.end());
  if (steps.size() > static_cast<size_t>(kDashboardHeatmapSteps)) {
    steps.erase(steps.begin(), steps.end() - kDashboardHeatmapSteps);
  }
  std::vector<const control::RankDiagnosis*> ranks;
  for (const auto& r : d.ranks()) ranks.push_back(&r);
  std::stable_sort(ranks.begin(), ranks.end(), [](auto* a, auto* b) {
    return a->flagged() > b->flagged();
  });
  if (ranks.size() > static_cast<size_t>(kDashboardHeatmapRanks))
    ranks.resize(kDashboardHeatmapRanks);
  std::sort(ranks.begin(), ranks.end(),
            [](auto* a, auto* b) { return a->rank() < b->rank(); });
  std::vector<std::string> rank_ids, flagged, compute, wait;
  for (const auto* r : ranks) {
    rank_ids.push_back(absl::StrCat(r->rank()));
    if (r->flagged()) flagged.push_back(absl::StrCat(r->rank()));
    std::map<int64_t, std::pair<double, double>> by_step;
    for (int i = 0; i < r->steps_size(); ++i) {
      by_step[r->steps(i)] = {
          i < r->step_compute_s_size() ? r->step_compute_s(i) : NAN,
          i < r->step_wait_s_size() ? r->step_wait_s(i) : NAN};
    }
    std::vector<std::string> c, w;
    for (int64_t s : steps) {
      auto it = by_step.find(s);
      c.push_back(it == by_step.end() ? "null" : Num(it->second.first, 5));
      w.push_back(it == by_step.end() ? "null" : Num(it->second.second, 5));
    }
    compute.push_back(absl::StrCat("[", absl::StrJoin(c, ","), "]"));
    wait.push_back(absl::StrCat("[", absl::StrJoin(w, ","), "]"));
  }
  return absl::StrCat("{\"steps\":[", absl::StrJoin(steps, ","), "],\"ranks\":[",
                      absl::StrJoin(rank_ids, ","), "],\"flagged\":[",
                      absl::StrJoin(flagged, ","), "],\"compute\":[",
                      absl::StrJoin(compute, ","), "],\"wait\":[",
                      absl::StrJoin(wait, ","), "]}");
}

std::string EventsJson(const std::vector<control::Event>& events) {
  std::vector<std::string> out;
  const size_t from =
      events.size() > static_cast<size_t>(kDashboardEvents)
          ? events.size() - kDashboardEvents
          : 0;
  for (size_t i = from; i < events.size(); ++i) {
    const auto& e = events[i];
    out.push_back(absl::StrCat("{\"ms\":", e.unix_ms(), ",\"attempt\":",
                               e.attempt(), ",\"kind\":", JsonString(e.kind()),
                               ",\"rank\":", e.rank(), ",\"message\":",
                               JsonString(e.message()), "}"));
  }
  return absl::StrCat("[", absl::StrJoin(out, ","), "]");
}

std::string PlacementJson(const control::JobInfo& job) {
  std::vector<std::string> out;
  for (const auto& r : job.plan().placement().ranks()) {
    const std::string node = r.node() >= 0 && r.node() < job.node_info_size()
                                 ? job.node_info(r.node()).node_name()
                                 : "";
    out.push_back(absl::StrCat("{\"rank\":", r.rank(), ",\"node\":",
                               JsonString(node), ",\"tp\":", r.tp_rank(),
                               ",\"pp\":", r.pp_rank(), ",\"dp\":", r.dp_rank(),
                               "}"));
  }
  return absl::StrCat("[", absl::StrJoin(out, ","), "]");
}

// The job's hot spares: asked (launch.spares) and reserved worker ids.
std::string SparesJson(const control::JobInfo& job) {
  std::vector<std::string> ids;
  for (const auto& id : job.spare_workers()) ids.push_back(JsonString(id));
  return absl::StrCat("{\"want\":", std::max(0, job.spec().launch().spares()),
                      ",\"reserved\":[", absl::StrJoin(ids, ","), "]}");
}

// The idle pool (observe/spare_pool.h): free and reserved idle workers.
std::string PoolJson(const control::JobsReply& jobs,
                     const control::ListWorkersReply& workers) {
  const observe::SparePool pool = observe::ComputeSparePool(jobs, workers);
  std::vector<std::string> free, reserved;
  for (const auto& id : pool.free) free.push_back(JsonString(id));
  for (const auto& [id, job] : pool.reserved) {
    reserved.push_back(absl::StrCat(JsonString(id), ":", JsonString(job)));
  }
  return absl::StrCat("{\"free\":[", absl::StrJoin(free, ","),
                      "],\"reserved\":{", absl::StrJoin(reserved, ","),
                      "},\"busy\":", pool.busy.size(), ",\"lost\":",
                      pool.lost, ",\"text\":",
                      JsonString(observe::DescribeSparePool(pool)), "}");
}

}  // namespace

std::string RenderDashboardJson(const DashboardInput& in) {
  std::vector<std::string> jobs;
  for (const auto& job : in.jobs.jobs()) {
    jobs.push_back(absl::StrCat(
        "{\"id\":", JsonString(job.job_id()),
        ",\"name\":", JsonString(job.spec().name()), ",\"state\":",
        JsonString(control::JobState_Name(job.state())),
        ",\"attempt\":", job.attempt(), ",\"restarts\":", job.restart_count(),
        ",\"ranks\":", job.ranks_size(), ",\"message\":",
        JsonString(job.message()), ",\"submit_ms\":", job.submit_unix_ms(),
        ",\"progress\":", ProgressJson(job, in.now_unix_ms),
        ",\"goodput\":", GoodputJson(job.goodput()),
        ",\"plan\":", PlanJson(job), ",\"spares\":", SparesJson(job), "}"));
  }
  std::vector<std::string> detail;
  for (const auto& [id, d] : in.detail) {
    std::string placement = "[]";
    for (const auto& job : in.jobs.jobs()) {
      if (job.job_id() == id) placement = PlacementJson(job);
    }
    detail.push_back(absl::StrCat(
        JsonString(id), ":{\"curve\":", CurveJson(d.curve),
        ",\"heatmap\":", HeatmapJson(d.diagnose),
        ",\"events\":", EventsJson(d.events), ",\"placement\":", placement,
        "}"));
  }
  std::vector<std::string> workers;
  for (const auto& w : in.workers.workers()) {
    workers.push_back(absl::StrCat(
        "{\"id\":", JsonString(w.worker_id()),
        ",\"node\":", JsonString(w.node_name()),
        ",\"alive\":", w.alive() ? "true" : "false",
        ",\"address\":", JsonString(w.address()), ",\"heartbeat_age_s\":",
        Num(std::max<int64_t>(0, in.now_unix_ms - w.last_heartbeat_unix_ms()) /
                1e3,
            1),
        ",\"holds\":", JsonString(absl::StrJoin(w.holds(), ",")),
        ",\"clock_offset_ms\":",
        w.has_clock() ? Num(w.clock().offset_us() / 1e3, 3) : "null",
        ",\"clock_error_ms\":",
        w.has_clock() ? Num(w.clock().error_us() / 1e3, 3) : "null", "}"));
  }
  return absl::StrCat("{\"now_ms\":", in.now_unix_ms, ",\"jobs\":[",
                      absl::StrJoin(jobs, ","), "],\"detail\":{",
                      absl::StrJoin(detail, ","), "},\"workers\":[",
                      absl::StrJoin(workers, ","), "],\"pool\":",
                      PoolJson(in.jobs, in.workers), "}\n");
}

}  // namespace strata::coordinator
