#include "checkpoint/mem_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "checkpoint/storage.h"
#include "common/net.h"

namespace strata::checkpoint::mem {
namespace {

constexpr uint32_t kMagic = 0x31524d53;  // "SMR1"

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Fixed request header: magic u32, op u8, job length u8, name length u8,
// pad u8, step i64, offset u64, length u64.
constexpr size_t kHeaderBytes = 4 + 4 + 8 + 8 + 8;
// Reply header: code u32, message length u32, payload length u64.
constexpr size_t kReplyBytes = 4 + 4 + 8;
constexpr size_t kMaxMessage = 4096;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

void SetTimeouts(int fd, int timeout_ms) {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

Status WriteAll(int fd, const void* data, size_t n, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      return absl::UnavailableError(
          absl::StrCat("send to ", what, ": ",
                       w < 0 ? std::strerror(errno) : "connection closed"));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

Status ReadAll(int fd, void* data, size_t n, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      return absl::UnavailableError(absl::StrCat(
          "receive from ", what, ": ",
          r < 0 ? std::strerror(errno) : "connection closed early"));
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

StatusOr<int> Dial(const std::string& endpoint, int timeout_ms) {
  auto hp = net::ParseHostPort(endpoint);
  if (!hp.ok()) return hp.status();
  auto ip = net::ResolveIpv4(hp->host);
  if (!ip.ok()) {
    return absl::UnavailableError(
        absl::StrCat("replica server ", endpoint, ": ", ip.status().message()));
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(hp->port));
  inet_pton(AF_INET, ip->c_str(), &sa.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoToStatus(errno, "socket");
  SetTimeouts(fd, timeout_ms);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat(
        "connect to replica server ", endpoint, ": ", std::strerror(err)));
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

Status SendRequest(int fd, const Request& r, const std::string& what) {
  std::string h;
  h.reserve(kHeaderBytes + r.job.size() + r.name.size());
  for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>(kMagic >> (8 * i)));
  h.push_back(static_cast<char>(r.op));
  h.push_back(static_cast<char>(r.job.size()));
  h.push_back(static_cast<char>(r.name.size()));
  h.push_back(0);
  PutU64(&h, static_cast<uint64_t>(r.step));
  PutU64(&h, r.offset);
  PutU64(&h, r.length);
  h += r.job;
  h += r.name;
  return WriteAll(fd, h.data(), h.size(), what);
}

StatusOr<Request> RecvRequest(int fd, const std::string& what) {
  char h[kHeaderBytes];
  RETURN_IF_ERROR(ReadAll(fd, h, sizeof(h), what));
  const uint32_t magic = static_cast<uint32_t>(GetU64(h) & 0xffffffffu);
  if (magic != kMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a replica request (bad magic)"));
  }
  Request r;
  const uint8_t op = static_cast<uint8_t>(h[4]);
  if (op < 1 || op > 7) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown op ", op));
  }
  r.op = static_cast<Op>(op);
  r.job.resize(static_cast<uint8_t>(h[5]));
  r.name.resize(static_cast<uint8_t>(h[6]));
  r.step = static_cast<int64_t>(GetU64(h + 8));
  r.offset = GetU64(h + 16);
  r.length = GetU64(h + 24);
  if (!r.job.empty()) RETURN_IF_ERROR(ReadAll(fd, r.job.data(), r.job.size(), what));
  if (!r.name.empty())
    RETURN_IF_ERROR(ReadAll(fd, r.name.data(), r.name.size(), what));
  const bool needs_name =
      r.op != Op::kList && r.op != Op::kDrop && r.op != Op::kPin;
  if (!ValidName(r.job) || (needs_name && !ValidName(r.name)) ||
      (!needs_name && !r.name.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("job id '", r.job,
                     "' or entry name '", r.name,
                     "' is not a single path component"));
  }
  if (r.step < -1 || ((r.op == Op::kDrop || r.op == Op::kPin) && r.step < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad step ", r.step));
  }
  if (r.length > kMaxEntryBytes || r.offset > kMaxEntryBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        r.length, " bytes at ", r.offset,
        " (at most ", kMaxEntryBytes, ")"));
  }
  return r;
}

Status SendReply(int fd, const Status& st, uint64_t length,
                 const std::string& what) {
  std::string h;
  const uint32_t code = static_cast<uint32_t>(st.code());
  std::string msg(st.message().substr(0, kMaxMessage));
  for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>(code >> (8 * i)));
  const uint32_t ml = static_cast<uint32_t>(msg.size());
  for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>(ml >> (8 * i)));
  PutU64(&h, length);
  h += msg;
  return WriteAll(fd, h.data(), h.size(), what);
}

StatusOr<Reply> RecvReply(int fd, const std::string& what) {
  char h[kReplyBytes];
  RETURN_IF_ERROR(ReadAll(fd, h, sizeof(h), what));
  const uint64_t first = GetU64(h);
  const uint32_t code = static_cast<uint32_t>(first & 0xffffffffu);
  const uint32_t ml = static_cast<uint32_t>(first >> 32);
  Reply r;
  r.length = GetU64(h + 8);
  if (ml > kMaxMessage || code > 16 || r.length > kMaxEntryBytes) {
    return absl::DataLossError(
        absl::StrCat("malformed reply from replica server ", what));
  }
  std::string msg(ml, '\0');
  if (ml > 0) RETURN_IF_ERROR(ReadAll(fd, msg.data(), ml, what));
  r.status = Status(static_cast<absl::StatusCode>(code), msg);
  return r;
}

TokenBucket::TokenBucket(double bytes_per_s, double burst_bytes)
    : rate_(bytes_per_s),
      burst_(std::max(burst_bytes, 1.0)),
      tokens_(burst_),
      last_(std::chrono::steady_clock::now()) {}

void TokenBucket::Acquire(uint64_t n) {
  if (rate_ <= 0) return;
  double left = static_cast<double>(n);
  while (left > 0) {
    const double want = std::min(left, burst_);
    double wait_s = 0;
    {
      MutexLock lock(mu_);
      const auto now = std::chrono::steady_clock::now();
      tokens_ = std::min(
          burst_, tokens_ + rate_ * std::chrono::duration<double>(now - last_)
                                        .count());
      last_ = now;
      if (tokens_ >= want) {
        tokens_ -= want;
        left -= want;
        continue;
      }
      wait_s = (want - tokens_) / rate_;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
  }
}

namespace {

// sendfile(2) has no MSG_NOSIGNAL: writing to a socket whose peer is gone
// raises SIGPIPE, which would kill a rank (its library cannot ignore the
// signal for the whole program). For the calling thread's sendfile calls
// SIGPIPE is blocked; one it raised is taken off the thread's pending set
// before the mask is restored, so the call only fails with EPIPE (the
// idiom of signal(7) "Signal mask and pending signals").
class ScopedNoSigpipe {
 public:
  ScopedNoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~ScopedNoSigpipe() {
    if (!was_pending_) {
      sigset_t now;
      sigpending(&now);
      const timespec zero{};
      if (sigismember(&now, SIGPIPE) == 1) (void)sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ScopedNoSigpipe(const ScopedNoSigpipe&) = delete;
  ScopedNoSigpipe& operator=(const ScopedNoSigpipe&) = delete;

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

}  // namespace

Status SendFileRange(int sock, int file_fd, uint64_t offset, uint64_t n,
                     TokenBucket* bucket, const std::string& what) {
  const ScopedNoSigpipe no_sigpipe;
  constexpr size_t kPiece = 1 << 20;
  bool use_sendfile = true;
  std::vector<char> buf;
  while (n > 0) {
    const size_t piece = static_cast<size_t>(std::min<uint64_t>(n, kPiece));
    if (bucket != nullptr) bucket->Acquire(piece);
    for (size_t left = piece; left > 0;) {
      ssize_t w = -1;
      if (use_sendfile) {
        off_t off = static_cast<off_t>(offset);
        w = sendfile(sock, file_fd, &off, left);
        if (w < 0 && (errno == EINVAL || errno == ENOSYS)) {
          use_sendfile = false;  // not supported here: copy through a buffer
          continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w == 0) {
          return absl::DataLossError(
              absl::StrCat("sending to ", what, ": the file ended at ", offset));
        }
        if (w < 0) {
          return absl::UnavailableError(
              absl::StrCat("send to ", what, ": ", std::strerror(errno)));
        }
      } else {
        buf.resize(kPiece);
        ssize_t r = pread(file_fd, buf.data(), left, static_cast<off_t>(offset));
        if (r <= 0) {
          return ErrnoToStatus(r == 0 ? EIO : errno,
                               absl::StrCat("read at ", offset, " for ", what));
        }
        RETURN_IF_ERROR(WriteAll(sock, buf.data(), static_cast<size_t>(r), what));
        w = r;
      }
      offset += static_cast<uint64_t>(w);
      left -= static_cast<size_t>(w);
      n -= static_cast<uint64_t>(w);
    }
  }
  return absl::OkStatus();
}

Status RecvToFile(int sock, int file_fd, uint64_t n, const std::string& what) {
  int p[2] = {-1, -1};
  bool use_splice = pipe2(p, O_CLOEXEC) == 0;
  if (use_splice) (void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
  std::vector<char> buf;
  Status st;
  while (st.ok() && n > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(n, 1 << 20));
    if (use_splice) {
      ssize_t in = splice(sock, nullptr, p[1], nullptr, want, SPLICE_F_MOVE);
      if (in < 0 && errno == EINTR) continue;
      if (in < 0 && errno == EINVAL) {
        use_splice = false;  // nothing is in the pipe yet: plain copies
        continue;
      }
      if (in <= 0) {
        st = absl::UnavailableError(absl::StrCat(
            "receive from ", what, ": ",
            in < 0 ? std::strerror(errno) : "connection closed early"));
        break;
      }
      for (ssize_t out_left = in; out_left > 0;) {
        ssize_t out = splice(p[0], nullptr, file_fd, nullptr,
                             static_cast<size_t>(out_left), SPLICE_F_MOVE);
        if (out < 0 && errno == EINTR) continue;
        if (out <= 0) {
          st = ErrnoToStatus(out == 0 ? EIO : errno, "write of " + what);
          break;
        }
        out_left -= out;
      }
      n -= static_cast<uint64_t>(in);
    } else {
      buf.resize(1 << 20);
      st = ReadAll(sock, buf.data(), want, what);
      if (st.ok() && write(file_fd, buf.data(), want) !=
                         static_cast<ssize_t>(want)) {
        st = ErrnoToStatus(errno == 0 ? ENOSPC : errno, "write of " + what);
      }
      n -= want;
    }
  }
  if (p[0] >= 0) {
    close(p[0]);
    close(p[1]);
  }
  return st;
}

StatusOr<std::pair<int, Reply>> ReplicaClient::Call(const Request& r) {
  ASSIGN_OR_RETURN(int fd, Dial(endpoint_, timeout_ms_));
  Status sent = SendRequest(fd, r, endpoint_);
  auto reply = sent.ok() ? RecvReply(fd, endpoint_) : StatusOr<Reply>(sent);
  if (!reply.ok()) {
    close(fd);
    return reply.status();
  }
  return std::make_pair(fd, *reply);
}

Status ReplicaClient::Put(
    const std::string& job, int64_t step, const std::string& name,
    uint64_t size, const std::function<Status(uint64_t, char*, size_t)>& read,
    TokenBucket* bucket) {
  Request r{Op::kPut, job, step, name, 0, size};
  ASSIGN_OR_RETURN(auto call, Call(r));
  Fd fd(call.first);
  if (!call.second.status.ok()) return call.second.status;  // refused
  constexpr size_t kPiece = 1 << 20;
  std::vector<char> buf(std::min<uint64_t>(kPiece, std::max<uint64_t>(size, 1)));
  for (uint64_t off = 0; off < size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kPiece, size - off));
    RETURN_IF_ERROR(read(off, buf.data(), n));
    if (bucket != nullptr) bucket->Acquire(n);
    RETURN_IF_ERROR(WriteAll(fd.get(), buf.data(), n, endpoint_));
    off += n;
  }
  ASSIGN_OR_RETURN(Reply done, RecvReply(fd.get(), endpoint_));
  return done.status;
}

Status ReplicaClient::PutFile(const std::string& job, int64_t step,
                              const std::string& name, int file_fd,
                              uint64_t size, TokenBucket* bucket) {
  ASSIGN_OR_RETURN(auto call, Call({Op::kPut, job, step, name, 0, size}));
  Fd fd(call.first);
  if (!call.second.status.ok()) return call.second.status;  // refused
  RETURN_IF_ERROR(SendFileRange(fd.get(), file_fd, 0, size, bucket, endpoint_));
  ASSIGN_OR_RETURN(Reply done, RecvReply(fd.get(), endpoint_));
  return done.status;
}

Status ReplicaClient::PutBytes(const std::string& job, int64_t step,
                               const std::string& name,
                               const std::string& bytes, TokenBucket* bucket) {
  return Put(
      job, step, name, bytes.size(),
      [&](uint64_t off, char* buf, size_t n) {
        std::memcpy(buf, bytes.data() + off, n);
        return absl::OkStatus();
      },
      bucket);
}

Status ReplicaClient::Get(const std::string& job, int64_t step,
                          const std::string& name, uint64_t offset, void* buf,
                          size_t n) {
  ASSIGN_OR_RETURN(auto call, Call({Op::kGet, job, step, name, offset, n}));
  Fd fd(call.first);
  if (!call.second.status.ok()) return call.second.status;
  if (call.second.length != n) {
    return absl::DataLossError(absl::StrCat("replica server ", endpoint_,
                                            " sent ", call.second.length,
                                            " bytes of ", name, ", asked ", n));
  }
  return ReadAll(fd.get(), buf, n, endpoint_);
}

StatusOr<std::string> ReplicaClient::GetAll(const std::string& job,
                                            int64_t step,
                                            const std::string& name) {
  ASSIGN_OR_RETURN(uint64_t size, Stat(job, step, name));
  std::string out(size, '\0');
  RETURN_IF_ERROR(Get(job, step, name, 0, out.data(), size));
  return out;
}

StatusOr<uint64_t> ReplicaClient::Stat(const std::string& job, int64_t step,
                                       const std::string& name) {
  ASSIGN_OR_RETURN(auto call, Call({Op::kStat, job, step, name, 0, 0}));
  Fd fd(call.first);
  if (!call.second.status.ok()) return call.second.status;
  char b[8];
  if (call.second.length != 8) {
    return absl::DataLossError("malformed stat reply from " + endpoint_);
  }
  RETURN_IF_ERROR(ReadAll(fd.get(), b, 8, endpoint_));
  return GetU64(b);
}

StatusOr<std::vector<int64_t>> ReplicaClient::List(const std::string& job) {
  ASSIGN_OR_RETURN(auto call, Call({Op::kList, job, -1, "", 0, 0}));
  Fd fd(call.first);
  if (!call.second.status.ok()) return call.second.status;
  if (call.second.length % 8 != 0 || call.second.length > (1 << 20)) {
    return absl::DataLossError("malformed list reply from " + endpoint_);
  }
  std::string b(call.second.length, '\0');
  RETURN_IF_ERROR(ReadAll(fd.get(), b.data(), b.size(), endpoint_));
  std::vector<int64_t> steps;
  for (size_t i = 0; i < b.size(); i += 8) {
    steps.push_back(static_cast<int64_t>(GetU64(b.data() + i)));
  }
  return steps;
}

Status ReplicaClient::Drop(const std::string& job, int64_t step) {
  ASSIGN_OR_RETURN(auto call, Call({Op::kDrop, job, step, "", 0, 0}));
  Fd fd(call.first);
  return call.second.status;
}

Status ReplicaClient::Admit(const std::string& job, int64_t step,
                            const std::string& name, uint64_t bytes) {
  ASSIGN_OR_RETURN(auto call, Call({Op::kAdmit, job, step, name, 0, bytes}));
  Fd fd(call.first);
  return call.second.status;
}

StatusOr<int> ReplicaClient::Pin(const std::string& job, int64_t step) {
  ASSIGN_OR_RETURN(auto call, Call({Op::kPin, job, step, "", 0, 0}));
  if (!call.second.status.ok()) {
    close(call.first);
    return call.second.status;
  }
  return call.first;
}

}  // namespace strata::checkpoint::mem
