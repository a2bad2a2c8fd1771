#include "comm/shm/shm_transport.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "comm/algorithms/algorithms.h"
#include "comm/shm/doorbell.h"
#include "common/cpu_relax.h"

namespace strata::comm {
namespace {

constexpr size_t kLine = 64;
// Bytes moved per push or pop: sending and receiving alternate in chunks
// that stay in L2, so a reduction reads data that was just written.
constexpr size_t kChunkBytes = 64 * 1024;

struct alignas(kLine) Cursor {
  std::atomic<uint64_t> value{0};
};

// Segment layout: an abort flag and `size` pids (HeaderBytes), then `size`
// Doorbells, then size*size RingHeaders, then the ring data, then `size`
// barrier arrival counters and 2*size shared all-reduce slots.
//
// Ordering protocol of a ring (single producer, single consumer; the
// counters only grow, a position is counter & (ring_bytes - 1)):
//  - only the sender stores `head`, only the receiver stores `tail`; each
//    reads its own counter relaxed;
//  - sender: load tail (acquire) -> free room = ring_bytes - (head - tail);
//    memcpy into the room; store head + n (release). The acquire pairs with
//    the receiver's release of tail, so the receiver's reads of that room
//    happened before it is overwritten;
//  - receiver: load head (acquire) -> readable = head - tail; read those
//    bytes; store tail + n (release). The acquire pairs with the sender's
//    release of head, so the bytes written before it are visible.
// The abort flag is stored with release and loaded with acquire; the pids
// are written once at connect, before the store barrier every rank waits on.
struct RingHeader {
  Cursor head;  // bytes written by the sender
  Cursor tail;  // bytes consumed by the receiver
};

using shm::Doorbell;

// A sleeper looks at the abort flag, its deadline and its peers' pids at
// least this often (ms): a dead peer is named within it.
constexpr int kNapMs = 5;

// Default spin budget before sleeping (us); STRATA_SHM_SPIN_US overrides.
// Two-phase waiting (Ousterhout 1982; Karlin et al., SOSP 1991): spinning
// for as long as blocking costs is within 2x of the best choice whatever the
// wait turns out to be. Blocking costs the ring-to-running latency of a
// futex sleeper, measured with STRATA_SHM_STATS on a 2-core VM
// (docs/results.md, "Choices behind the tuner"): most wake-ups take
// 10-100 us, so spin 50 us.
constexpr int64_t kDefaultSpinUs = 50;
// Polls between two looks at the clock (and, when ranks outnumber cores,
// two sched_yield calls): a poll is two loads of lines the peer writes.
constexpr int kPollsPerCheck = 32;

int64_t SpinBudgetNs() {
  const char* env = std::getenv("STRATA_SHM_SPIN_US");
  int64_t us = kDefaultSpinUs;
  if (env != nullptr && *env != 0) us = std::strtoll(env, nullptr, 10);
  return std::clamp<int64_t>(us, 0, 1'000'000) * 1000;
}

size_t HeaderBytes(int size) {
  return (sizeof(std::atomic<uint32_t>) + sizeof(std::atomic<int32_t>) * size +
          kLine - 1) /
         kLine * kLine;
}

class ShmTransport final : public Transport {
 public:
  ShmTransport(int rank, int size, size_t ring_bytes, size_t slot_bytes,
               void* base, size_t len)
      : rank_(rank),
        size_(size),
        ring_bytes_(ring_bytes),
        slot_bytes_(slot_bytes),
        base_(base),
        len_(len) {
    char* p = static_cast<char*>(base);
    aborted_ = reinterpret_cast<std::atomic<uint32_t>*>(p);
    pids_ = reinterpret_cast<std::atomic<int32_t>*>(
        p + sizeof(std::atomic<uint32_t>));
    bells_ = reinterpret_cast<Doorbell*>(p + HeaderBytes(size));
    rings_ = reinterpret_cast<RingHeader*>(p + HeaderBytes(size) +
                                           sizeof(Doorbell) * size);
    data_ = reinterpret_cast<char*>(rings_ + size * size);
    arrive_ = reinterpret_cast<Cursor*>(data_ + ring_bytes * size * size);
    slots_ = reinterpret_cast<char*>(arrive_ + size);
    spin_ns_ = SpinBudgetNs();
    // With more ranks than cores a spinning rank may hold the core the rank
    // it waits for needs: it yields between polls instead.
    yield_ = size > sysconf(_SC_NPROCESSORS_ONLN);
    print_stats_ = std::getenv("STRATA_SHM_STATS") != nullptr;
  }
  ~ShmTransport() override {
    if (print_stats_) {
      std::fprintf(stderr, "shm stats rank %d/%d pid %d spin %lld us%s: %s\n",
                   rank_, size_, static_cast<int>(getpid()),
                   static_cast<long long>(spin_ns_ / 1000),
                   yield_ ? " yielding" : "", stats_.Format().c_str());
    }
    munmap(base_, len_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "shm"; }
  std::atomic<int32_t>* pids() { return pids_; }

  void Abort() override {
    aborted_->store(1, std::memory_order_release);
    for (int r = 0; r < size_; ++r) shm::Ring(bells_[r], /*force=*/true);
  }

  Status SendRecv(int send_peer, const void* send, size_t send_bytes,
                  int recv_peer, void* recv, size_t recv_bytes,
                  Deadline deadline) override {
    char* dst = static_cast<char*>(recv);
    return Exchange(send_peer, send, send_bytes, recv_peer, recv_bytes,
                    deadline, [&](const char* p, size_t n) {
                      std::memcpy(dst, p, n);
                      dst += n;
                    });
  }

  // Reduces straight out of the ring: no scratch copy. An element split by
  // the ring's end (or by the sender's progress) waits in `carry`.
  Status SendRecvReduce(int send_peer, const void* send, size_t send_bytes,
                        int recv_peer, void* acc, size_t count, DataType type,
                        ReduceOp op, Deadline deadline) override {
    const size_t es = ElementSize(type);
    char* out = static_cast<char*>(acc);
    alignas(8) char carry[8];
    size_t carried = 0;
    alignas(64) char aligned[4096];
    return Exchange(
        send_peer, send, send_bytes, recv_peer, count * es, deadline,
        [&](const char* p, size_t n) {
          if (carried > 0) {
            const size_t k = std::min(es - carried, n);
            std::memcpy(carry + carried, p, k);
            carried += k;
            p += k;
            n -= k;
            if (carried < es) return;
            ReduceInto(out, carry, 1, type, op);
            out += es;
            carried = 0;
          }
          size_t whole = n / es;
          if (reinterpret_cast<uintptr_t>(p) % es == 0) {
            ReduceInto(out, p, whole, type, op);
            out += whole * es;
            p += whole * es;
          } else {  // misaligned stream position: bounce through a buffer
            while (whole > 0) {
              const size_t m = std::min(whole, sizeof(aligned) / es);
              std::memcpy(aligned, p, m * es);
              ReduceInto(out, aligned, m, type, op);
              out += m * es;
              p += m * es;
              whole -= m;
            }
          }
          carried = n % es;
          std::memcpy(carry, p, carried);
        });
  }

  template <typename Consume>
  Status Exchange(int send_peer, const void* send, size_t send_bytes,
                  int recv_peer, size_t recv_bytes, Deadline deadline,
                  Consume&& consume) {
    const char* src = static_cast<const char*>(send);
    size_t to_send = send_peer >= 0 ? send_bytes : 0;
    size_t to_recv = recv_peer >= 0 ? recv_bytes : 0;
    RingHeader* out = to_send ? &Ring(rank_, send_peer) : nullptr;
    RingHeader* in = to_recv ? &Ring(recv_peer, rank_) : nullptr;
    char* out_data = to_send ? RingData(rank_, send_peer) : nullptr;
    char* in_data = to_recv ? RingData(recv_peer, rank_) : nullptr;
    const uint64_t mask = ring_bytes_ - 1;
    Waiter w;
    while (to_send > 0 || to_recv > 0) {
      bool progress = false;
      if (to_send > 0) {
        const uint64_t head = out->head.value.load(std::memory_order_relaxed);
        const uint64_t tail = out->tail.value.load(std::memory_order_acquire);
        size_t room = ring_bytes_ - static_cast<size_t>(head - tail);
        size_t n = std::min({room, to_send, kChunkBytes});
        if (n > 0) {
          const size_t off = head & mask,
                       first = std::min(n, ring_bytes_ - off);
          std::memcpy(out_data + off, src, first);
          std::memcpy(out_data, src + first, n - first);
          out->head.value.store(head + n, std::memory_order_release);
          stats_.rings += shm::Ring(bells_[send_peer]);
          src += n;
          to_send -= n;
          progress = true;
        }
      }
      if (to_recv > 0) {
        const uint64_t tail = in->tail.value.load(std::memory_order_relaxed);
        const uint64_t head = in->head.value.load(std::memory_order_acquire);
        size_t n =
            std::min({static_cast<size_t>(head - tail), to_recv, kChunkBytes});
        if (n > 0) {
          const size_t off = tail & mask,
                       first = std::min(n, ring_bytes_ - off);
          consume(in_data + off, first);
          if (n > first) consume(in_data, n - first);
          in->tail.value.store(tail + n, std::memory_order_release);
          stats_.rings += shm::Ring(bells_[recv_peer]);
          to_recv -= n;
          progress = true;
        }
      }
      if (progress) {
        Progressed(w);
        continue;
      }
      RETURN_IF_ERROR(Idle(
          w,
          [&] {
            return (to_send > 0 &&
                    out->head.value.load(std::memory_order_relaxed) -
                            out->tail.value.load(std::memory_order_acquire) <
                        ring_bytes_) ||
                   (to_recv > 0 &&
                    in->head.value.load(std::memory_order_acquire) !=
                        in->tail.value.load(std::memory_order_relaxed));
          },
          [&] {
            std::vector<int> peers;
            for (int p : {send_peer, recv_peer}) {
              if (p >= 0) peers.push_back(p);
            }
            return peers;
          },
          [&] {
            return to_recv > 0 ? absl::StrCat("receiving from rank ", recv_peer)
                               : absl::StrCat("sending to rank ", send_peer);
          },
          deadline));
    }
    if (aborted_->load(std::memory_order_acquire)) {
      return absl::AbortedError("shm transport aborted");
    }
    return absl::OkStatus();
  }

  bool shares_memory() const override { return true; }

  // Chunks of at most slot_bytes_: copy in, barrier, reduce this rank's
  // share of every slot into `buf` and publish it in this rank's slot,
  // barrier, copy the other shares out. Up to kOneShotBytes every rank
  // instead reduces every slot whole, in rank order (one barrier; every rank
  // computes the same bits). A chunk's slots alternate between two buffers:
  // a rank writes buffer b again two chunks later, after a barrier that
  // every rank enters only once it has finished reading the chunk before.
  Status SharedAllReduce(void* buf, size_t count, DataType type, ReduceOp op,
                         Deadline deadline) override {
    if (size_ == 1) return absl::OkStatus();
    const size_t es = ElementSize(type);
    const size_t per_chunk = slot_bytes_ / es;
    char* data = static_cast<char*>(buf);
    for (size_t done = 0; done < count;) {
      const size_t m = std::min(per_chunk, count - done);
      char* in = data + done * es;
      const int b = static_cast<int>(chunks_ & 1);
      ++chunks_;
      std::memcpy(Slot(rank_, b), in, m * es);
      if (m * es <= kOneShotBytes) {
        RETURN_IF_ERROR(Barrier(deadline));
        std::memcpy(in, Slot(0, b), m * es);
        for (int p = 1; p < size_; ++p) ReduceInto(in, Slot(p, b), m, type, op);
      } else {
        RETURN_IF_ERROR(Barrier(deadline));
        const size_t lo = algorithms::BlockBegin(m, size_, rank_),
                     hi = algorithms::BlockBegin(m, size_, rank_ + 1);
        for (int i = 1; i < size_; ++i) {  // staggered: not all on one slot
          const int p = (rank_ + i) % size_;
          ReduceInto(in + lo * es, Slot(p, b) + lo * es, hi - lo, type, op);
        }
        std::memcpy(Slot(rank_, b) + lo * es, in + lo * es, (hi - lo) * es);
        RETURN_IF_ERROR(Barrier(deadline));
        for (int i = 1; i < size_; ++i) {
          const int p = (rank_ + i) % size_;
          const size_t plo = algorithms::BlockBegin(m, size_, p),
                       phi = algorithms::BlockBegin(m, size_, p + 1);
          std::memcpy(in + plo * es, Slot(p, b) + plo * es, (phi - plo) * es);
        }
      }
      done += m;
    }
    return absl::OkStatus();
  }

 private:
  // Up to this many bytes a shared all-reduce chunk is reduced whole by
  // every rank (one barrier; n reads of it per rank).
  static constexpr size_t kOneShotBytes = 16 << 10;

  // One wait of the calling rank (Exchange or Barrier), for its statistics.
  struct Waiter {
    int polls = 0;
    int64_t start = 0, spun_until = 0;
    bool slept = false;
  };

  // Ends the current wait, if any: something moved.
  void Progressed(Waiter& w) {
    w.polls = 0;
    if (w.start == 0) return;
    if (!w.slept) ++stats_.by_spin;  // a wait that ended by spinning
    stats_.spin_ns += w.spun_until - w.start;
    w = Waiter{};
  }

  // Called when nothing moved. Phase 1: spin while the peer is likely
  // mid-copy (bounded by spin_ns_, yielding when ranks outnumber cores);
  // phase 2: sleep on this rank's doorbell until a peer rings it, at most
  // kNapMs at a time. `ready()` re-checks after announcing the sleep (the
  // doorbell's handshake, doorbell.h); `peers()` names the ranks waited for
  // (each is checked for liveness); `describe()` says what the rank waits
  // for, for the timeout message. Returns OK to poll again, or why the wait
  // cannot go on.
  template <typename Ready, typename Peers, typename Describe>
  Status Idle(Waiter& w, Ready&& ready, Peers&& peers, Describe&& describe,
              Deadline deadline) {
    if (++w.polls < kPollsPerCheck) {
      CpuRelax();
      return absl::OkStatus();
    }
    w.polls = 0;
    const int64_t now = shm::MonotonicNs();
    if (w.start == 0) {
      w.start = now;
      ++stats_.waits;
    }
    if (!w.slept) w.spun_until = now;
    if (!w.slept && now - w.start < spin_ns_) {
      if (yield_) {
        sched_yield();
        ++stats_.yields;
      }
      return absl::OkStatus();
    }
    if (aborted_->load(std::memory_order_acquire)) {
      return absl::AbortedError("shm transport aborted");
    }
    if (SteadyClock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank_, ": timed out ", describe()));
    }
    for (int p : peers()) {
      const int pid = pids_[p].load();
      if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
        return absl::UnavailableError(absl::StrCat("rank ", rank_, ": rank ", p,
                                                   " (pid ", pid, ") exited"));
      }
    }
    w.slept = true;
    Doorbell& bell = bells_[rank_];
    bell.sleeping.store(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const uint32_t seq = bell.seq.load(std::memory_order_acquire);
    if (!ready()) {
      ++stats_.sleeps;
      const int64_t t0 = shm::MonotonicNs();
      const bool rung = shm::SleepOn(bell, seq, kNapMs);
      const int64_t t1 = shm::MonotonicNs();
      stats_.sleep_ns += t1 - t0;
      if (rung) {
        ++stats_.rung;
        stats_.AddWake(t1 - bell.rung_ns.load(std::memory_order_relaxed));
      } else {
        ++stats_.naps;
      }
    }
    bell.sleeping.store(0, std::memory_order_relaxed);
    return absl::OkStatus();
  }

