// strata-bench train ("Benchmark"):
//  1. The reference trainer's GEMMs (`small`, one rank, one OpenBLAS thread)
//     timed per shape during real training steps, next to bare cblas_sgemm
//     of the same shapes on fresh contiguous operands in the same run.
//     Goal: trainer >= 90% of bare sgemm (FLOP-weighted). Then the GEMMs'
//     share of the step time (goal: everything else <= 25%).
//  2. Step time of every (tp, pp, dp) variant on 2 and 4 ranks (threads over
//     in-process transports on this machine) next to the planner's
//     prediction for the same variant on the measured topology (this node's
//     worker probe -> ClusterFromProbes, as the coordinator plans a CPU
//     attempt), and with --calibration also the calibrated prediction; per
//     rank count, how many layouts are within 15% (goal: all) and how much
//     slower the planner's pick measured than the fastest layout (goal:
//     <= 5%).
//  3. With --peer torch: tokens/s of strata and of the same model in plain
//     PyTorch (bench/torch_peer.py: DDP over gloo for several ranks) on 1, 2
//     and 4 ranks, the same threads per rank on both sides (strata-train's
//     rule, train/threads.h: this process's CPUs / ranks, at least 1, or
//     --threads), the same initial weights and token stream; the parameter
//     counts and first-step losses are compared first, so the ratio is of
//     equal work. strata's ranks run as threads over in-process transports
//     (its best layout per rank count), PyTorch's as processes.
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/python_peer.h"
#include "bench/registry.h"
#include "common/config.h"
#include "coordinator/jobs/attempt_plan.h"
#include "planner/calibrate.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/probe/probe.h"
#include "train/data.h"
#include "train/model.h"
#include "train/ops.h"
#include "train/thread_ranks.h"
#include "train/threads.h"

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

// What --measurements writes and --calibration applies (docs/planner.md
// "Calibration").
struct CalibrationIo {
  MeasuredRuns runs;                   // filled as the parts run
  std::optional<Calibration> applied;  // --calibration FILE
};

int GemmPart(int steps, CalibrationIo* io) {
  train::ThreadRun warm = train::RunThreads(Small(), 1, 1, 1, 1);
  if (!warm.status.ok()) return 1;
  train::TakeGemmProfile();
  train::EnableGemmProfile(true);
  train::ThreadRun run = train::RunThreads(Small(), 1, 1, 1, steps);
  train::EnableGemmProfile(false);
  if (!run.status.ok()) return 1;
  const auto prof = train::TakeGemmProfile();
  double step_s = 0;
  for (double x : run.seconds) step_s += x;
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
    GemmMeasurement* g = io->runs.add_gemms();
    g->set_m(shape.m);
    g->set_n(shape.n);
    g->set_k(shape.k);
    g->set_calls(totals.calls);
    g->set_seconds(totals.seconds);
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
  // Timing each call adds two clock reads per GEMM (~0.1 ms a step).
  std::printf(
      "step time %.3f s/step: GEMMs %.3f s (%.0f%%), everything else %.3f s "
      "(%.0f%%; goal <= 25%%)\n\n",
      step_s / steps, trainer_s / steps, 100 * trainer_s / step_s,
      (step_s - trainer_s) / steps, 100 * (step_s - trainer_s) / step_s);
  return 0;
}

