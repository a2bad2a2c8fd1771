// mem:// storage (docs/checkpoint.md "Memory tier"): a file:// storage on
// the worker's memory directory (STRATA_MEM_DIR, the job's directory on the
// node's tmpfs, so it survives the rank process) that
//  - asks the local worker's replica server before and after writing a
//    data stream whether it may hold the bytes (its --mem-limit), and
//    removes a stream it refused (ResourceExhausted: the save fails);
//  - copies every finished data stream and rank index to the buddy node's
//    worker (node index + 1 mod nodes), paced by a token bucket, before the
//    stream counts as durable, and the manifest to every node's worker, so
//    a committed step survives the loss of any one node;
//  - reads what the local directory lacks from the peers (the buddy first),
//    and lists the union of every reachable node's committed steps;
//  - removes a step on every node (retention).
// A peer that is unreachable when reading is skipped (warned); one that is
// unreachable when replicating fails the save (the step never commits).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checkpoint/internal/file_util.h"
#include "checkpoint/mem_wire.h"
#include "checkpoint/storage/storages.h"
#include "common/logging.h"
#include "common/mutex.h"

namespace strata::checkpoint {
namespace {

using mem::ReplicaClient;

constexpr int kTimeoutMs = 30000;

struct MemConfig {
  std::string dir;  // DIR/<job>
  std::string job;
  std::vector<std::string> peers;  // replica endpoints by node index
  int node = 0;
  double rate_bytes = mem::kDefaultRateMiBs * 1024 * 1024;
};

StatusOr<MemConfig> ConfigFromEnv(const std::string& path) {
  MemConfig c;
  const char* env_dir = std::getenv(mem::kMemDirEnv);
  c.dir = !path.empty() ? path : (env_dir != nullptr ? env_dir : "");
  if (c.dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mem:// checkpoint: no memory directory: run the rank under "
        "strata-worker (which sets ",
        mem::kMemDirEnv, ") or give mem:///DIR"));
  }
  while (c.dir.size() > 1 && c.dir.back() == '/') c.dir.pop_back();
  c.job = c.dir.substr(c.dir.rfind('/') + 1);
  if (!ValidName(c.job)) {
    return absl::InvalidArgumentError("mem:// checkpoint directory '" + c.dir +
                                      "' must end in the job's directory");
  }
  if (const char* peers = std::getenv(mem::kMemPeersEnv);
      peers != nullptr && *peers != '\0') {
    c.peers = absl::StrSplit(peers, ',', absl::SkipEmpty());
  }
  if (const char* node = std::getenv(mem::kMemNodeEnv); node != nullptr) {
    if (!absl::SimpleAtoi(node, &c.node) || c.node < 0 ||
        (!c.peers.empty() && c.node >= static_cast<int>(c.peers.size()))) {
      return absl::InvalidArgumentError(absl::StrCat(
          mem::kMemNodeEnv, "='", node, "' is not an index into ",
          mem::kMemPeersEnv, " (", c.peers.size(), " endpoints)"));
    }
  }
  if (const char* rate = std::getenv(mem::kMemRateEnv); rate != nullptr) {
    double mibs = 0;
    if (!absl::SimpleAtod(rate, &mibs) || mibs < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          mem::kMemRateEnv, "='", rate, "': expected MiB/s >= 0 (0: unshaped)"));
    }
    c.rate_bytes = mibs * 1024 * 1024;
  }
  return c;
}

// A restore's hold on a step: this node's pin (the file:// flock) and one
// on every peer that holds the step (a connection each: Op::kPin), so
// neither retention nor a peer's drop removes a copy a reader may use.
class MemPin final : public StepPin {
 public:
  MemPin(std::unique_ptr<StepPin> local, std::vector<int> peer_fds)
      : local_(std::move(local)), fds_(std::move(peer_fds)) {}
  ~MemPin() override {
    for (int fd : fds_) close(fd);
  }

 private:
  std::unique_ptr<StepPin> local_;  // may be null
  const std::vector<int> fds_;
};

class MemStorage;