  // Every rank's arrival counter reaches this rank's next count. A rank
  // stores its own count (release) and rings the others; a waiter's
  // acquire load of a peer's count makes that peer's slot writes before it
  // visible.
  Status Barrier(Deadline deadline) {
    const uint64_t target = ++arrivals_;
    arrive_[rank_].value.store(target, std::memory_order_release);
    for (int p = 0; p < size_; ++p) {
      if (p != rank_) stats_.rings += shm::Ring(bells_[p]);
    }
    auto is_late = [&](int p) {
      return arrive_[p].value.load(std::memory_order_acquire) < target;
    };
    auto all_arrived = [&] {
      for (int p = 0; p < size_; ++p) {
        if (is_late(p)) return false;
      }
      return true;
    };
    auto late = [&] {  // the slow path only: it allocates
      std::vector<int> ranks;
      for (int p = 0; p < size_; ++p) {
        if (is_late(p)) ranks.push_back(p);
      }
      return ranks;
    };
    Waiter w;
    while (!all_arrived()) {
      RETURN_IF_ERROR(Idle(
          w, all_arrived, late,
          [&] {
            return absl::StrCat("in a shared all-reduce waiting for rank(s) ",
                                absl::StrJoin(late(), ", "));
          },
          deadline));
    }
    Progressed(w);
    if (aborted_->load(std::memory_order_acquire)) {
      return absl::AbortedError("shm transport aborted");
    }
    return absl::OkStatus();
  }

