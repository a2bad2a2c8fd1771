#include "planner/calibrate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "planner/cost_model.h"
#include "planner/model.h"
#include "planner/network.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

// The fitted parameters, in log space: gemm_efficiency, gemm_half_dim,
// memory_gbps, layer_overhead_s, intra_node_gbps, intra_node_latency_s,
// node_load, shared_core_latency_s; each kept inside its bounds
// (ClusterRanges' calibration.*, narrowed to physical values).
constexpr int kParams = 8;
using Point = std::array<double, kParams>;
constexpr double kLow[kParams] = {0.01, 1e-3, 1e-3, 1e-9,
                                  1e-3, 1e-7, 1e-3, 1e-7};
constexpr double kHigh[kParams] = {1, 16384, 1e7, 0.1, 1e6, 0.1, 100, 0.1};

double Bounded(const Point& x, int i) {
  return std::clamp(std::exp(x[i]), kLow[i], kHigh[i]);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Calibration FromPoint(const Point& x) {
  Calibration c;
  c.set_gemm_efficiency(Bounded(x, 0));
  c.set_gemm_half_dim(Bounded(x, 1));
  c.set_node_memory_gbps(Bounded(x, 2));
  c.set_layer_overhead_s(Bounded(x, 3));
  c.set_intra_node_gbps(Bounded(x, 4));
  c.set_intra_node_latency_s(Bounded(x, 5));
  c.set_node_load(Bounded(x, 6));
  c.set_shared_core_latency_s(Bounded(x, 7));
  return c;
}

// The cluster a measurement ran on.
const ClusterSpec* ClusterOf(const MeasuredRuns& runs, int ranks) {
  for (int i = 0; i < runs.clusters_size() && i < runs.cluster_ranks_size();
       ++i) {
    if (runs.cluster_ranks(i) == ranks) return &runs.clusters(i);
  }
  return nullptr;
}

// Nelder-Mead (Nelder and Mead 1965) with the standard coefficients.
Point Minimise(const std::function<double(const Point&)>& f, Point start,
               int iterations) {
  std::array<Point, kParams + 1> s;
  std::array<double, kParams + 1> v;
  for (int i = 0; i <= kParams; ++i) {
    s[i] = start;
    if (i > 0) s[i][i - 1] += 0.5;
    v[i] = f(s[i]);
  }
  for (int it = 0; it < iterations; ++it) {
    std::array<int, kParams + 1> o;
    for (int i = 0; i <= kParams; ++i) o[i] = i;
    std::sort(o.begin(), o.end(), [&](int a, int b) { return v[a] < v[b]; });
    const int best = o[0], worst = o[kParams], second = o[kParams - 1];
    Point c{};
    for (int i = 0; i < kParams; ++i) {
      for (int j = 0; j < kParams; ++j) c[j] += s[o[i]][j] / kParams;
    }
    auto along = [&](double t) {
      Point p;
      for (int j = 0; j < kParams; ++j) p[j] = c[j] + t * (s[worst][j] - c[j]);
      return p;
    };
    const Point r = along(-1);
    const double fr = f(r);
    if (fr < v[best]) {
      const Point e = along(-2);
      const double fe = f(e);
      if (fe < fr) {
        s[worst] = e, v[worst] = fe;
      } else {
        s[worst] = r, v[worst] = fr;
      }
    } else if (fr < v[second]) {
      s[worst] = r, v[worst] = fr;
    } else {
      const Point k = along(0.5);
      const double fk = f(k);
      if (fk < v[worst]) {
        s[worst] = k, v[worst] = fk;
      } else {
        for (int i = 1; i <= kParams; ++i) {
          const int id = o[i];
          for (int j = 0; j < kParams; ++j) {
            s[id][j] = s[best][j] + 0.5 * (s[id][j] - s[best][j]);
          }
          v[id] = f(s[id]);
        }
      }
    }
  }
  int best = 0;
  for (int i = 1; i <= kParams; ++i) {
    if (v[i] < v[best]) best = i;
  }
  return s[best];
}

}  // namespace

