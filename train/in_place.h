// strata-train's side of an in-place restart (docs/fault.md "In-place
// restart", docs/train.md `--in-place-restart`): how a surviving rank goes
// on after its step failed, and how a replacement rank starts.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"
#include "runtime/runtime.h"
#include "train/trainer.h"

namespace strata::train {

// How long a rank whose step failed waits for the coordinator to announce
// the next generation: the hang deadline's floor (3 s, docs/fault.md
// "Hangs") plus the diagnosis wait (5 s) plus a worker report, with a wide
// margin. Without an announcement the rank exits with the step's error
// and the coordinator restarts the whole attempt.
inline constexpr std::chrono::milliseconds kAwaitGeneration{60000};

struct Rejoined {
  int generation = 0;
  int64_t step = 0;     // the step every rank goes on from
  bool loaded = false;  // this rank loaded it (its memory held another)
  double seconds = 0;   // from the call to the agreement
};

// Whether a failed step is one an in-place restart can recover: the
// runtime opted in and the error is a collective's (Aborted, Unavailable,
// DeadlineExceeded) or a newer generation was announced. A step that fails
// with such a code for another reason (too many failed saves is Aborted)
// waits kAwaitGeneration for nothing before the rank exits with it.
bool Recoverable(const Runtime& rt, const Status& step_error);

// A survivor: waits for the generation, drops the trainer's hold on the old
// groups, re-forms them, agrees on the step (its memory when consistent,
// else the newest checkpoint of either tier) and loads that step if its memory holds
// another.
StatusOr<Rejoined> RejoinInPlace(Runtime& rt, Trainer& trainer);

// A replacement (started with generation > 0): agrees on the step with the
// survivors from the newest checkpoint it can load (memory tier or durable:
// Trainer::NewestSavedStep), then loads it.
StatusOr<Rejoined> JoinAsReplacement(Runtime& rt, Trainer& trainer);

}  // namespace strata::train
