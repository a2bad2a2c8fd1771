#include "fault/liveness.h"

#include <algorithm>

namespace strata::fault {

Liveness::Liveness(const Clock& clock, int64_t lost_after_ms)
    : clock_(clock),
      lost_after_ms_(lost_after_ms),
      grace_from_ms_(clock.SteadyNowMs()) {}

void Liveness::Beat(const std::string& id) {
  Peer& p = peers_[id];
  p.last_beat_ms = clock_.SteadyNowMs();
  p.alive = true;
}

std::vector<std::string> Liveness::Check() {
  std::vector<std::string> lost;
  const int64_t now = clock_.SteadyNowMs();
  for (auto& [id, p] : peers_) {
    const int64_t since = std::max(p.last_beat_ms, grace_from_ms_);
    if (p.alive && now - since > lost_after_ms_) {
      p.alive = false;
      lost.push_back(id);
    }
  }
  return lost;
}

bool Liveness::Alive(const std::string& id) const {
  auto it = peers_.find(id);
  return it != peers_.end() && it->second.alive;
}

void Liveness::GraceAfterPause() { grace_from_ms_ = clock_.SteadyNowMs(); }

bool Liveness::Settling() const {
  return clock_.SteadyNowMs() - grace_from_ms_ <= lost_after_ms_;
}

}  // namespace strata::fault
