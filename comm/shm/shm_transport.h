// Shared-memory transport for ranks on one node: one POSIX shared-memory
// segment holds a single-producer/single-consumer byte ring per ordered pair
// of ranks, and two slots per rank for the all-reduce of every rank through
// shared memory (Transport::SharedAllReduce); no sockets on the data path.
// Rank 0 creates the segment and publishes its name in the store; it is
// unlinked as soon as every rank has mapped it, so nothing leaks if ranks
// die.
//
// Waiting: a rank that cannot move data (or waits in a shared all-reduce's
// barrier) spins briefly (yielding between polls when the node has fewer
// cores than ranks), then sleeps on a futex in the segment until a peer
// moves a ring or barrier counter, so waiting ranks leave the cores to the
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
  // Bytes of the ring of each ordered pair of ranks; a power of two, or 0
  // for DefaultShmRingBytes(size).
  size_t ring_bytes = 0;
  // Bytes of each of a rank's two shared all-reduce slots (the chunk of
  // Transport::SharedAllReduce); a multiple of 64, or 0 for
  // DefaultShmSlotBytes(size).
  size_t slot_bytes = 0;
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
};

// The default ring: as large as a 64 MiB segment allows (size^2 rings),
// between 512 KiB and 4 MiB, a power of two. A sender runs ahead of its
// receiver by at most one ring, so a larger ring lets a rank finish a step's
// sends while its peer is off the CPU instead of stopping every 512 KiB
// until both run at once (measured on a loaded 2-core VM, docs/comm.md).
size_t DefaultShmRingBytes(int size);

// The default slot: 16 MiB over the 2*size slots, between 256 KiB and
// 2 MiB (2 MiB for 2-4 ranks): a 1 MiB all-reduce is one chunk, and the
// slots of 4 ranks stay within this VM's 32 MiB L3 beside the rings.
size_t DefaultShmSlotBytes(int size);

StatusOr<std::unique_ptr<Transport>> ConnectShmTransport(
    std::shared_ptr<Store> store, int rank, int size, const ShmOptions& opts);

}  // namespace strata::comm
