#include "worker/clock_sync.h"

#include <vector>

namespace strata::worker {

void ClockSync::Add(int64_t local_send_us, int64_t remote_us,
                    int64_t local_recv_us, int64_t remote_recv_us) {
  if (remote_us <= 0 || local_recv_us < local_send_us) return;
  samples_.push_back({local_send_us * 1000, remote_us * 1000,
                      local_recv_us * 1000, remote_recv_us * 1000});
  if (samples_.size() > static_cast<size_t>(kSamples)) samples_.pop_front();
}

std::optional<control::ClockEstimate> ClockSync::Estimate() const {
  const observe::ClockOffset o = observe::EstimateClockOffset(
      std::vector<observe::ClockSample>(samples_.begin(), samples_.end()));
  if (o.error_bound_ns < 0) return std::nullopt;
  control::ClockEstimate e;
  e.set_offset_us(o.offset_ns / 1000);
  e.set_error_us((o.error_bound_ns + 999) / 1000);
  return e;
}

}  // namespace strata::worker
