// Telling systemd how a daemon is doing (sd_notify(3), the Type=notify
// protocol): READY=1 once the daemon serves, WATCHDOG=1 from its event loop
// at half of WatchdogSec (sd_watchdog_enabled(3) recommends pinging at half
// the interval), STOPPING=1 when it shuts down. strata-coordinator and
// strata-worker use it under deploy/systemd/.
//
// Outside systemd ($NOTIFY_SOCKET unset) every call is a cheap no-op, so the
// daemons behave the same under `strata run`, Slurm or a container.
// Single-threaded: call from the daemon's event-loop thread.
#pragma once

#include <cstdint>

namespace strata {

class ServiceNotifier {
 public:
  // Reads $NOTIFY_SOCKET and $WATCHDOG_USEC (left in the environment: the
  // ranks a worker forks inherit them, and sd_notify from a rank would be
  // refused by NotifyAccess=main anyway).
  ServiceNotifier();

  // READY=1 plus a STATUS= line shown by `systemctl status`; only the first
  // call sends.
  void Ready(const char* status);
  // WATCHDOG=1 when at least half the watchdog interval passed since the
  // last ping; `now_ms` is a monotonic clock. No-op without WatchdogSec.
  void Tick(int64_t now_ms);
  void Stopping();

  bool enabled() const { return enabled_; }
  int64_t watchdog_interval_ms() const { return watchdog_ms_; }

 private:
  bool enabled_ = false;
  bool ready_sent_ = false;
  int64_t watchdog_ms_ = 0;  // 0: no watchdog
  int64_t last_ping_ms_ = -1;
};

}  // namespace strata
