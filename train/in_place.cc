#include "train/in_place.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace strata::train {
namespace {

using Clock = std::chrono::steady_clock;

StatusOr<Rejoined> Agree(Runtime& rt, Trainer& trainer, int64_t memory,
                         Clock::time_point t0) {
  // The newest committed step of the memory or the durable tier (0: none).
  const int64_t ckpt = std::max<int64_t>(trainer.NewestSavedStep(), 0);
  ASSIGN_OR_RETURN(int64_t at, rt.AgreeStep(memory, ckpt));
  Rejoined out;
  out.generation = rt.generation();
  out.step = at;
  if (at != memory) {
    auto loaded = trainer.LoadStep(at);
    if (!loaded.ok()) {
      return Status(loaded.status().code(),
                    absl::StrCat("in-place restart: the ranks agreed on step ",
                                 at, ", which this rank cannot load: ",
                                 loaded.status().message()));
    }
    out.loaded = true;
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

}  // namespace

bool Recoverable(const Runtime& rt, const Status& e) {
  if (!rt.in_place() || e.ok()) return false;
  return rt.announced_generation() > rt.generation() || absl::IsAborted(e) ||
         absl::IsUnavailable(e) || absl::IsDeadlineExceeded(e);
}

StatusOr<Rejoined> RejoinInPlace(Runtime& rt, Trainer& trainer) {
  const auto t0 = Clock::now();
  RETURN_IF_ERROR(rt.AwaitGeneration(kAwaitGeneration).status());
  trainer.Abandon();
  RETURN_IF_ERROR(rt.Reform());
  const RankInfo& i = rt.info();
  RETURN_IF_ERROR(trainer.Rejoin(
      {rt.tp(), rt.pp(), rt.dp(), rt.store(), i.rank, i.world_size}));
  return Agree(rt, trainer, trainer.state_consistent() ? trainer.step() : -1,
               t0);
}

StatusOr<Rejoined> JoinAsReplacement(Runtime& rt, Trainer& trainer) {
  return Agree(rt, trainer, -1, Clock::now());
}

}  // namespace strata::train