// The planner's predicted step time of (tp, pp, dp) on `ranks` ranks of
// this node (as the coordinator plans a CPU attempt), with `cal` when set;
// with `pick`, also the planner's own choice among all layouts.
StatusOr<double> Predict(const control::WorkerInfo& node, int ranks, int tp,
                         int pp, int dp, const Calibration* cal, Plan* pick) {
  planner::PlanRequest req;
  ASSIGN_OR_RETURN(req.model, planner::LoadModel("strata-small"));
  req.cluster = coordinator::ClusterFromProbes({node}, ranks);
  if (cal != nullptr) *req.cluster.mutable_calibration() = *cal;
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
  // strata-train splits layers evenly unless the plan says otherwise.
  k->set_even_layers(true);
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

std::string LayoutName(int tp, int pp, int dp) {
  return absl::StrCat("tp=", tp, " pp=", pp, " dp=", dp);
}

// A (tp, pp, dp) of `ranks` ranks.
struct Layout {
  int tp, pp, dp;
};

// Every layout of `ranks` ranks (powers of two), in the order the bench
// prints them.
std::vector<Layout> Layouts(int ranks) {
  std::vector<Layout> out;
  for (int tp = 1; tp <= ranks; tp *= 2) {
    for (int pp = 1; tp * pp <= ranks; pp *= 2) {
      out.push_back({tp, pp, ranks / (tp * pp)});
    }
  }
  return out;
}

// Runs `l` for a warm-up step (first touch of every buffer) and `steps`
// measured ones, appending their seconds to `out` (and the first step's
// loss to `first_loss` when given); false, with a message, if it failed.
bool MeasureSteps(const train::TrainOptions& o, const Layout& l, int steps,
                  std::vector<double>* out, double* first_loss = nullptr) {
  // Over shm, as a job's ranks on one node talk (thread_ranks.h).
  train::ThreadRun run =
      train::RunThreads(o, l.tp, l.pp, l.dp, steps + 1, /*resume=*/false,
                        train::ThreadTransport::kShm);
  if (!run.status.ok()) {
    std::fprintf(stderr, "strata run failed: %s\n",
                 run.status.ToString().c_str());
    return false;
  }
  if (first_loss != nullptr) *first_loss = run.losses.front();
  out->insert(out->end(), run.seconds.begin() + 1, run.seconds.end());
  return true;
}

// Every layout of `runs` in `rounds` interleaved rounds of `steps`
// measured steps; (*seconds)[i] gets all measured steps of runs[i]. This
// VM's speed drifts by 10-40% over a minute (docs/planner.md "Measured on
// this machine"), so each round runs every layout once, starting one later
// each round: a slow spell lands on every layout instead of on the one
// that ran through it. False, with a message, if a run failed.
bool MeasureLayouts(const std::vector<Layout>& runs, int steps, int rounds,
                    std::vector<std::vector<double>>* seconds) {
  seconds->assign(runs.size(), {});
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < runs.size(); ++i) {
      const size_t j = (i + round) % runs.size();
      if (!MeasureSteps(Small(), runs[j], steps, &(*seconds)[j])) return false;
    }
  }
  return true;
}

// One way of predicting (uncalibrated, or with --calibration): its
// predictions of the layouts of one rank count, and the summary against
// the goals (every layout within 15%; the pick within 5% of the fastest
// measured layout).
struct Predictions {
  const char* name;
  const Calibration* cal;
  std::string pick;
  std::vector<double> predicted;  // per layout; < 0: failed
};

void Summarise(const Predictions& p, int ranks,
               const std::vector<std::string>& layouts,
               const std::vector<double>& measured) {
  int within = 0, n = 0;
  double worst = 0;
  for (size_t i = 0; i < layouts.size(); ++i) {
    if (p.predicted[i] < 0) continue;
    const double e = p.predicted[i] / measured[i] - 1;
    ++n;
    within += std::fabs(e) <= 0.15 ? 1 : 0;
    if (std::fabs(e) > std::fabs(worst)) worst = e;
  }
  const size_t fastest = static_cast<size_t>(
      std::min_element(measured.begin(), measured.end()) - measured.begin());
  const size_t picked = static_cast<size_t>(
      std::find(layouts.begin(), layouts.end(), p.pick) - layouts.begin());
  std::printf(
      "  %d ranks, %s: %d of %d within 15%% (worst %+.0f%%); picks "
      "%s",
      ranks, p.name, within, n, 100 * worst, p.pick.c_str());
  if (picked < layouts.size()) {
    std::printf(", measured %+.1f%% vs the fastest (%s; goal <= 5%%)\n",
                100 * (measured[picked] / measured[fastest] - 1),
                layouts[fastest].c_str());
  } else {
    std::printf(", a layout not measured\n");
  }
}

