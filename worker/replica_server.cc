#include "worker/replica_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <utility>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/storage.h"
#include "common/net.h"
#include "worker/private_dir.h"

namespace strata::worker {
namespace fs = std::filesystem;
using checkpoint::mem::Op;
using checkpoint::mem::Request;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double Mib(uint64_t b) { return static_cast<double>(b) / kMiB; }

// The step of a "step-<12 digits>" directory name, or -1.
int64_t StepOf(const std::string& name) {
  int64_t step = -1;
  if (name.size() != 17 || name.rfind("step-", 0) != 0 ||
      !absl::SimpleAtoi(name.substr(5), &step)) {
    return -1;
  }
  return step;
}

bool IsRegular(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

uint64_t HostMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib * 1024;
  }
  return 0;
}

StatusOr<uint64_t> ParseMemLimit(const std::string& text, uint64_t host) {
  const std::string t(absl::StripAsciiWhitespace(text));
  double fraction = 0;
  if (absl::SimpleAtod(t, &fraction)) {
    if (!(fraction > 0 && fraction <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--mem-limit ", text,
          ": a fraction of host memory must be in (0, 1]; or give a size "
          "such as 512MiB"));
    }
    if (host == 0) {
      return absl::InvalidArgumentError(
          "--mem-limit: host memory unknown (/proc/meminfo); give a size "
          "such as 512MiB");
    }
    return static_cast<uint64_t>(fraction * static_cast<double>(host));
  }
  static const std::pair<const char*, uint64_t> kUnits[] = {
      {"KiB", uint64_t{1} << 10},
      {"MiB", uint64_t{1} << 20},
      {"GiB", uint64_t{1} << 30}};
  for (const auto& [unit, scale] : kUnits) {
    if (!absl::EndsWith(t, unit)) continue;
    double n = 0;
    if (absl::SimpleAtod(t.substr(0, t.size() - std::strlen(unit)), &n) &&
        n > 0 && n < 1e9) {
      return static_cast<uint64_t>(n * static_cast<double>(scale));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--mem-limit '", text,
                   "': expected a fraction of host memory in (0, 1] or a "
                   "size such as 64KiB, 512MiB, 2GiB"));
}

ReplicaServer::ReplicaServer(std::string dir, uint64_t limit_bytes,
                             std::string node, Logger logger)
    : dir_(std::move(dir)),
      limit_(limit_bytes),
      node_(std::move(node)),
      logger_(std::move(logger)) {}

ReplicaServer::~ReplicaServer() {
  stopping_ = true;
  if (listen_fd_ >= 0) shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  UniqueLock lock(mu_);
  cv_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return connections_ == 0;
  });
}

Status ReplicaServer::Start(const std::string& bind_addr, int port,
                            const std::string& advertised_host) {
  if (Status s = MakePrivateDir(dir_); !s.ok()) {
    return Status(s.code(), absl::StrCat("--mem-dir: ", s.message()));
  }
  auto fd = net::ListenTcp(bind_addr, port, 64);
  if (!fd.ok()) {
    return Status(fd.status().code(),
                  absl::StrCat("replica server on ", bind_addr, ":", port, ": ",
                               fd.status().message()));
  }
  listen_fd_ = *fd;
  ASSIGN_OR_RETURN(int bound, net::BoundPort(listen_fd_));
  endpoint_ = absl::StrCat(advertised_host, ":", bound);
  acceptor_ = std::thread([this] { AcceptLoop(); });
  // On stdout, like the coordinator's "listening" line: what peers dial.
  std::printf("memory tier: %s (limit %.1f MiB), replicas served at %s\n",
              dir_.c_str(), Mib(limit_), endpoint_.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

void ReplicaServer::AcceptLoop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    sockaddr_in sa{};
    socklen_t len = sizeof(sa);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len,
                     SOCK_CLOEXEC);
    if (fd < 0) continue;
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
    std::string peer = absl::StrCat(ip, ":", ntohs(sa.sin_port));
    {
      MutexLock lock(mu_);
      if (connections_ >= kMaxConnections) {
        logger_->warn("memory tier: refusing {}: {} connections open", peer,
                      connections_);
        close(fd);
        continue;
      }
      ++connections_;
    }
    std::thread([this, fd, peer] { Serve(fd, peer); }).detach();
  }
}

