// Runs the Trainer with every rank as a thread (tests and strata-bench
// train): the loss and time of each step as seen by rank 0. The ranks talk
// over in-process pipes (tests), or over the shm transport that ranks of
// one node use in a real job (strata-bench: its figures are of strata's
// own intra-node collectives, not of the test pipes, which allocate and
// copy every message).
#pragma once

#include <thread>
#include <vector>

#include "comm/plan_groups.h"
#include "comm/shm/shm_transport.h"
#include "placement/layout.h"
#include "runtime/runtime.h"
#include "train/trainer.h"

namespace strata::train {

struct ThreadRun {
  std::vector<double> losses;   // per step run
  std::vector<double> seconds;  // per step run
  Status status;
  int64_t resumed_at = 0;
};

enum class ThreadTransport { kInProcess, kShm };

inline ThreadRun RunThreads(
    TrainOptions base, int tp, int pp, int dp, int steps, bool resume = false,
    ThreadTransport transport = ThreadTransport::kInProcess) {
  const int n = tp * pp * dp;
  auto placed = placement::UniformPlacement(tp, pp, dp, 1, n);
  if (!placed.ok()) {
    ThreadRun failed;
    failed.status = placed.status();
    return failed;
  }
  const Placement& pl = *placed;
  // In-process pipes are made for all ranks at once; shm ranks connect
  // each on its own thread, through the store.
  std::vector<std::unique_ptr<comm::Transport>> pipes;
  if (transport == ThreadTransport::kInProcess) {
    pipes = comm::NewInProcessTransports(n);
  }
  auto store = comm::NewInMemoryStore();
  std::vector<ThreadRun> runs(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    std::shared_ptr<comm::Transport> pipe;
    if (!pipes.empty()) pipe = std::move(pipes[r]);
    threads.emplace_back([&, r, pipe] {
      ThreadRun& out = runs[r];
      std::shared_ptr<comm::Transport> world = pipe;
      if (world == nullptr) {
        auto shm = comm::ConnectShmTransport(comm::NewPrefixStore("shm", store),
                                             r, n, comm::ShmOptions{});
        if (!shm.ok()) {
          out.status = shm.status();
          return;
        }
        world = std::move(*shm);
      }
      auto groups = comm::BuildPlanGroups(world, pl, comm::GroupOptions{});
      if (!groups.ok()) {
        out.status = groups.status();
        return;
      }
      TrainOptions o = base;
      const RankPlacement& me = pl.ranks(r);
      o.par = {tp,
               pp,
               dp,
               me.tp_rank(),
               me.pp_rank(),
               me.dp_rank(),
               base.par.stage_layers};
      TrainGroups g{(*groups)->tp.get(),
                    (*groups)->pp.get(),
                    (*groups)->dp.get(),
                    store,
                    r,
                    n};
      auto trainer = Trainer::Create(o, g);
      if (!trainer.ok()) {
        out.status = trainer.status();
        return;
      }
      if (resume) {
        auto at = (*trainer)->Resume();
        if (!at.ok()) {
          out.status = at.status();
          return;
        }
        out.resumed_at = *at;
      }
      while ((*trainer)->step() < steps) {
        auto s = (*trainer)->Step();
        if (!s.ok()) {
          out.status = s.status();
          // Unblock peers waiting on this rank.
          (*groups)->tp->Abort();
          (*groups)->pp->Abort();
          (*groups)->dp->Abort();
          return;
        }
        out.losses.push_back(s->loss);
        out.seconds.push_back(s->seconds);
      }
      out.status = (*trainer)->Finish();
    });
  }
  for (auto& t : threads) t.join();
  for (auto& r : runs) {
    if (!r.status.ok()) return r;
  }
  return runs[0];
}

}  // namespace strata::train