bool RanksOutnumberCores(const ClusterSpec& cluster) {
  return cluster.cpu_cores_per_node() > 0 &&
         cluster.gpus_per_node() > cluster.cpu_cores_per_node();
}

void ApplyCalibration(ClusterSpec* c) {
  if (!c->has_calibration()) return;
  const Calibration& cal = c->calibration();
  // Competing work: g devices of a node share it with node_load more.
  const double g = std::max(1, c->gpus_per_node());
  const double share = cal.node_load() > 0 ? g / (g + cal.node_load()) : 1.0;
  // The fitted peak replaces the main device type's; every type keeps its
  // ratio to it (mixed clusters).
  const double peak_scale =
      cal.gemm_peak_tflops() > 0 && c->gpu().peak_bf16_tflops() > 0
          ? cal.gemm_peak_tflops() / c->gpu().peak_bf16_tflops()
          : 1.0;
  auto gpu = [&](GpuType* gt) {
    if (cal.gemm_efficiency() > 0) {
      gt->set_gemm_efficiency(cal.gemm_efficiency());
    }
    if (cal.gemm_half_dim() > 0) gt->set_gemm_half_dim(cal.gemm_half_dim());
    if (cal.node_memory_gbps() > 0) {
      gt->set_hbm_gbps(cal.node_memory_gbps() / g);
    }
    gt->set_peak_bf16_tflops(gt->peak_bf16_tflops() * peak_scale * share);
    gt->set_peak_fp8_tflops(gt->peak_fp8_tflops() * peak_scale);
    gt->set_hbm_gbps(gt->hbm_gbps() * share);
  };
  gpu(c->mutable_gpu());
  for (NodeOverride& o : *c->mutable_overrides()) {
    if (o.has_gpu()) gpu(o.mutable_gpu());
  }
  if (cal.intra_node_gbps() > 0) {
    c->set_intra_node_gbps(cal.intra_node_gbps() / kNvlinkEfficiency);
  }
  // CPU ranks that outnumber their cores wait for a core at every step.
  const double latency = RanksOutnumberCores(*c) &&
                                 cal.shared_core_latency_s() > 0
                             ? cal.shared_core_latency_s()
                             : cal.intra_node_latency_s();
  if (latency > 0) c->set_intra_node_latency_s(latency);
  if (cal.inter_node_scale() > 0) {
    const double scale = cal.inter_node_scale();
    for (Nic& n : *c->mutable_nics()) n.set_gbps(n.gbps() * scale);
    for (NodeOverride& o : *c->mutable_overrides()) {
      for (Nic& n : *o.mutable_nics()) n.set_gbps(n.gbps() * scale);
    }
    // Applied: a second ApplyCalibration leaves the NICs alone.
    c->mutable_calibration()->clear_inter_node_scale();
  }
  c->mutable_calibration()->clear_node_load();  // likewise
  c->mutable_calibration()->clear_gemm_peak_tflops();
}

StatusOr<Calibration> CalibrationFromProbe(const control::NodeProbe& probe,
                                           const ClusterSpec& cluster) {
  Calibration cal;
  cal.set_source(absl::StrCat("probe of ", probe.hostname()));
  double nic = 0;
  for (const Nic& n : cluster.nics()) nic = std::max(nic, n.gbps());
  if (probe.peer_gbps() > 0 && nic > 0) {
    cal.set_inter_node_scale(std::min(100.0, probe.peer_gbps() / nic));
  }
  // A CPU-only node's memory rate stands for the cluster's devices only
  // when they are CPU ranks too (below kCpuDevicePeakTflops).
  if (probe.gpu_details_size() == 0 && probe.copy_gbps() > 0 &&
      cluster.gpu().peak_bf16_tflops() < kCpuDevicePeakTflops) {
    cal.set_node_memory_gbps(probe.copy_gbps() *
                             std::max(1, cluster.gpus_per_node()));
  }
  if (cal.inter_node_scale() == 0 && cal.node_memory_gbps() == 0) {
    return absl::InvalidArgumentError(
        "probe: nothing to calibrate: it measured no peer bandwidth "
        "(strata probe --peer), and its memory rate stands only for a "
        "CPU-only node in a cluster of CPU ranks");
  }
  return cal;  // no step-time fit: samples and errors stay 0
}