// A data stream written straight from the caller's memory (the staged
// buffers) into its file in the memory directory: the one CPU copy of a
// save on the rank's side (pwrite into the tmpfs pages; no staging buffer
// of its own as the file:// O_DIRECT writer has, no fsync: tmpfs). Once
// finished it is admitted by the local worker and sent to the buddy from
// the file's pages (sendfile: no copy). A stream never finished stays an
// uncommitted leftover (Storage::CollectGarbage).
class MemSink final : public DataSink {
 public:
  MemSink(MemStorage* owner, int fd, std::string path, int64_t step,
          std::string name)
      : owner_(owner), fd_(fd), path_(std::move(path)), step_(step),
        name_(std::move(name)) {}
  ~MemSink() override { close(fd_); }
  Status Append(const char* data, size_t n) override {
    while (n > 0) {
      const ssize_t w = pwrite(fd_, data, n, static_cast<off_t>(size_));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        return ErrnoToStatus(w == 0 ? ENOSPC : errno, "write " + path_);
      }
      data += w;
      n -= static_cast<size_t>(w);
      size_ += static_cast<uint64_t>(w);
    }
    return absl::OkStatus();
  }
  Status Finish() override;
  uint64_t size() const override { return size_; }

 private:
  MemStorage* owner_;
  const int fd_;
  const std::string path_;
  const int64_t step_;
  const std::string name_;
  uint64_t size_ = 0;
};

class MemStorage final : public StorageWrapper {
 public:
  MemStorage(MemConfig c, int rank)
      : StorageWrapper(NewFileStorage(c.dir, rank)),
        c_(std::move(c)),
        bucket_(c_.rate_bytes, 4.0 * 1024 * 1024),
        log_(GetLogger("CKPT")) {
    for (const auto& p : c_.peers) {
      clients_.push_back(std::make_unique<ReplicaClient>(p, kTimeoutMs));
    }
  }

