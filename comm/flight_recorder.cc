#include "comm/flight_recorder.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"

namespace strata::comm {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'F', 'R'};

struct GroupName {
  char name[24];
};

struct Header {
  char magic[8];
  uint32_t version;
  int32_t rank;
  int32_t pid;
  uint32_t capacity;
  char job_id[64];
  std::atomic<uint64_t> next;  // records ever claimed
  std::atomic<uint32_t> groups;
  GroupName group_names[kFlightRecorderGroups];
};

struct Record {
  std::atomic<uint64_t> lock;  // odd while being written
  uint64_t seq;
  uint64_t bytes;
  int64_t entered_ns, started_ns, finished_ns;
  uint32_t group;
  uint8_t state;
  char op[15];
  FrPeer peers[kFlightRecorderPeers];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "the recorder is shared between processes");

namespace {

size_t FileBytes(uint32_t capacity) {
  return sizeof(Header) + sizeof(Record) * capacity;
}

Record* Records(void* base) {
  return reinterpret_cast<Record*>(static_cast<char*>(base) + sizeof(Header));
}

// Sequence-lock write: makes the record odd, runs `f`, makes it even.
template <typename F>
void Write(Record* r, F&& f) {
  r->lock.fetch_add(1, std::memory_order_acq_rel);
  std::atomic_thread_fence(std::memory_order_release);
  f(*r);
  r->lock.fetch_add(1, std::memory_order_release);
}

}  // namespace

int64_t WallNowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

const char* FrStateName(FrState s) {
  switch (s) {
    case FrState::kEntered:
      return "entered";
    case FrState::kStarted:
      return "started";
    case FrState::kFinished:
      return "finished";
    case FrState::kFailed:
      return "failed";
  }
  return "unknown";
}

std::string FlightRecorderPath(const std::string& job_id, int rank, int pid) {
  std::string safe = job_id;
  for (char& c : safe) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
          c == '-')) {
      c = '_';
    }
  }
  return absl::StrCat("/dev/shm/strata-fr-", safe, "-", rank, "-", pid);
}

StatusOr<std::shared_ptr<FlightRecorder>> FlightRecorder::Create(
    const std::string& path, const std::string& job_id, int rank,
    int capacity) {
  if (capacity < 1 || capacity > (1 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flight recorder capacity ", capacity, " outside [1, 1048576]"));
  }
  const size_t len = FileBytes(static_cast<uint32_t>(capacity));
  // Written under a temporary name and renamed, so a reader never sees a
  // half-initialised header.
  // mkostemp creates a new file (O_CREAT|O_EXCL, never through a
  // symlink) with a random name: nothing another user planted can become
  // the recorder or be written through (docs/security.md "Files").
  std::string tmp = absl::StrCat(path, ".tmp.XXXXXX");
  int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "flight recorder " + tmp);
  if (fchmod(fd, 0600) != 0) {
    Status st = ErrnoToStatus(errno, "flight recorder " + tmp);
    close(fd);
    unlink(tmp.c_str());
    return st;
  }
  if (ftruncate(fd, static_cast<off_t>(len)) != 0) {
    Status st = ErrnoToStatus(errno, "flight recorder " + tmp);
    close(fd);
    unlink(tmp.c_str());
    return st;
  }
  void* base = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    unlink(tmp.c_str());
    return ErrnoToStatus(errno, "mmap flight recorder " + tmp);
  }
  auto* h = new (base) Header{};
  std::memcpy(h->magic, kMagic, sizeof(kMagic));
  h->version = kFlightRecorderVersion;
  h->rank = rank;
  h->pid = getpid();
  h->capacity = static_cast<uint32_t>(capacity);
  std::snprintf(h->job_id, sizeof(h->job_id), "%s", job_id.c_str());
  Record* recs = Records(base);
  for (int i = 0; i < capacity; ++i) new (&recs[i]) Record{};
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    Status st = ErrnoToStatus(errno, "flight recorder " + path);
    munmap(base, len);
    unlink(tmp.c_str());
    return st;
  }
  return std::shared_ptr<FlightRecorder>(new FlightRecorder(path, base, len));
}

FlightRecorder::FlightRecorder(std::string path, void* base, size_t len)
    : path_(std::move(path)), base_(base), len_(len) {}

FlightRecorder::~FlightRecorder() { munmap(base_, len_); }

int FlightRecorder::AddGroup(const std::string& name) {
  std::lock_guard<std::mutex> lock(groups_mu_);
  auto* h = static_cast<Header*>(base_);
  uint32_t i = h->groups.load(std::memory_order_relaxed);
  if (i >= kFlightRecorderGroups) return kFlightRecorderGroups - 1;
  std::snprintf(h->group_names[i].name, sizeof(h->group_names[i].name), "%s",
                name.c_str());
  h->groups.store(i + 1, std::memory_order_release);
  return static_cast<int>(i);
}

FlightRecorder::Op FlightRecorder::Begin(int group, uint64_t seq,
                                         const char* op, uint64_t bytes) {
  if (paused()) return Op{};
  auto* h = static_cast<Header*>(base_);
  const uint64_t n = h->next.fetch_add(1, std::memory_order_relaxed);
  Op out;
  out.rec_ = &Records(base_)[n % h->capacity];
  const int64_t now = WallNowNs();
  Write(out.rec_, [&](Record& r) {
    r.seq = seq;
    r.bytes = bytes;
    r.entered_ns = now;
    r.started_ns = r.finished_ns = 0;
    r.group = static_cast<uint32_t>(group);
    r.state = static_cast<uint8_t>(FrState::kEntered);
    std::snprintf(r.op, sizeof(r.op), "%s", op);
    for (FrPeer& p : r.peers) p = FrPeer{};
  });
  return out;
}