StatusOr<double> PredictMeasured(const MeasuredRuns& runs, int i,
                                 const Calibration& cal) {
  const StepMeasurement& m = runs.steps(i);
  const int ranks = runs.step_ranks(i);
  const ClusterSpec* cluster = ClusterOf(runs, ranks);
  if (cluster == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("measurements: no cluster for ", ranks, " ranks"));
  }
  PlanRequest req;
  ASSIGN_OR_RETURN(req.model, LoadModel(m.model()));
  req.cluster = *cluster;
  *req.cluster.mutable_calibration() = cal;
  req.gpus = ranks;
  req.top_k = 1;
  req.with_placement = false;
  req.job.set_global_batch(m.global_batch());
  req.job.set_seq_length(m.seq_length());
  PlanConstraints* k = req.job.mutable_constraints();
  k->set_tp(m.tp());
  k->set_pp(m.pp());
  k->set_dp(m.dp());
  k->set_cp(std::max(1, m.cp()));
  k->set_vpp(1);
  k->set_micro_batch(m.micro_batch());
  k->set_zero_stage(m.zero_stage());
  k->set_recompute(Recompute::none);
  k->set_sequence_parallel(m.sequence_parallel());
  k->set_offload(Offload::none);
  k->set_even_layers(true);  // strata-train splits layers evenly by default
  ASSIGN_OR_RETURN(PlanReport report, PlanJob(req));
  return report.plans(0).step_time_s();
}

