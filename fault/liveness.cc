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
  beats_.emplace_back(p.last_beat_ms, id);
}

std::vector<std::string> Liveness::Check() {
  std::vector<std::string> lost;
  const int64_t now = clock_.SteadyNowMs();
  // Windows start at max(beat, grace); grace is common to all, so the
  // front of beats_ is always the first to expire.
  while (!beats_.empty() &&
         now - std::max(beats_.front().first, grace_from_ms_) >
             lost_after_ms_) {
    auto& [beat_ms, id] = beats_.front();
    Peer& p = peers_[id];
    if (p.alive && p.last_beat_ms == beat_ms) {
      p.alive = false;
      lost.push_back(id);
    }
    beats_.pop_front();
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
