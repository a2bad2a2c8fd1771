#include "comm/shm/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "absl/strings/str_format.h"

namespace strata::comm::shm {

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

bool SleepOn(Doorbell& bell, uint32_t expected, int ms) {
  timespec ts{0, static_cast<long>(ms) * 1'000'000};
  // Shared (not FUTEX_PRIVATE): the word lives in a segment mapped by other
  // processes. EAGAIN (value changed), EINTR and ETIMEDOUT all mean: look.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell.seq), FUTEX_WAIT,
          expected, &ts, nullptr, 0);
  return bell.seq.load(std::memory_order_acquire) != expected;
}

bool Ring(Doorbell& bell, bool force) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // The first waker takes `sleeping` (1 -> 0) and rings; later ones see 0
  // until the owner sleeps again, so a sleeper gets one wake system call,
  // not one per chunk its peers move before it runs (measured with 4 ranks
  // on 2 cores: 480k wakes for 55k sleeps per rank, docs/comm.md).
  if (!force && (bell.sleeping.load(std::memory_order_relaxed) == 0 ||
                 bell.sleeping.exchange(0, std::memory_order_seq_cst) == 0)) {
    return false;
  }
  bell.rung_ns.store(MonotonicNs(), std::memory_order_relaxed);
  bell.seq.fetch_add(1, std::memory_order_seq_cst);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell.seq), FUTEX_WAKE,
          INT_MAX, nullptr, nullptr, 0);
  return true;
}

void WaitStats::AddWake(int64_t ns) {
  ns = std::max<int64_t>(ns, 0);
  const int bucket = ns < 10'000        ? 0
                     : ns < 100'000     ? 1
                     : ns < 1'000'000   ? 2
                     : ns < 10'000'000  ? 3
                                        : 4;
  ++wake_hist[bucket];
  wake_ns += ns;
  wake_max_ns = std::max(wake_max_ns, ns);
}

std::string WaitStats::Format() const {
  return absl::StrFormat(
      "waits %d (by spin %d, spin %.1f ms, yields %d); sleeps %d (rung %d, "
      "timed out %d, asleep %.1f ms); rings sent %d; ring-to-run "
      "<10us %d <100us %d <1ms %d <10ms %d >=10ms %d, mean %.1f us, max "
      "%.1f us",
      waits, by_spin, spin_ns / 1e6, yields, sleeps, rung, naps,
      sleep_ns / 1e6, rings, wake_hist[0], wake_hist[1], wake_hist[2],
      wake_hist[3], wake_hist[4], rung ? wake_ns / 1e3 / rung : 0.0,
      wake_max_ns / 1e3);
}

}  // namespace strata::comm::shm