int StepPart(int steps, int rounds, CalibrationIo* io) {
  auto probe = probe::ProbeNode();
  if (!probe.ok()) return 1;
  control::WorkerInfo node;
  *node.mutable_probe() = *probe;
  // One rank ran the GEMMs: its device peak is the probe's SGEMM rate.
  io->runs.set_gemm_peak_tflops(
      coordinator::ClusterFromProbes({node}, 1).gpu().peak_bf16_tflops());
  io->runs.set_source(absl::StrCat(
      "strata-bench train, model small, ", probe->cpu_cores(), " cores, SGEMM ",
      static_cast<int>(probe->cpu_gflops()), " GFLOP/s"));
  std::vector<Predictions> ways = {{"uncalibrated", nullptr, "", {}}};
  if (io->applied) {
    ways.push_back({"calibrated", &*io->applied, "", {}});
    std::printf("calibration applied: %s\n", io->applied->source().c_str());
  }
  std::printf(
      "step time vs planner prediction, model small, batch %d, "
      "micro-batch %d (probe: %d cores, SGEMM %.0f GFLOP/s at 512^3, size "
      "curve half-dimension %.1f, copy %.1f GB/s, thread handoff %.0f us, "
      "%.0f us on busy cores)\n",
      kBatch, kMicro, probe->cpu_cores(), probe->cpu_gflops(),
      probe->gemm_half_dim(), probe->copy_gbps(),
      1e6 * probe->handoff_latency_s(), 1e6 * probe->busy_handoff_latency_s());
  std::printf("%5s %4s %4s %4s %12s %12s %8s", "ranks", "tp", "pp", "dp",
              "measured s", "predicted s", "error");
  if (io->applied) std::printf(" %12s %8s", "calibrated s", "error");
  std::printf("\n");
  for (int ranks : {2, 4}) {
    *io->runs.add_clusters() = coordinator::ClusterFromProbes({node}, ranks);
    io->runs.add_cluster_ranks(ranks);
    const std::vector<Layout> runs = Layouts(ranks);
    // Every measured step of runs[i], all rounds.
    std::vector<std::vector<double>> seconds;
    if (!MeasureLayouts(runs, steps, rounds, &seconds)) return 1;
    std::vector<std::string> layouts;
    std::vector<double> measured;
    for (Predictions& w : ways) w.predicted.clear();
    for (size_t i = 0; i < runs.size(); ++i) {
      const int tp = runs[i].tp, pp = runs[i].pp, dp = runs[i].dp;
      measured.push_back(Median(seconds[i]));
      layouts.push_back(LayoutName(tp, pp, dp));
      StepMeasurement* sm = io->runs.add_steps();
      sm->set_model("strata-small");
      sm->set_tp(tp);
      sm->set_pp(pp);
      sm->set_dp(dp);
      sm->set_cp(1);
      sm->set_micro_batch(kMicro);
      sm->set_global_batch(kBatch);
      sm->set_seq_length(64);
      for (double x : seconds[i]) sm->add_step_s(x);
      io->runs.add_step_ranks(ranks);
      std::printf("%5d %4d %4d %4d %12.3f", ranks, tp, pp, dp, measured.back());
      for (Predictions& w : ways) {
        Plan pick;
        auto predicted = Predict(node, ranks, tp, pp, dp, w.cal,
                                 w.pick.empty() ? &pick : nullptr);
        if (w.pick.empty() && predicted.ok()) {
          w.pick = LayoutName(pick.tp(), pick.pp(), pick.dp());
        }
        if (!predicted.ok()) {
          w.predicted.push_back(-1);
          std::printf(" %12s  (%s)", "-",
                      predicted.status().ToString().c_str());
          continue;
        }
        w.predicted.push_back(*predicted);
        std::printf(" %12.3f %+7.0f%%", *predicted,
                    100 * (*predicted / measured.back() - 1));
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    for (Predictions& w : ways) Summarise(w, ranks, layouts, measured);
    for (Predictions& w : ways) w.pick.clear();
  }
  return 0;
}

// Writes what bench/torch_peer.py reads: the full model's initial weights
// (strata's Init with the trainer's seed, every tensor in [in, out] layout),
// their names and shapes, the tokens of `steps` steps and the config.
Status WritePeerInputs(const std::string& dir, const train::TrainOptions& o,
                       int steps) {
  train::StageParams full(o.model, train::Parallel{});
  full.Init(o.seed);
  std::ofstream w(dir + "/weights.f32", std::ios::binary);
  w.write(reinterpret_cast<const char*>(full.w.data()),
          static_cast<std::streamsize>(full.w.size() * sizeof(float)));
  std::string names = "[";
  for (const train::ParamShard& s : full.shards) {
    std::string shape;
    for (int64_t d : s.global_shape)
      absl::StrAppend(&shape, shape.empty() ? "" : ",", d);
    absl::StrAppend(&names, names.size() > 1 ? ",\n" : "", "{\"name\":\"",
                    s.name, "\",\"shape\":[", shape, "]}");
  }
  std::ofstream(dir + "/weights.json") << names << "]\n";
  ASSIGN_OR_RETURN(
      train::DataSource data,
      train::DataSource::Open("", o.model.vocab, o.model.seq, o.seed));
  std::vector<int32_t> tokens(static_cast<size_t>(steps) * o.global_batch *
                              (o.model.seq + 1));
  for (int64_t i = 0; i < static_cast<int64_t>(steps) * o.global_batch; ++i) {
    data.Sample(i, &tokens[i * (o.model.seq + 1)]);
  }
  std::ofstream(dir + "/tokens.i32", std::ios::binary)
      .write(reinterpret_cast<const char*>(tokens.data()),
             static_cast<std::streamsize>(tokens.size() * sizeof(int32_t)));
  std::ofstream(dir + "/config.json") << absl::StrCat(
      "{\"vocab\":", o.model.vocab, ",\"seq\":", o.model.seq,
      ",\"hidden\":", o.model.hidden, ",\"heads\":", o.model.heads,
      ",\"layers\":", o.model.layers, ",\"global_batch\":", o.global_batch,
      ",\"micro_batch\":", o.micro_batch, ",\"lr\":", o.lr,
      ",\"warmup\":", o.warmup_steps, "}\n");
  std::ofstream(dir + "/torch_peer.py") << BenchScript("torch_peer");
  return w ? absl::OkStatus()
           : absl::InternalError("cannot write the peer's inputs in " + dir);
}

struct PeerRun {
  int64_t params = 0;
  double first_loss = 0;
  std::vector<double> seconds;
};

// Runs the PyTorch peer on `ranks` processes; nullopt (with a message)
// when torch is missing or the run fails.
std::optional<PeerRun> RunTorch(const std::string& dir, int ranks,
                                int threads) {
  const std::string cmd = absl::StrCat(
      // OpenBLAS, under PyTorch too, starts one thread per CPU unless told.
      // Debian's PyTorch runs its own ops on OpenMP and its GEMMs on
      // OpenBLAS's pthreads: with 2 threads each, OpenMP's idle threads
      // spin and take the cores from OpenBLAS's (1 rank, 2 threads: 300-370
      // tokens/s, against 1,275-1,317 with passive waiting, measured here),
      // so the peer waits passively, as a PyTorch user tuning it would.
      "OPENBLAS_NUM_THREADS=", threads, " OMP_NUM_THREADS=", threads,
      " OMP_WAIT_POLICY=PASSIVE", " /usr/bin/python3 ", dir,
      "/torch_peer.py --dir ", dir, " --ranks ", ranks, " --threads ", threads,
      " --port ", 29500 + getpid() % 1000, " 2>", dir, "/torch.err");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof(buf), p)) out += buf;
  if (pclose(p) != 0) {
    std::ifstream err(dir + "/torch.err");
    std::string text((std::istreambuf_iterator<char>(err)), {});
    if (text.size() > 2000) text = text.substr(text.size() - 2000);
    std::fprintf(stderr, "torch peer failed on %d ranks:\n%s\n", ranks,
                 text.c_str());
    return std::nullopt;
  }
  // {"params": N, "first_loss": X, "step_seconds": [a, b, ...]}
  PeerRun r;
  if (std::sscanf(out.c_str(), "{\"params\": %lld, \"first_loss\": %lf",
                  reinterpret_cast<long long*>(&r.params),
                  &r.first_loss) != 2) {
    std::fprintf(stderr, "torch peer: unexpected output: %s\n", out.c_str());
    return std::nullopt;
  }
  const size_t open = out.find('['), close = out.find(']');
  std::string list = out.substr(open + 1, close - open - 1);
  for (char* tok = std::strtok(list.data(), ","); tok != nullptr;
       tok = std::strtok(nullptr, ",")) {
    r.seconds.push_back(std::atof(tok));
  }
  return r;
}