StatusOr<Calibration> FitCalibration(const MeasuredRuns& runs,
                                     std::vector<FitError>* errors) {
  if (runs.steps_size() == 0) {
    return absl::InvalidArgumentError(
        "measurements: field 'steps' is empty; nothing to fit");
  }
  if (runs.step_ranks_size() != runs.steps_size() ||
      runs.cluster_ranks_size() != runs.clusters_size()) {
    return absl::InvalidArgumentError(
        "measurements: 'step_ranks' must have one entry per step and "
        "'cluster_ranks' one per cluster");
  }
  std::vector<double> measured;
  for (int i = 0; i < runs.steps_size(); ++i) {
    const double t =
        Median({runs.steps(i).step_s().begin(), runs.steps(i).step_s().end()});
    if (!(t > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "measurements: field 'steps[", i, "].step_s' has no positive time"));
    }
    measured.push_back(t);
  }
  // Before: the clusters as given (no calibration).
  std::vector<double> before;
  for (int i = 0; i < runs.steps_size(); ++i) {
    ASSIGN_OR_RETURN(double t, PredictMeasured(runs, i, Calibration()));
    before.push_back(t);
  }
  // Start from the first cluster's own figures (the latency of ranks that
  // outnumber their cores: from the first cluster where they do).
  const ClusterSpec& c0 = runs.clusters(0);
  double shared_latency = 1e-4;
  for (const ClusterSpec& c : runs.clusters()) {
    if (RanksOutnumberCores(c) && c.intra_node_latency_s() > 0) {
      shared_latency = c.intra_node_latency_s();
      break;
    }
  }
  Point start = {
      std::log(std::max(0.05, c0.gpu().gemm_efficiency())),
      std::log(GemmHalfDim(c0.gpu())),
      std::log(std::max(1e-3, c0.gpu().hbm_gbps() * c0.gpus_per_node())),
      std::log(1e-6),
      std::log(std::max(1.0, c0.intra_node_gbps() * kNvlinkEfficiency)),
      std::log(c0.intra_node_latency_s() > 0 ? c0.intra_node_latency_s()
                                             : kNvlinkLatency),
      std::log(0.1),
      std::log(shared_latency)};
  const double peak = runs.gemm_peak_tflops() * 1e12;
  // The fit stands for the runs' device peak (the median of several runs'
  // probes, RunCalibrate), not for whatever a later probe measures.
  auto calibration = [&](const Point& x) {
    Calibration cal = FromPoint(x);
    cal.set_gemm_peak_tflops(runs.gemm_peak_tflops());
    return cal;
  };
  auto objective = [&](const Point& x) {
    const Calibration cal = calibration(x);
    double sum = 0;
    for (int i = 0; i < runs.steps_size(); ++i) {
      auto t = PredictMeasured(runs, i, cal);
      if (!t.ok()) return 1e30;
      const double e = std::log(*t / measured[i]);
      sum += e * e;
    }
    double err = sum / runs.steps_size();
    // GEMMs by shape: the per-call time at the fitted efficiency and size
    // curve (CostModel::Gemm), weighted by their FLOPs.
    if (peak > 0 && runs.gemms_size() > 0) {
      double gsum = 0, wsum = 0;
      for (const GemmMeasurement& g : runs.gemms()) {
        if (g.calls() <= 0 || !(g.seconds() > 0)) continue;
        const double m = g.m(), n = g.n(), k = g.k();
        const double h = cal.gemm_half_dim();
        const double shape = m / (m + h) * n / (n + h) * k / (k + h);
        // One rank ran them: its node share is 1 / (1 + node_load).
        const double pred = 2 * m * n * k * (1 + cal.node_load()) /
                            (peak * cal.gemm_efficiency() * shape);
        const double e = std::log(pred / (g.seconds() / g.calls()));
        const double w = 2 * m * n * k * g.calls();
        gsum += w * e * e;
        wsum += w;
      }
      if (wsum > 0) err += gsum / wsum;
    }
    return err;
  };
  Point best = start;
  for (int round = 0; round < 3; ++round) {
    best = Minimise(objective, best, 300);
  }
  Calibration cal = calibration(best);
  std::vector<double> after;
  double e0 = 0, e1 = 0;
  for (int i = 0; i < runs.steps_size(); ++i) {
    ASSIGN_OR_RETURN(double t, PredictMeasured(runs, i, cal));
    after.push_back(t);
    e0 += std::pow(before[i] / measured[i] - 1, 2);
    e1 += std::pow(t / measured[i] - 1, 2);
  }
  cal.set_samples(runs.steps_size() + runs.gemms_size());
  cal.set_rms_error_before(std::sqrt(e0 / runs.steps_size()));
  cal.set_rms_error_after(std::sqrt(e1 / runs.steps_size()));
  cal.set_source(runs.source());
  if (errors != nullptr) {
    errors->clear();
    for (int i = 0; i < runs.steps_size(); ++i) {
      const StepMeasurement& m = runs.steps(i);
      errors->push_back({absl::StrCat("ranks=", runs.step_ranks(i), " tp=",
                                      m.tp(), " pp=", m.pp(), " dp=", m.dp()),
                         measured[i], before[i], after[i]});
    }
  }
  return cal;
}

std::string CalibrationPath(const std::string& cluster_arg,
                            const std::string& cluster_name) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(cluster_arg, ec)) {
    return cluster_arg + ".calibration.json";
  }
  std::string dir;
  if (const char* d = std::getenv("STRATA_CALIBRATION_DIR"); d && *d) {
    dir = d;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    dir = absl::StrCat(home, "/.strata/calibration");
  } else {
    dir = ".strata/calibration";
  }
  return absl::StrCat(dir, "/", cluster_name, ".json");
}

Status SaveCalibration(const std::string& path, const Calibration& cal) {
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << MessageToJson(cal, /*pretty=*/true) << "\n";
    if (!out) return absl::UnavailableError("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::UnavailableError("cannot write " + path);
  return absl::OkStatus();
}

StatusOr<Calibration> LoadCalibration(const std::string& path) {
  Calibration cal;
  RETURN_IF_ERROR(LoadConfigFile(path, &cal));
  // ClusterRanges' calibration.* entries, checked on a cluster holding it.
  std::vector<FieldRange> ranges;
  for (const FieldRange& r : topology::ClusterRanges()) {
    if (absl::StartsWith(r.path, "calibration.")) ranges.push_back(r);
  }
  ClusterSpec check;
  *check.mutable_calibration() = cal;
  RETURN_IF_ERROR(CheckRanges(check, ranges, path));
  return cal;
}

}  // namespace strata::planner
