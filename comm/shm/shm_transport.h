// Shared-memory transport for ranks on one node: one POSIX shared-memory
// segment holds a single-producer/single-consumer byte ring per ordered pair
// of ranks; no sockets on the data path. Rank 0 creates the segment and
// publishes its name in the store; it is unlinked as soon as every rank has
// mapped it, so nothing leaks if ranks die.
//
// Waiting: a rank that cannot move data spins briefly (not at all when the
// node has fewer cores than ranks), then sleeps on a futex in the segment
// until a peer moves a ring counter, so waiting ranks leave the cores to the
// ranks they wait for.
//
// Liveness: a waiting rank checks its peer's pid (kill(pid, 0)) at least
// every 5 ms, so a dead peer gives Unavailable naming it instead of a wait
// until the deadline.
// Abort() also raises a flag in the segment that aborts every rank's
// pending and later operations.
#pragma once

#include <memory>

#include "comm/store.h"
#include "comm/transport.h"

namespace strata::comm {

struct ShmOptions {
  size_t ring_bytes = 512 << 10;  // per ordered pair; a power of two
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
};

StatusOr<std::unique_ptr<Transport>> ConnectShmTransport(
    std::shared_ptr<Store> store, int rank, int size, const ShmOptions& opts);

}  // namespace strata::comm
