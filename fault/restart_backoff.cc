#include "fault/restart_backoff.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace strata::fault {

int64_t RestartDelayMs(int consecutive, const RestartBackoffOptions& o) {
  if (consecutive <= o.immediate_restarts) return 0;
  const int doublings = consecutive - o.immediate_restarts - 1;
  // In doubles, so 1,000 failures do not overflow before the cap applies.
  const double ms = static_cast<double>(o.initial_ms) *
                    std::pow(std::max(1.0, o.multiplier), doublings);
  return ms >= static_cast<double>(o.max_ms) ? o.max_ms
                                             : static_cast<int64_t>(ms);
}

RestartBackoff::Decision RestartBackoff::OnFailure(int64_t ran_ms,
                                                   bool progressed,
                                                   int64_t now_ms) {
  Decision d;
  const bool healthy = progressed || ran_ms >= options_.healthy_ms;
  d.reset = consecutive_ > 0 && healthy;
  consecutive_ = healthy ? 1 : consecutive_ + 1;
  d.consecutive = consecutive_;
  d.delay_ms = RestartDelayMs(consecutive_, options_);
  not_before_ms_ = now_ms + d.delay_ms;
  d.not_before_ms = not_before_ms_;
  return d;
}

std::string RestartBackoff::Decision::Describe() const {
  if (delay_ms == 0) {
    return absl::StrFormat("restart at once (failure %d in a row)",
                           consecutive);
  }
  return absl::StrFormat("next attempt in %.1f s (backoff: failure %d in a row)",
                         delay_ms / 1000.0, consecutive);
}

}  // namespace strata::fault