void ReplicaServer::Serve(int fd, std::string peer) {
  checkpoint::mem::SetTimeouts(fd, kTimeoutMs);
  Status st = Handle(fd, peer);
  if (!st.ok() && !absl::IsNotFound(st)) {
    logger_->warn("memory tier: request from {}: {}", peer,
                  std::string(st.message()));  // names what was wrong
  }
  close(fd);
  MutexLock lock(mu_);
  --connections_;
  cv_.notify_all();
}

std::string ReplicaServer::StepPath(const std::string& job,
                                    int64_t step) const {
  return step < 0 ? absl::StrCat(dir_, "/", job)
                  : checkpoint::StepDir(absl::StrCat(dir_, "/", job), step);
}

std::string ReplicaServer::EntryPath(const Request& r) const {
  return absl::StrCat(StepPath(r.job, r.step), "/", r.name);
}

uint64_t ReplicaServer::UsedBytes() {
  uint64_t used = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir_, ec), end; !ec && it != end;
       it.increment(ec)) {
    struct stat st {};
    if (lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      used += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  MutexLock lock(mu_);
  return used + in_flight_;
}

Status ReplicaServer::Reserve(const Request& r, uint64_t bytes,
                              const std::string& peer) {
  const uint64_t used = UsedBytes();
  MutexLock lock(mu_);
  if (used + bytes > limit_) {
    Status refused = absl::ResourceExhaustedError(absl::StrFormat(
        "memory tier of worker %s is full: %s of %s step %d from %s would "
        "bring it to %.1f MiB (it holds %.1f MiB); limit %.1f MiB "
        "(strata-worker --mem-limit)",
        node_, r.name, r.job, r.step, peer, Mib(used + bytes), Mib(used),
        Mib(limit_)));
    logger_->warn("{}", std::string(refused.message()));
    QueueNotice(r.job, "mem_full", std::string(refused.message()));
    return refused;
  }
  in_flight_ += bytes;
  return absl::OkStatus();
}

void ReplicaServer::Notice(const std::string& job, const std::string& kind,
                           const std::string& message) {
  MutexLock lock(mu_);
  QueueNotice(job, kind, message);
}

void ReplicaServer::QueueNotice(const std::string& job,
                                const std::string& kind,
                                const std::string& message) {
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  auto [it, fresh] = noticed_.try_emplace({job, kind}, now);
  if (!fresh && now - it->second < kNoticeEveryMs) return;
  it->second = now;
  if (notices_.size() >= 64) return;  // bounded until the next heartbeat
  control::MemTierNotice n;
  n.set_job_id(job);
  n.set_kind(kind);
  n.set_message(message);
  notices_.push_back(std::move(n));
}

std::vector<control::MemTierNotice> ReplicaServer::TakeNotices() {
  MutexLock lock(mu_);
  return std::exchange(notices_, {});
}

void ReplicaServer::Release(uint64_t bytes) {
  MutexLock lock(mu_);
  in_flight_ -= std::min(in_flight_, bytes);
}

Status ReplicaServer::Handle(int fd, const std::string& peer) {
  auto req = checkpoint::mem::RecvRequest(fd, peer);
  if (!req.ok()) {
    (void)checkpoint::mem::SendReply(fd, req.status(), 0, peer);
    return req.status();
  }
  const Request& r = *req;
  switch (r.op) {
    case Op::kPut:
      return HandlePut(fd, r, peer);
    case Op::kGet:
      return HandleGet(fd, r, peer);
    case Op::kStat: {
      struct stat st {};
      const std::string path = EntryPath(r);
      if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        Status missing = absl::NotFoundError(
            absl::StrCat("worker ", node_, " has no ", r.job, " ", path));
        (void)checkpoint::mem::SendReply(fd, missing, 0, peer);
        return missing;
      }
      char b[8];
      uint64_t size = static_cast<uint64_t>(st.st_size);
      for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(size >> (8 * i));
      RETURN_IF_ERROR(checkpoint::mem::SendReply(fd, absl::OkStatus(), 8, peer));
      return checkpoint::mem::WriteAll(fd, b, 8, peer);
    }
    case Op::kList: {
      std::vector<int64_t> steps;
      std::error_code ec;
      for (fs::directory_iterator it(StepPath(r.job, -1), ec), end;
           !ec && it != end; it.increment(ec)) {
        const int64_t step = StepOf(it->path().filename().string());
        if (step >= 0 &&
            IsRegular(absl::StrCat(it->path().string(), "/manifest.pb"))) {
          steps.push_back(step);
        }
      }
      std::sort(steps.begin(), steps.end());
      std::string b;
      for (int64_t s : steps) {
        for (int i = 0; i < 8; ++i) {
          b.push_back(static_cast<char>(static_cast<uint64_t>(s) >> (8 * i)));
        }
      }
      RETURN_IF_ERROR(
          checkpoint::mem::SendReply(fd, absl::OkStatus(), b.size(), peer));
      return checkpoint::mem::WriteAll(fd, b.data(), b.size(), peer);
    }
    case Op::kDrop: {
      // A reader's pin (kPin, or a local rank's StepPin: both a shared
      // flock on the manifest) keeps the step: refused, nothing removed.
      const std::string manifest = StepPath(r.job, r.step) + "/manifest.pb";
      int lock_fd = open(manifest.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (lock_fd >= 0 && flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
        close(lock_fd);
        Status pinned = absl::FailedPreconditionError(absl::StrCat(
            "worker ", node_, ": step ", r.step, " of ", r.job,
            " is pinned by a reader"));
        return checkpoint::mem::SendReply(fd, pinned, 0, peer);
      }
      std::error_code ec;
      // Uncommit first (the manifest), then the rest.
      unlink(manifest.c_str());
      if (lock_fd >= 0) close(lock_fd);
      fs::remove_all(StepPath(r.job, r.step), ec);
      Status st = ec ? absl::UnavailableError(absl::StrCat(
                           "remove ", StepPath(r.job, r.step), ": ",
                           ec.message()))
                     : absl::OkStatus();
      return checkpoint::mem::SendReply(fd, st, 0, peer);
    }
    case Op::kPin:
      return HandlePin(fd, r, peer);
    case Op::kAdmit: {
      Status st = Reserve(r, r.length, peer);
      if (st.ok()) Release(r.length);  // a check: the rank writes the file
      return checkpoint::mem::SendReply(fd, st, 0, peer);
    }
  }
  return absl::InvalidArgumentError("unreachable");
}

Status ReplicaServer::HandlePut(int fd, const Request& r,
                                const std::string& peer) {
  Status admitted = Reserve(r, r.length, peer);
  if (admitted.ok()) {
    std::error_code ec;
    fs::create_directories(StepPath(r.job, r.step), ec);
    if (ec) {
      Release(r.length);
      admitted = absl::UnavailableError(absl::StrCat(
          "mkdir ", StepPath(r.job, r.step), ": ", ec.message()));
    }
  }
  RETURN_IF_ERROR(checkpoint::mem::SendReply(fd, admitted, 0, peer));
  if (!admitted.ok()) return admitted;
  const std::string path = EntryPath(r), part = path + ".part";
  Status st = [&]() -> Status {
    int out = open(part.c_str(),
                   O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (out < 0) return ErrnoToStatus(errno, "open " + part);
    // The one CPU copy of a replica on this side: the socket's pages into
    // the file's (mem_wire.h RecvToFile).
    Status copied = checkpoint::mem::RecvToFile(fd, out, r.length, peer);
    close(out);
    if (copied.ok() && rename(part.c_str(), path.c_str()) != 0) {
      copied = ErrnoToStatus(errno, "rename " + part);
    }
    if (!copied.ok()) unlink(part.c_str());
    return copied;
  }();
  Release(r.length);
  if (st.ok() && r.name == "manifest.pb" && r.step >= 0) {
    DropUncommittedBefore(r.job, r.step);
  }
  RETURN_IF_ERROR(checkpoint::mem::SendReply(fd, st, 0, peer));
  return st;
}

Status ReplicaServer::HandlePin(int fd, const Request& r,
                                const std::string& peer) {
  const std::string manifest = StepPath(r.job, r.step) + "/manifest.pb";
  int lock_fd = open(manifest.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (lock_fd < 0 || flock(lock_fd, LOCK_SH) != 0) {
    if (lock_fd >= 0) close(lock_fd);
    Status missing = absl::NotFoundError(absl::StrCat(
        "worker ", node_, " has no committed step ", r.step, " of ", r.job));
    (void)checkpoint::mem::SendReply(fd, missing, 0, peer);
    return missing;
  }
  Status st = checkpoint::mem::SendReply(fd, absl::OkStatus(), 0, peer);
  // Held until the reader closes the connection (or this server stops).
  char b;
  while (st.ok() && !stopping_) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
  }
  close(lock_fd);
  return absl::OkStatus();
}

Status ReplicaServer::HandleGet(int fd, const Request& r,
                                const std::string& peer) {
  const std::string path = EntryPath(r);
  int in = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) {
    Status missing =
        errno == ENOENT
            ? absl::NotFoundError(
                  absl::StrCat("worker ", node_, " has no ", path))
            : ErrnoToStatus(errno, "open " + path);
    (void)checkpoint::mem::SendReply(fd, missing, 0, peer);
    return missing;
  }
  struct stat st {};
  fstat(in, &st);
  if (r.offset + r.length > static_cast<uint64_t>(st.st_size)) {
    close(in);
    Status shortfile = absl::DataLossError(absl::StrCat(
        "worker ", node_, ": ", path, " has ", st.st_size, " bytes, asked ",
        r.length, " at ", r.offset));
    (void)checkpoint::mem::SendReply(fd, shortfile, 0, peer);
    return shortfile;
  }
  Status sent = checkpoint::mem::SendReply(fd, absl::OkStatus(), r.length, peer);
  if (sent.ok()) {
    sent = checkpoint::mem::SendFileRange(fd, in, r.offset, r.length, nullptr,
                                          peer);
  }
  close(in);
  return sent;
}

void ReplicaServer::DropUncommittedBefore(const std::string& job,
                                          int64_t step) {
  std::error_code ec;
  std::vector<fs::path> victims;
  for (fs::directory_iterator it(StepPath(job, -1), ec), end; !ec && it != end;
       it.increment(ec)) {
    const int64_t s = StepOf(it->path().filename().string());
    if (s >= 0 && s < step &&
        !IsRegular(absl::StrCat(it->path().string(), "/manifest.pb"))) {
      victims.push_back(it->path());
    }
  }
  for (const auto& v : victims) fs::remove_all(v, ec);
}

int ReplicaServer::Sweep(const std::set<std::string>& held_jobs,
                         int64_t retention_ms) {
  int removed = 0;
  const auto now = fs::file_time_type::clock::now();
  std::error_code ec;
  std::vector<fs::path> jobs;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_directory() && !it->is_symlink() &&
        !held_jobs.contains(it->path().filename().string())) {
      jobs.push_back(it->path());
    }
  }
  for (const auto& job : jobs) {
    auto newest = fs::last_write_time(job, ec);
    for (fs::recursive_directory_iterator it(job, ec), end; !ec && it != end;
         it.increment(ec)) {
      newest = std::max(newest, it->last_write_time(ec));
    }
    const auto age =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - newest);
    if (age.count() < retention_ms) continue;
    fs::remove_all(job, ec);
    if (!ec) {
      ++removed;
      logger_->info("memory tier: removed {} (no rank here, idle {} s)",
                    job.string(), age.count() / 1000);
    }
  }
  return removed;
}

}  // namespace strata::worker
