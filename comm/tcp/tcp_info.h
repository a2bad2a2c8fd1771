// The kernel's send-side counters of a TCP connection (getsockopt
// TCP_INFO), for slow-link detection (docs/fault.md "Slow links").
#pragma once

#include <cstdint>

#include "common/status.h"

namespace strata::comm::tcp {

struct SendCounters {
  // tcpi_bytes_acked: bytes the peer acknowledged (Linux 4.1+).
  int64_t bytes_acked = 0;
  // tcpi_busy_time - tcpi_rwnd_limited: microseconds the connection had
  // data queued or in flight, less the time the receiver's window was
  // closed (Linux 4.10+; the kernel counts both in scheduler ticks, so
  // short sends read 0 or one tick). Time the application had nothing to
  // send is not in it, which is what makes bytes / busy a link's own rate
  // even inside a collective that waits for other links; time the
  // receiving process did not read (a slow or stopped node) is not the
  // link's either, and without taking it out a slow node made every link
  // into it look slow.
  int64_t busy_us = 0;
};

// FailedPrecondition on kernels too old to fill both fields; the errno of
// getsockopt otherwise.
StatusOr<SendCounters> ReadSendCounters(int fd);

}  // namespace strata::comm::tcp