  RingHeader& Ring(int from, int to) { return rings_[from * size_ + to]; }
  char* RingData(int from, int to) {
    return data_ + (static_cast<size_t>(from) * size_ + to) * ring_bytes_;
  }
  // Rank r's slot in buffer b (0 or 1) of the shared all-reduce.
  char* Slot(int r, int b) {
    return slots_ + (static_cast<size_t>(b) * size_ + r) * slot_bytes_;
  }

  int rank_, size_;
  size_t ring_bytes_;
  size_t slot_bytes_;
  void* base_;
  size_t len_;
  std::atomic<uint32_t>* aborted_;
  std::atomic<int32_t>* pids_;
  Doorbell* bells_;
  RingHeader* rings_;
  char* data_;
  Cursor* arrive_;         // barriers each rank has entered
  char* slots_;            // 2 x size shared all-reduce slots
  uint64_t arrivals_ = 0;  // this rank's barriers so far
  uint64_t chunks_ = 0;    // shared all-reduce chunks so far (buffer parity)
  int64_t spin_ns_;        // spin budget of a wait
  bool yield_;             // sched_yield while spinning (ranks > cores)
  bool print_stats_;       // STRATA_SHM_STATS: print stats_ when destroyed
  shm::WaitStats stats_;   // driving thread only
};

}  // namespace

