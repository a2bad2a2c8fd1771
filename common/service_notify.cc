#include "common/service_notify.h"

#include <systemd/sd-daemon.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace strata {

ServiceNotifier::ServiceNotifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && socket[0] != '\0';
  uint64_t usec = 0;
  // > 0 when $WATCHDOG_USEC is set for this process (systemd checks
  // $WATCHDOG_PID against getpid(), so a rank that inherited it gets 0).
  if (enabled_ && sd_watchdog_enabled(/*unset_environment=*/0, &usec) > 0) {
    watchdog_ms_ = static_cast<int64_t>(usec / 1000);
  }
}

void ServiceNotifier::Ready(const char* status) {
  if (!enabled_ || ready_sent_) return;
  ready_sent_ = true;
  const std::string msg = std::string("READY=1\nSTATUS=") + status;
  sd_notify(/*unset_environment=*/0, msg.c_str());
}

void ServiceNotifier::Tick(int64_t now_ms) {
  if (!enabled_ || watchdog_ms_ <= 0) return;
  if (last_ping_ms_ >= 0 && now_ms - last_ping_ms_ < watchdog_ms_ / 2) return;
  last_ping_ms_ = now_ms;
  sd_notify(0, "WATCHDOG=1");
}

void ServiceNotifier::Stopping() {
  if (enabled_) sd_notify(0, "STOPPING=1");
}

}  // namespace strata