  StatusOr<std::unique_ptr<DataSink>> CreateData(
      int64_t step, const std::string& name) override {
    if (ReplicaClient* self = Self()) {
      uint64_t expected = 0;
      {
        MutexLock lock(mu_);
        expected = last_size_[name];
      }
      RETURN_IF_ERROR(self->Admit(c_.job, step, name, expected));
    }
    if (!ValidName(name)) {
      return absl::InvalidArgumentError("checkpoint entry name '" + name +
                                        "' is not a single path component");
    }
    const std::string step_dir = StepDir(c_.dir, step);
    RETURN_IF_ERROR(internal::MakeDirs(c_.dir));
    if (mkdir(step_dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoToStatus(errno, "mkdir " + step_dir);
    }
    struct stat st {};
    if (lstat(step_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          step_dir + " is not a directory (a symlink is not followed)");
    }
    const std::string path = target().Where(step, name);
    const int fd = open(path.c_str(),
                        O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                        0644);
    if (fd < 0) return ErrnoToStatus(errno, "open " + path);
    return std::unique_ptr<DataSink>(
        std::make_unique<MemSink>(this, fd, path, step, name));
  }

  // After the local stream is durable: admitted (else removed), then on the
  // buddy.
  Status Finished(int64_t step, const std::string& name, uint64_t size,
                  int fd) {
    const std::string path = target().Where(step, name);
    if (ReplicaClient* self = Self()) {
      Status admitted = self->Admit(c_.job, step, name, 0);
      if (!admitted.ok()) {
        unlink(path.c_str());
        return admitted;
      }
    }
    {
      MutexLock lock(mu_);
      last_size_[name] = size;
    }
    ReplicaClient* buddy = Buddy();
    if (buddy == nullptr) return absl::OkStatus();
    return Replicated(buddy->PutFile(c_.job, step, name, fd, size, &bucket_),
                      buddy, step, name);
  }

  Status PutMeta(int64_t step, const std::string& name,
                 const std::string& bytes) override {
    RETURN_IF_ERROR(target().PutMeta(step, name, bytes));
    if (step < 0) return absl::OkStatus();  // LATEST: a local convenience
    if (name != "manifest.pb") {
      ReplicaClient* buddy = Buddy();
      if (buddy == nullptr) return absl::OkStatus();
      return Replicated(buddy->PutBytes(c_.job, step, name, bytes, &bucket_),
                        buddy, step, name);
    }
    // The commit: on every node, so each lists the step. The buddy's copy
    // is required (losing node 0 must leave one); the others' are best
    // effort.
    for (size_t i = 0; i < clients_.size(); ++i) {
      if (static_cast<int>(i) == c_.node) continue;
      Status st = clients_[i]->PutBytes(c_.job, step, name, bytes, nullptr);
      if (!st.ok() && clients_[i].get() == Buddy()) {
        return Replicated(st, clients_[i].get(), step, name);
      }
      if (!st.ok()) {
        log_->warn("mem:// manifest of step {} not copied to {}: {}", step,
                   clients_[i]->endpoint(), std::string(st.message()));
      }
    }
    return absl::OkStatus();
  }

  StatusOr<std::string> GetMeta(int64_t step, const std::string& name) override {
    auto local = target().GetMeta(step, name);
    if (local.ok() || step < 0) return local;
    std::vector<std::string> tried;
    for (int i : PeerOrder()) {
      auto got = clients_[i]->GetAll(c_.job, step, name);
      if (got.ok()) return got;
      tried.push_back(absl::StrCat(clients_[i]->endpoint(), ": ",
                                   got.status().message()));
      if (!absl::IsNotFound(got.status())) {
        log_->warn("mem:// {} of step {} from peer {}: {}", name, step,
                   clients_[i]->endpoint(), std::string(got.status().message()));
      }
    }
    return absl::NotFoundError(absl::StrCat(
        "mem:// ", name, " of step ", step, " is on no node (local: ",
        local.status().message(), "; ", absl::StrJoin(tried, "; "), ")"));
  }

  Status ReadData(int64_t step, const std::string& name, uint64_t offset,
                  void* buf, size_t n) override {
    ASSIGN_OR_RETURN(int source, SourceOf(step, name));
    if (source < 0) return target().ReadData(step, name, offset, buf, n);
    Status st = clients_[source]->Get(c_.job, step, name, offset, buf, n);
    if (!st.ok()) {
      return absl::DataLossError(absl::StrCat(
          "mem:// ", name, " of step ", step, " from peer ",
          clients_[source]->endpoint(), ": ", st.message()));
    }
    return st;
  }

  // After a checksum mismatch: the copies other than the one ReadData read,
  // this node's first (when ReadData read a peer's), then the peers', the
  // buddy first.
  Status ReadOtherCopy(int64_t step, const std::string& name, uint64_t offset,
                       void* buf, size_t n, int k) override {
    ASSIGN_OR_RETURN(int source, SourceOf(step, name));
    std::vector<int> others;
    if (source >= 0) others.push_back(-1);
    for (int i : PeerOrder()) {
      if (i != source) others.push_back(i);
    }
    if (k < 0 || k >= static_cast<int>(others.size())) {
      return absl::OutOfRangeError("no other copy");
    }
    const int from = others[k];
    if (from < 0) return target().ReadData(step, name, offset, buf, n);
    log_->warn("mem:// {} of step {}: reading peer {}'s copy (node {})", name,
               step, clients_[from]->endpoint(), from);
    return clients_[from]->Get(c_.job, step, name, offset, buf, n);
  }

  StatusOr<std::vector<int64_t>> Steps() override {
    std::set<int64_t> steps;
    if (auto local = target().Steps(); local.ok()) {
      steps.insert(local->begin(), local->end());
    }
    for (int i : PeerOrder()) {
      auto listed = clients_[i]->List(c_.job);
      if (!listed.ok()) {
        log_->warn("mem:// peer {} (node {}) not listed: {}",
                   clients_[i]->endpoint(), i,
                   std::string(listed.status().message()));
        continue;
      }
      steps.insert(listed->begin(), listed->end());
    }
    return std::vector<int64_t>(steps.begin(), steps.end());
  }

  // Pins the local copy and every peer's that has the step; NotFound only
  // when no node holds it committed.
  StatusOr<std::unique_ptr<StepPin>> PinStep(int64_t step) override {
    auto local = target().PinStep(step);
    if (!local.ok() && !absl::IsNotFound(local.status())) return local.status();
    std::vector<int> fds;
    for (int i : PeerOrder()) {
      auto fd = clients_[i]->Pin(c_.job, step);
      if (fd.ok()) {
        fds.push_back(*fd);
      } else if (!absl::IsNotFound(fd.status())) {
        log_->warn("mem:// step {} not pinned on {}: {}", step,
                   clients_[i]->endpoint(), std::string(fd.status().message()));
      }
    }
    if (!local.ok() && fds.empty()) return local.status();
    return std::unique_ptr<StepPin>(std::make_unique<MemPin>(
        local.ok() ? std::move(*local) : nullptr, std::move(fds)));
  }

  // Peers first: a peer whose copy a reader pins refuses (then nothing
  // here is removed and retention tries again later); unreachable peers
  // are warned about (their copy goes with their job directory).
  Status RemoveStep(int64_t step) override {
    Status pinned;
    for (size_t i = 0; i < clients_.size(); ++i) {
      if (static_cast<int>(i) == c_.node) continue;
      Status st = clients_[i]->Drop(c_.job, step);
      if (absl::IsFailedPrecondition(st)) {
        pinned = st;
      } else if (!st.ok()) {
        log_->warn("mem:// step {} not removed on {}: {}", step,
                   clients_[i]->endpoint(), std::string(st.message()));
      }
    }
    if (!pinned.ok()) return pinned;
    RETURN_IF_ERROR(target().RemoveStep(step));
    MutexLock lock(mu_);
    std::erase_if(source_,
                  [&](const auto& kv) { return kv.first.first == step; });
    return absl::OkStatus();
  }

  std::string Where(int64_t step, const std::string& name) const override {
    return absl::StrCat("mem://", target().Where(step, name));
  }

 private:
  ReplicaClient* Self() const {
    return clients_.empty() ? nullptr : clients_[c_.node].get();
  }
  ReplicaClient* Buddy() const {
    if (clients_.size() < 2) return nullptr;
    return clients_[(c_.node + 1) % clients_.size()].get();
  }
  // Peers other than this node, the buddy first.
  std::vector<int> PeerOrder() const {
    std::vector<int> order;
    const int n = static_cast<int>(clients_.size());
    for (int k = 1; k < n; ++k) order.push_back((c_.node + k) % n);
    return order;
  }
  Status Replicated(const Status& st, ReplicaClient* to, int64_t step,
                    const std::string& name) {
    if (st.ok()) return st;
    return Status(st.code(),
                  absl::StrCat("replica of ", name, " of step ", step,
                               " to buddy ", to->endpoint(), ": ",
                               st.message()));
  }
  // -1: the local file; else the peer holding it (asked once per entry).
  StatusOr<int> SourceOf(int64_t step, const std::string& name) {
    {
      MutexLock lock(mu_);
      if (auto it = source_.find({step, name}); it != source_.end())
        return it->second;
    }
    int source = -2;
    struct stat st {};
    if (lstat(target().Where(step, name).c_str(), &st) == 0 &&
        S_ISREG(st.st_mode)) {
      source = -1;
    } else {
      for (int i : PeerOrder()) {
        if (clients_[i]->Stat(c_.job, step, name).ok()) {
          source = i;
          // Not in this node's memory (a new node, or the copy is gone):
          // worth knowing where a restore came from.
          log_->warn("mem:// {} of step {} read from peer {} (node {}): not "
                     "in this node's memory",
                     name, step, clients_[i]->endpoint(), i);
          break;
        }
      }
    }
    if (source == -2) {
      return absl::DataLossError(absl::StrCat("mem:// ", name, " of step ",
                                              step, " is on no reachable node"));
    }
    MutexLock lock(mu_);
    source_[{step, name}] = source;
    return source;
  }

  const MemConfig c_;
  std::vector<std::unique_ptr<ReplicaClient>> clients_;
  mem::TokenBucket bucket_;
  Logger log_;
  Mutex mu_;
  std::map<std::string, uint64_t> last_size_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int64_t, std::string>, int> source_ ABSL_GUARDED_BY(mu_);
};

Status MemSink::Finish() {
  return owner_->Finished(step_, name_, size_, fd_);
}

}  // namespace

StatusOr<std::shared_ptr<Storage>> NewMemStorage(const std::string& path,
                                                 int rank) {
  ASSIGN_OR_RETURN(MemConfig c, ConfigFromEnv(path));
  return std::shared_ptr<Storage>(std::make_shared<MemStorage>(std::move(c), rank));
}

StatusOr<std::string> MemTierDir(const std::string& uri) {
  ASSIGN_OR_RETURN(MemConfig c, ConfigFromEnv(uri.substr(6)));
  return c.dir;
}

}  // namespace strata::checkpoint