void FlightRecorder::Op::Started() {
  if (rec_ == nullptr || started_) return;
  started_ = true;
  const int64_t now = WallNowNs();
  Write(rec_, [&](Record& r) {
    r.started_ns = now;
    r.state = static_cast<uint8_t>(FrState::kStarted);
  });
}

void FlightRecorder::Op::Transfer(int peer, uint64_t bytes, int64_t ns) {
  if (rec_ == nullptr) return;
  Write(rec_, [&](Record& r) {
    // The peer's slot, else the first free one, else the last (shared).
    FrPeer* slot = &r.peers[kFlightRecorderPeers - 1];
    for (FrPeer& p : r.peers) {
      if (p.peer == peer || p.peer == -1) {
        slot = &p;
        break;
      }
    }
    slot->peer = peer;
    slot->bytes += bytes;
    slot->ns += ns;
  });
}

void FlightRecorder::Op::Finish(bool ok) {
  if (rec_ == nullptr) return;
  const int64_t now = WallNowNs();
  Write(rec_, [&](Record& r) {
    r.finished_ns = now;
    r.state = static_cast<uint8_t>(ok ? FrState::kFinished : FrState::kFailed);
  });
  rec_ = nullptr;
}

StatusOr<FrDump> ReadFlightRecorder(const std::string& path,
                                    const FrExpect* expect) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) {
      return absl::FailedPreconditionError(absl::StrCat(
          "flight recorder ", path, " is a symlink; refusing to follow it"));
    }
    return ErrnoToStatus(errno, "flight recorder " + path);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    Status s = ErrnoToStatus(errno, "flight recorder " + path);
    close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode) || (expect != nullptr && st.st_uid != expect->uid)) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "flight recorder ", path, " refused: ",
        !S_ISREG(st.st_mode) ? "not a regular file"
                             : absl::StrCat("owned by uid ", st.st_uid,
                                            ", not the rank's uid ",
                                            expect->uid),
        " (planted by another user?)"));
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size < sizeof(Header)) {
    close(fd);
    return absl::DataLossError(
        absl::StrCat(path, ": ", size, " bytes is too short for a recorder"));
  }
  void* base = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return ErrnoToStatus(errno, "mmap " + path);
  const auto* h = static_cast<const Header*>(base);
  auto unmap = [&] { munmap(base, size); };
  if (std::memcmp(h->magic, kMagic, sizeof(kMagic)) != 0 ||
      h->version != kFlightRecorderVersion) {
    unmap();
    return absl::DataLossError(absl::StrCat(
        path, ": not a version ", kFlightRecorderVersion, " flight recorder"));
  }
  if (h->capacity == 0 || FileBytes(h->capacity) > size) {
    unmap();
    return absl::DataLossError(absl::StrCat(
        path, ": capacity ", h->capacity, " does not fit in ", size, " bytes"));
  }
  FrDump dump;
  dump.rank = h->rank;
  dump.pid = h->pid;
  dump.job_id.assign(h->job_id, strnlen(h->job_id, sizeof(h->job_id)));
  if (expect != nullptr &&
      (dump.job_id != expect->job_id || dump.rank != expect->rank ||
       dump.pid != expect->pid)) {
    unmap();
    return absl::FailedPreconditionError(absl::StrCat(
        "flight recorder ", path, " refused: its header says job '",
        dump.job_id, "' rank ", dump.rank, " pid ", dump.pid, ", expected '",
        expect->job_id, "' rank ", expect->rank, " pid ", expect->pid));
  }
  const uint32_t groups = std::min<uint32_t>(
      h->groups.load(std::memory_order_acquire), kFlightRecorderGroups);
  dump.recorded = const_cast<Header*>(h)->next.load(std::memory_order_acquire);
  const uint64_t first =
      dump.recorded > h->capacity ? dump.recorded - h->capacity : 0;
  const Record* recs = Records(const_cast<void*>(base));
  for (uint64_t i = first; i < dump.recorded; ++i) {
    const Record& src = recs[i % h->capacity];
    Record copy;
    bool consistent = false;
    for (int attempt = 0; attempt < 100 && !consistent; ++attempt) {
      const uint64_t before = src.lock.load(std::memory_order_acquire);
      if (before % 2 == 1) continue;  // being written
      std::memcpy(static_cast<void*>(&copy), &src, sizeof(Record));
      std::atomic_thread_fence(std::memory_order_acquire);
      consistent = src.lock.load(std::memory_order_relaxed) == before;
    }
    if (!consistent || copy.state == 0) continue;
    FrEntry e;
    e.group = copy.group < groups
                  ? std::string(h->group_names[copy.group].name,
                                strnlen(h->group_names[copy.group].name,
                                        sizeof(GroupName::name)))
                  : absl::StrCat("group", copy.group);
    e.seq = copy.seq;
    e.op.assign(copy.op, strnlen(copy.op, sizeof(copy.op)));
    e.bytes = copy.bytes;
    e.state = static_cast<FrState>(copy.state);
    e.entered_ns = copy.entered_ns;
    e.started_ns = copy.started_ns;
    e.finished_ns = copy.finished_ns;
    for (const FrPeer& p : copy.peers) {
      if (p.peer >= 0) e.peers.push_back(p);
    }
    dump.entries.push_back(std::move(e));
  }
  unmap();
  return dump;
}

}  // namespace strata::comm
