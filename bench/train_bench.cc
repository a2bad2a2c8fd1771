// strata-bench train ("Benchmark"):
//  1. The reference trainer's GEMMs (`small`, one rank, one OpenBLAS thread)
//     timed per shape during real training steps, next to bare cblas_sgemm
//     of the same shapes on fresh contiguous operands in the same run.
//     Goal: trainer >= 90% of bare sgemm (FLOP-weighted).
//  2. Step time of every (tp, pp, dp) variant on 2 and 4 ranks (threads over
//     in-process transports on this machine) next to the planner's
//     prediction for the same variant on the measured topology (this node's
//     worker probe -> ClusterFromProbes, as the coordinator plans a CPU
//     attempt); the error, and whether the planner's own pick was the
//     fastest measured.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/registry.h"
#include "coordinator/jobs/attempt_plan.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/probe/probe.h"
#include "train/ops.h"
#include "train/thread_ranks.h"

extern "C" void openblas_set_num_threads(int);

namespace strata::bench {
namespace {

constexpr int kBatch = 16, kMicro = 2;

train::TrainOptions Small() {
  train::TrainOptions o;
  o.model = *train::ModelPreset("small");
  o.global_batch = kBatch;
  o.micro_batch = kMicro;
  return o;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int GemmPart(int steps) {
  train::ThreadRun warm = train::RunThreads(Small(), 1, 1, 1, 1);
  if (!warm.status.ok()) return 1;
  train::TakeGemmProfile();
  train::EnableGemmProfile(true);
  train::ThreadRun run = train::RunThreads(Small(), 1, 1, 1, steps);
  train::EnableGemmProfile(false);
  if (!run.status.ok()) return 1;
  const auto prof = train::TakeGemmProfile();
  std::printf("GEMM throughput, model small, 1 rank, %d steps, 1 BLAS thread\n",
              steps);
  std::printf("%5s %5s %6s %6s %6s %7s %12s %12s %7s\n", "transA", "transB",
              "m", "n", "k", "calls", "trainer GF/s", "sgemm GF/s", "ratio");
  double flops_all = 0, trainer_s = 0, bare_s = 0;
  for (const auto& [shape, totals] : prof) {
    const double flops = 2.0 * shape.m * shape.n * shape.k * totals.calls;
    const int lda = shape.trans_a ? shape.m : shape.k;
    const int ldb = shape.trans_b ? shape.k : shape.n;
    std::vector<float> a(static_cast<size_t>(shape.m) * shape.k, 0.5f),
        b(static_cast<size_t>(shape.k) * shape.n, 0.25f),
        c(static_cast<size_t>(shape.m) * shape.n, 0.0f);
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < totals.calls; ++i) {
      cblas_sgemm(CblasRowMajor, shape.trans_a ? CblasTrans : CblasNoTrans,
                  shape.trans_b ? CblasTrans : CblasNoTrans, shape.m, shape.n,
                  shape.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(),
                  shape.n);
    }
    const double bare =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    flops_all += flops;
    trainer_s += totals.seconds;
    bare_s += bare;
    if (flops < 1e8) continue;  // list the shapes that matter
    std::printf("%5d %5d %6d %6d %6d %7lld %12.1f %12.1f %6.0f%%\n",
                shape.trans_a, shape.trans_b, shape.m, shape.n, shape.k,
                static_cast<long long>(totals.calls),
                flops / totals.seconds / 1e9, flops / bare / 1e9,
                100 * bare / totals.seconds);
  }
  std::printf(
      "all shapes: trainer %.1f GFLOP/s, bare sgemm %.1f GFLOP/s, "
      "ratio %.0f%% (goal >= 90%%)\n\n",
      flops_all / trainer_s / 1e9, flops_all / bare_s / 1e9,
      100 * bare_s / trainer_s);
  return 0;
}

StatusOr<double> Predict(const control::WorkerInfo& node, int ranks, int tp,
                         int pp, int dp, Plan* pick) {
  planner::PlanRequest req;
  ASSIGN_OR_RETURN(req.model, planner::LoadModel("strata-small"));
  req.cluster = coordinator::ClusterFromProbes({node}, ranks);
  req.gpus = ranks;
  req.top_k = 1;
  req.job.set_global_batch(kBatch);
  req.job.set_seq_length(64);
  PlanConstraints* k = req.job.mutable_constraints();
  k->set_cp(1);
  k->set_vpp(1);
  k->set_micro_batch(kMicro);
  k->set_zero_stage(0);
  k->set_recompute(Recompute::none);
  k->set_sequence_parallel(false);
  if (pick != nullptr) {
    ASSIGN_OR_RETURN(PlanReport free, planner::PlanJob(req));
    *pick = free.plans(0);
  }
  k->set_tp(tp);
  k->set_pp(pp);
  k->set_dp(dp);
  ASSIGN_OR_RETURN(PlanReport fixed, planner::PlanJob(req));
  return fixed.plans(0).step_time_s();
}

int StepPart(int steps) {
  auto probe = probe::ProbeNode();
  if (!probe.ok()) return 1;
  control::WorkerInfo node;
  *node.mutable_probe() = *probe;
  std::printf(
      "step time vs planner prediction, model small, batch %d, "
      "micro-batch %d (probe: %d cores, SGEMM %.0f GFLOP/s, copy "
      "%.1f GB/s)\n",
      kBatch, kMicro, probe->cpu_cores(), probe->cpu_gflops(),
      probe->copy_gbps());
  std::printf("%5s %4s %4s %4s %12s %12s %8s\n", "ranks", "tp", "pp", "dp",
              "measured s", "predicted s", "error");
  for (int ranks : {2, 4}) {
    Plan pick;
    double best = 1e30;
    std::string best_name, pick_name;
    for (int tp = 1; tp <= ranks; tp *= 2) {
      for (int pp = 1; tp * pp <= ranks; pp *= 2) {
        const int dp = ranks / (tp * pp);
        train::ThreadRun run =
            train::RunThreads(Small(), tp, pp, dp, steps + 1);
        if (!run.status.ok()) {
          std::fprintf(stderr, "run failed: %s\n",
                       run.status.ToString().c_str());
          return 1;
        }
        run.seconds.erase(run.seconds.begin());  // warm-up step
        const double measured = Median(run.seconds);
        auto predicted = Predict(node, ranks, tp, pp, dp,
                                 pick_name.empty() ? &pick : nullptr);
        if (pick_name.empty()) {
          pick_name = "tp=" + std::to_string(pick.tp()) +
                      " pp=" + std::to_string(pick.pp()) +
                      " dp=" + std::to_string(pick.dp());
        }
        const std::string name = "tp=" + std::to_string(tp) +
                                 " pp=" + std::to_string(pp) +
                                 " dp=" + std::to_string(dp);
        if (measured < best) best = measured, best_name = name;
        if (predicted.ok()) {
          std::printf("%5d %4d %4d %4d %12.3f %12.3f %+7.0f%%\n", ranks, tp, pp,
                      dp, measured, *predicted,
                      100 * (*predicted - measured) / measured);
        } else {
          std::printf("%5d %4d %4d %4d %12.3f %12s  (%s)\n", ranks, tp, pp, dp,
                      measured, "-", predicted.status().ToString().c_str());
        }
      }
    }
    std::printf("  %d ranks: planner picks %s; fastest measured %s%s\n", ranks,
                pick_name.c_str(), best_name.c_str(),
                pick_name == best_name ? " (the pick)" : "");
  }
  return 0;
}

int TrainBench(int argc, char** argv) {
  CLI::App app{"strata-bench train: trainer GEMMs and step times vs planner"};
  int steps = 3;
  app.add_option("--steps", steps, "measured steps per run")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  openblas_set_num_threads(1);
  if (int rc = GemmPart(steps); rc != 0) return rc;
  return StepPart(steps);
}

}  // namespace

STRATA_BENCH("train", "trainer GEMMs vs bare sgemm; step times vs planner",
             TrainBench);

}  // namespace strata::bench