// Threads per rank for `ranks` ranks: --threads, else strata-train's rule
// with all ranks on this node (train/threads.h).
int Threads(int forced, int ranks) {
  return forced > 0 ? forced : std::max(1, train::AffinityCpus() / ranks);
}

int TorchPart(int steps, int rounds, const std::vector<int>& rank_counts,
              int threads) {
  if (std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) {
    std::printf("--peer torch: skipped, python3-torch is not installed\n");
    return 0;
  }
  const train::TrainOptions o = Small();
  char tmpl[] = "/tmp/strata-bench-torch-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  if (Status st = WritePeerInputs(dir, o, steps + 1); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  const double tokens_per_step =
      static_cast<double>(o.global_batch) * o.model.seq;
  std::printf(
      "strata vs PyTorch %s, model small (%lld parameters), batch %d, "
      "micro-batch %d, %d CPUs, median of %d steps each (%d interleaved "
      "rounds)\n",
      "(python3-torch)", static_cast<long long>(train::ParameterCount(o.model)),
      o.global_batch, o.micro_batch, train::AffinityCpus(), steps * rounds,
      rounds);
  std::printf("%5s %7s %-14s %12s %12s %7s   %s\n", "ranks", "threads",
              "strata layout", "strata tok/s", "torch tok/s", "ratio",
              "first-step loss strata / torch");
  int rc = 0;
  for (int ranks : rank_counts) {
    // OpenBLAS's thread count is per process: ranks as threads share it.
    const int per_rank = Threads(threads, ranks);
    openblas_set_num_threads(per_rank);
    // Strata's best layout: the smallest median over interleaved rounds of
    // every layout (one pass picked a slow layout often enough to cost
    // 0.1x of the ratio on 4 ranks).
    const std::vector<Layout> layouts = Layouts(ranks);
    std::vector<std::vector<double>> seconds;
    if (!MeasureLayouts(layouts, steps, rounds, &seconds)) return 1;
    double best_s = 1e30, first_loss = 0;
    Layout best = layouts.front();
    for (size_t i = 0; i < layouts.size(); ++i) {
      if (const double m = Median(seconds[i]); m < best_s) {
        best_s = m;
        best = layouts[i];
      }
    }
    const std::string best_name = LayoutName(best.tp, best.pp, best.dp);
    // Then that layout and the peer in interleaved rounds (which goes first
    // alternates), each side's figure the median of its steps over all
    // rounds: the machine's drift lands on both, and strata's figure is not
    // the luckiest of several layouts' medians.
    std::vector<double> strata_s, torch_s;
    std::optional<PeerRun> torch;
    bool peer_failed = false;
    for (int round = 0; round < rounds && !peer_failed; ++round) {
      for (int side = 0; side < 2; ++side) {
        if ((side + round) % 2 == 0) {
          if (!MeasureSteps(o, best, steps, &strata_s, &first_loss)) return 1;
          continue;
        }
        torch = RunTorch(dir, ranks, per_rank);
        if (!torch) {
          peer_failed = true;
          break;
        }
        torch_s.insert(torch_s.end(), torch->seconds.begin() + 1,
                       torch->seconds.end());
      }
    }
    if (peer_failed) {
      rc = 1;
      continue;
    }
    if (torch->params != train::ParameterCount(o.model)) {
      std::fprintf(stderr, "parameter counts differ: strata %lld, torch %lld\n",
                   static_cast<long long>(train::ParameterCount(o.model)),
                   static_cast<long long>(torch->params));
      rc = 1;
    }
    const double gap = std::fabs(torch->first_loss - first_loss) /
                       std::max(1e-9, std::fabs(first_loss));
    if (gap > 1e-3) {
      std::fprintf(stderr,
                   "first-step losses differ by %.2g (strata %.6f, torch "
                   "%.6f): not the same work\n",
                   gap, first_loss, torch->first_loss);
      rc = 1;
    }
    const double strata_tps = tokens_per_step / Median(strata_s);
    const double torch_tps = tokens_per_step / Median(torch_s);
    std::printf("%5d %7d %-14s %12.0f %12.0f %6.2fx   %.6f / %.6f\n", ranks,
                per_rank, best_name.c_str(), strata_tps, torch_tps,
                strata_tps / torch_tps, first_loss, torch->first_loss);
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
  return rc;
}

int TrainBench(int argc, char** argv) {
  CLI::App app{"strata-bench train: trainer GEMMs and step times vs planner"};
  int steps = 3;
  int rounds = 3;
  std::string peer;
  std::vector<int> peer_ranks = {1, 2, 4};
  int threads = 0;
  std::string measurements, calibration;
  app.add_option("--measurements", measurements,
                 "write the measured GEMMs and step times as JSON for "
                 "`strata plan --calibrate`");
  app.add_option("--calibration", calibration,
                 "predict with this stored calibration (strata plan "
                 "--calibrate writes it)");
  app.add_option("--steps", steps, "measured steps per run")
      ->check(CLI::Range(1, 1000));
  app.add_option("--rounds", rounds,
                 "interleaved rounds of --steps measured steps: of every "
                 "layout (step times), or of strata's best layout and the "
                 "peer (--peer)")
      ->check(CLI::Range(1, 100));
  app.add_option("--peer", peer,
                 "also run the same model in this framework and print the "
                 "tokens/s ratio")
      ->check(CLI::IsMember({"torch"}));
  app.add_option("--peer-ranks", peer_ranks, "rank counts of the --peer runs")
      ->check(CLI::IsMember({1, 2, 4}));
  app.add_option("--threads", threads,
                 "--peer runs: threads per rank on both sides (default: "
                 "this process's CPUs / ranks, at least 1)")
      ->check(CLI::Range(1, 256));
  CLI11_PARSE(app, argc, argv);
  if (peer == "torch") return TorchPart(steps, rounds, peer_ranks, threads);
  CalibrationIo io;
  if (!calibration.empty()) {
    auto cal = planner::LoadCalibration(calibration);
    if (!cal.ok()) {
      std::fprintf(stderr, "%s\n", cal.status().ToString().c_str());
      return 2;
    }
    io.applied = *cal;
    io.applied->set_source(calibration);
  }
  openblas_set_num_threads(1);
  if (int rc = GemmPart(steps, &io); rc != 0) return rc;
  const int rc = StepPart(steps, rounds, &io);
  if (rc == 0 && !measurements.empty()) {
    std::ofstream(measurements) << MessageToJson(io.runs, true) << "\n";
    std::printf("measurements written to %s\n", measurements.c_str());
  }
  return rc;
}

}  // namespace

STRATA_BENCH("train", "trainer GEMMs vs bare sgemm; step times vs planner",
             TrainBench);

}  // namespace strata::bench