size_t DefaultShmRingBytes(int size) {
  // 64 MiB: 4 MiB rings for 2-4 ranks, half of this VM's 32 MiB L3 for the
  // rings a ring all-reduce of 4 ranks streams through at once.
  constexpr size_t kSegmentBudget = size_t{64} << 20;
  constexpr size_t kMin = 512 << 10, kMax = 4 << 20;
  const size_t pairs = static_cast<size_t>(std::max(size, 1)) * size;
  size_t ring = kMax;
  while (ring > kMin && ring * pairs > kSegmentBudget) ring /= 2;
  return ring;
}

size_t DefaultShmSlotBytes(int size) {
  constexpr size_t kSlotBudget = size_t{16} << 20;
  constexpr size_t kMin = 256 << 10, kMax = 2 << 20;
  return std::clamp<size_t>(kSlotBudget / (2 * std::max(size, 1)), kMin, kMax);
}

StatusOr<std::unique_ptr<Transport>> ConnectShmTransport(
    std::shared_ptr<Store> store, int rank, int size,
    const ShmOptions& options) {
  ShmOptions opts = options;
  if (opts.ring_bytes == 0) opts.ring_bytes = DefaultShmRingBytes(size);
  if (opts.slot_bytes == 0) opts.slot_bytes = DefaultShmSlotBytes(size);
  if (rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad shm rank ", rank, " of ", size));
  }
  if (opts.ring_bytes < kLine ||
      (opts.ring_bytes & (opts.ring_bytes - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm ring_bytes must be a power of two of at least ",
                     kLine, ", not ", opts.ring_bytes));
  }
  if (opts.slot_bytes % kLine != 0 || opts.slot_bytes > (size_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm slot_bytes must be a multiple of ", kLine,
                     " up to 1 GiB, not ", opts.slot_bytes));
  }
  // Every rank checks (they share /dev/shm), so none waits for a segment
  // that will never come. Writing past what tmpfs can hold raises SIGBUS
  // later, so a segment that does not fit is an error now.
  if (opts.ring_bytes > (size_t{1} << 30) || size > (1 << 16)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm transport: ", size, " ranks with ", opts.ring_bytes,
                     "-byte rings is beyond any node"));
  }
  const size_t pairs = static_cast<size_t>(size) * size;
  const size_t len = HeaderBytes(size) + sizeof(Doorbell) * size +
                     sizeof(RingHeader) * pairs + opts.ring_bytes * pairs +
                     sizeof(Cursor) * size + 2 * opts.slot_bytes * size;
  if (struct statvfs fs; statvfs("/dev/shm", &fs) == 0) {
    const double free_bytes = static_cast<double>(fs.f_bavail) * fs.f_frsize;
    if (static_cast<double>(len) > free_bytes) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "shm transport: %d ranks on this node need a %.1f MiB segment "
          "(a %zu KiB ring per ordered pair, two %zu KiB slots per rank) but "
          "/dev/shm has %.1f MiB free",
          size, len / 1048576.0, opts.ring_bytes >> 10, opts.slot_bytes >> 10,
          free_bytes / 1048576.0));
    }
  }
  std::string name;
  int fd = -1;
  if (rank == 0) {
    std::random_device rd;
    name = absl::StrCat("/strata-shm-", getpid(), "-", rd());
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return ErrnoToStatus(errno, "shm_open " + name);
    if (ftruncate(fd, static_cast<off_t>(len)) != 0) {
      Status st = ErrnoToStatus(errno, "ftruncate " + name);
      close(fd);
      shm_unlink(name.c_str());
      return st;
    }
    RETURN_IF_ERROR(store->Set("shm/name", name));
  } else {
    ASSIGN_OR_RETURN(name, store->Get("shm/name", opts.connect_timeout));
    fd = shm_open(name.c_str(), O_RDWR, 0600);
    if (fd < 0) return ErrnoToStatus(errno, "shm_open " + name);
  }
  void* base = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return ErrnoToStatus(errno, "mmap " + name);
  auto t = std::make_unique<ShmTransport>(rank, size, opts.ring_bytes,
                                          opts.slot_bytes, base, len);
  t->pids()[rank].store(getpid());
  RETURN_IF_ERROR(store->Set(absl::StrCat("shm/attached/", rank), "1"));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r)
    keys.push_back(absl::StrCat("shm/attached/", r));
  Status st = store->Wait(keys, opts.connect_timeout);
  if (rank == 0) shm_unlink(name.c_str());  // mapped by all (or given up)
  RETURN_IF_ERROR(st);
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace strata::comm
