// Where a shm rank that cannot progress sleeps, and what its waits cost.
//
// A Doorbell lives in the shared segment, one per rank. Its owner sleeps on
// it (a shared futex) and every rank that moves a ring counter the owner may
// wait on rings it afterwards. No lost wake-up (the Dekker pattern, both
// sides seq_cst):
//  - owner: store sleeping = 1; fence; s = seq; re-check the rings; futex
//    wait while seq == s; store sleeping = 0;
//  - waker: store head or tail (release); fence; if sleeping, exchange it
//    to 0 and, if it was 1: stamp the time, seq += 1, futex wake.
// Either the owner's re-check sees the new counter, or a waker sees
// `sleeping` and bumps `seq`, which makes the futex wait return at once or
// wakes it. Only the waker that took `sleeping` rings; the owner re-checks
// every ring when it runs, so one ring per sleep is enough.
//
// WaitStats counts, per transport, how waits ended and how long a sleeper
// took to run again after it was rung (rung_ns is CLOCK_MONOTONIC, one clock
// for every process of the node). STRATA_SHM_STATS=1 prints them to stderr
// when the transport is destroyed (shm_transport.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace strata::comm::shm {

inline constexpr size_t kCacheLine = 64;

struct alignas(kCacheLine) Doorbell {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleeping{0};
  // When the last waker rang (ns on CLOCK_MONOTONIC); written before seq.
  std::atomic<int64_t> rung_ns{0};
};
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t),
              "futex words must be plain 32-bit integers");

int64_t MonotonicNs();

// Sleeps while bell.seq == expected, at most `ms` milliseconds. Returns
// whether seq moved (a ring, or one that came before the wait started);
// false on timeout or a signal.
bool SleepOn(Doorbell& bell, uint32_t expected, int ms);

// Rings `bell` if its owner sleeps (always, with `force`); call after
// storing a counter the owner may wait on. Returns whether it made the
// futex-wake system call.
bool Ring(Doorbell& bell, bool force = false);

struct WaitStats {
  uint64_t waits = 0;      // times a rank found nothing to move
  uint64_t by_spin = 0;    // ... and the peer moved within the spin budget
  uint64_t sleeps = 0;     // futex waits
  uint64_t rung = 0;       // ... that a peer's ring ended
  uint64_t naps = 0;       // ... that timed out (5 ms) instead
  uint64_t yields = 0;     // sched_yield calls while spinning
  uint64_t rings = 0;      // futex wakes this rank made
  int64_t spin_ns = 0;     // time spent spinning
  int64_t sleep_ns = 0;    // time spent in futex waits
  // Ring-to-running latency of rung sleeps: < 10 us, < 100 us, < 1 ms,
  // < 10 ms, >= 10 ms.
  uint64_t wake_hist[5] = {};
  int64_t wake_ns = 0, wake_max_ns = 0;

  void AddWake(int64_t ns);
  std::string Format() const;
};

}  // namespace strata::comm::shm
