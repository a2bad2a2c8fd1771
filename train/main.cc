// strata-train: the reference trainer. Trains the GPT of
// train/model.h with the parallelism from the flags or the environment
// (Runtime::FromEnv), prints `step=N loss=X tokens_per_s=Y` once per step
// from the rank of the last stage with tp and dp rank 0, checkpoints every
// --ckpt-every steps and resumes (--resume) under any parallelism.
// Exit codes: 2 bad flags or an impossible split, 1 runtime failure.
#include <cblas.h>

#include <cmath>
#include <cstdio>

#include "CLI/CLI.hpp"
#include "common/logging.h"
#include "runtime/runtime.h"
#include "train/trainer.h"

extern "C" void openblas_set_num_threads(int);

namespace {
int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "strata-train: %s\n", message.c_str());
  return code;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata-train: GPT on CPU with TP/PP/DP/ZeRO-1 over strata"};
  std::string model = "tiny", ckpt, data;
  int steps = 20, tp = 0, pp = 0, dp = 0, micro = 1, batch = 8, zero = 0,
      ckpt_every = 0, warmup = 10;
  uint64_t seed = 1234;
  float lr = 1e-3f;
  bool resume = false;
  app.add_option("--model", model, "tiny | small")->capture_default_str();
  app.add_option("--steps", steps, "train until this step")
      ->check(CLI::Range(0, 10000000));
  app.add_option("--tp", tp, "tensor-parallel size (default: STRATA_TP or 1)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--pp", pp, "pipeline stages (default: STRATA_PP or 1)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--dp", dp, "data-parallel size (checked: world / (tp pp))")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--micro-batch", micro, "sequences per micro-batch")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--global-batch", batch, "sequences per step")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--zero", zero, "1: ZeRO-1 (sharded Adam states)")
      ->check(CLI::IsMember({0, 1}));
  app.add_option("--seed", seed, "initialisation and data seed");
  app.add_option("--lr", lr, "peak learning rate")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "linear warm-up steps")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--data", data, "train on the bytes of this text file");
  app.add_option("--ckpt", ckpt, "checkpoint URI (default: STRATA_CKPT_URI)");
  app.add_option("--ckpt-every", ckpt_every, "checkpoint every K steps")
      ->check(CLI::Range(0, 1 << 20));
  app.add_flag("--resume", resume,
               "continue from the latest committed checkpoint");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  openblas_set_num_threads(1);  // one BLAS thread per rank

  auto cfg = strata::train::ModelPreset(model);
  if (!cfg.ok()) return Fail(2, std::string(cfg.status().message()));
  auto info = strata::ReadRankEnv({.tp = tp, .pp = pp});
  if (!info.ok()) return Fail(2, std::string(info.status().message()));
  if (dp > 0 && dp != info->dp) {
    return Fail(2, "--dp " + std::to_string(dp) + " but world size " +
                       std::to_string(info->world_size) + " / (tp " +
                       std::to_string(info->tp) + " x pp " +
                       std::to_string(info->pp) +
                       ") = " + std::to_string(info->dp));
  }
  if (info->cp != 1) return Fail(2, "strata-train does not implement cp > 1");
  strata::train::TrainOptions o;
  o.model = *cfg;
  o.par = {info->tp,      info->pp,      info->dp,
           info->tp_rank, info->pp_rank, info->dp_rank};
  if (auto s = strata::train::ValidateSplit(o.model, o.par, batch, micro);
      !s.ok()) {
    return Fail(2, std::string(s.message()));
  }
  auto rt = strata::Runtime::FromEnv({.tp = info->tp, .pp = info->pp});
  if (!rt.ok()) return Fail(1, rt.status().ToString());
  o.global_batch = batch;
  o.micro_batch = micro;
  o.zero1 = zero == 1;
  o.seed = seed;
  o.lr = lr;
  o.warmup_steps = warmup;
  o.data_file = data;
  o.ckpt_uri = ckpt.empty() ? info->ckpt_uri : ckpt;
  o.ckpt_every = ckpt_every;
  strata::train::TrainGroups g{(*rt)->tp(),    (*rt)->pp(), (*rt)->dp(),
                               (*rt)->store(), info->rank,  info->world_size};
  auto trainer = strata::train::Trainer::Create(o, g);
  if (!trainer.ok()) return Fail(2, std::string(trainer.status().message()));
  const bool printer =
      info->pp_rank == info->pp - 1 && info->tp_rank == 0 && info->dp_rank == 0;
  if (resume) {
    auto from = (*trainer)->Resume();
    if (!from.ok()) return Fail(1, "resume: " + from.status().ToString());
    if (printer && *from > 0) {
      std::printf("resumed step=%lld tp=%d pp=%d dp=%d\n",
                  static_cast<long long>(*from), info->tp, info->pp, info->dp);
    }
  }
  if (printer) {
    std::printf(
        "model=%s params=%lld tp=%d pp=%d dp=%d zero=%d global_batch=%d\n",
        model.c_str(),
        static_cast<long long>(strata::train::ParameterCount(*cfg)), info->tp,
        info->pp, info->dp, zero, batch);
    std::fflush(stdout);
  }
  while ((*trainer)->step() < steps) {
    auto r = (*trainer)->Step();
    if (!r.ok()) return Fail(1, r.status().ToString());
    // Cumulative: sections named *_total are running totals (docs/runtime.md).
    (*rt)->timer().Add("checkpoint_stall_total",
                       (*trainer)->checkpoint_stall_s());
    (*rt)->timer().EndStep(r->step, r->tokens,
                           info->pp_rank == info->pp - 1 ? r->loss : NAN);
    if (printer) {
      std::printf("step=%lld loss=%.8f tokens_per_s=%.1f\n",
                  static_cast<long long>(r->step), r->loss,
                  r->tokens / r->seconds);
      std::fflush(stdout);
    }
  }
  if (auto s = (*trainer)->Finish(); !s.ok()) {
    return Fail(1, "checkpoint: " + s.ToString());
  }
  if (printer) {
    std::printf("done steps=%lld ckpt_stall_s=%.4f\n",
                static_cast<long long>((*trainer)->step()),
                (*trainer)->checkpoint_stall_s());
  }
  return 0;
}
