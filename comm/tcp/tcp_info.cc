// Only <linux/tcp.h> has the fields after tcpi_total_retrans; it cannot be
// included next to <netinet/tcp.h>, so this file stays apart.
#include "comm/tcp/tcp_info.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>

namespace strata::comm::tcp {

StatusOr<SendCounters> ReadSendCounters(int fd) {
  struct tcp_info info {};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) {
    return ErrnoToStatus(errno, "getsockopt(TCP_INFO)");
  }
  // The kernel copies only the fields it knows.
  if (len < offsetof(struct tcp_info, tcpi_rwnd_limited) +
                sizeof(info.tcpi_rwnd_limited)) {
    return absl::FailedPreconditionError(
        "TCP_INFO without tcpi_busy_time/tcpi_rwnd_limited (Linux < 4.10)");
  }
  const int64_t busy = static_cast<int64_t>(info.tcpi_busy_time) -
                       static_cast<int64_t>(info.tcpi_rwnd_limited);
  return SendCounters{static_cast<int64_t>(info.tcpi_bytes_acked),
                      busy > 0 ? busy : 0};
}

}  // namespace strata::comm::tcp
