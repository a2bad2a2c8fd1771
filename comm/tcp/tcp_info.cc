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
  if (len < offsetof(struct tcp_info, tcpi_busy_time) +
                sizeof(info.tcpi_busy_time)) {
    return absl::FailedPreconditionError(
        "TCP_INFO without tcpi_busy_time (Linux < 4.10)");
  }
  return SendCounters{static_cast<int64_t>(info.tcpi_bytes_acked),
                      static_cast<int64_t>(info.tcpi_busy_time)};
}

}  // namespace strata::comm::tcp
