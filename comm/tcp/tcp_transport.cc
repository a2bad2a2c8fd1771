#include "comm/tcp/tcp_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "comm/tcp/socket.h"
#include "comm/tcp/tcp_info.h"
#include "common/log_limiter.h"

namespace strata::comm {
namespace {

// Warnings about connections that are not ranks of the group, shared by
// every transport of the process (thread-safe).
LogLimiter& IgnoredConnections() {
  static LogLimiter limiter(GetLogger("COMM"));
  return limiter;
}

int RemainingMs(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - SteadyClock::now());
  return static_cast<int>(
      std::max<int64_t>(0, std::min<int64_t>(left.count(), 1 << 30)));
}

class TcpTransport final : public Transport {
 public:
  TcpTransport(int rank, int size, const TcpOptions& opts)
      : rank_(rank),
        size_(size),
        opts_(opts),
        fds_(size, std::vector<int>(opts.streams, -1)) {
    if (pipe2(abort_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
      abort_pipe_[0] = abort_pipe_[1] = -1;
    }
  }
  ~TcpTransport() override {
    for (auto& peer : fds_) {
      for (int fd : peer) {
        if (fd >= 0) close(fd);
      }
    }
    for (int fd : abort_pipe_) {
      if (fd >= 0) close(fd);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "tcp"; }
  std::vector<std::vector<int>>& fds() { return fds_; }

  std::vector<LinkCounter> LinkCounters() const override {
    std::vector<LinkCounter> out;
    for (int peer = 0; peer < size_; ++peer) {
      for (int k = 0; k < static_cast<int>(fds_[peer].size()); ++k) {
        if (fds_[peer][k] < 0) continue;
        auto c = tcp::ReadSendCounters(fds_[peer][k]);
        if (!c.ok()) continue;  // a closed socket has nothing to say
        out.push_back({peer, k, c->bytes_acked, c->busy_us});
      }
    }
    return out;
  }

  void Abort() override {
    aborted_ = true;
    char c = 1;
    if (abort_pipe_[1] >= 0) (void)!write(abort_pipe_[1], &c, 1);
  }

  Status SendRecv(int send_peer, const void* send, size_t send_bytes,
                  int recv_peer, void* recv, size_t recv_bytes,
                  Deadline deadline) override {
    struct Stripe {
      int fd;
      char* p;
      size_t left;
      bool is_send;
      int peer;
    };
    std::vector<Stripe> stripes;
    auto add = [&](int peer, char* base, size_t n, bool is_send) {
      if (peer < 0 || n == 0) return;
      const int s = n >= opts_.stripe_threshold ? opts_.streams : 1;
      for (int k = 0; k < s; ++k) {
        const size_t b = n * k / s, e = n * (k + 1) / s;
        if (e > b)
          stripes.push_back({fds_[peer][k], base + b, e - b, is_send, peer});
      }
    };
    add(send_peer, const_cast<char*>(static_cast<const char*>(send)),
        send_bytes, true);
    add(recv_peer, static_cast<char*>(recv), recv_bytes, false);
    std::vector<pollfd> pfds;
    std::vector<Stripe*> active;
    for (;;) {
      if (aborted_) return absl::AbortedError("transport aborted");
      // Move as many bytes as the kernel takes without blocking.
      bool pending = false;
      for (Stripe& s : stripes) {
        while (s.left > 0) {
          ssize_t n =
              s.is_send ? ::send(s.fd, s.p, s.left, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : ::recv(s.fd, s.p, s.left, MSG_DONTWAIT);
          if (n > 0) {
            s.p += n;
            s.left -= static_cast<size_t>(n);
            continue;
          }
          if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
          return absl::UnavailableError(
              absl::StrCat("rank ", rank_, ": connection to rank ", s.peer,
                           n == 0 ? " closed by the peer" : " failed: ",
                           n == 0 ? "" : std::strerror(errno)));
        }
        pending |= s.left > 0;
      }
      if (!pending) return absl::OkStatus();
      pfds.clear();
      active.clear();
      for (Stripe& s : stripes) {
        if (s.left == 0) continue;
        pfds.push_back(
            {s.fd, static_cast<short>(s.is_send ? POLLOUT : POLLIN), 0});
        active.push_back(&s);
      }
      pfds.push_back({abort_pipe_[0], POLLIN, 0});
      const int rc = poll(pfds.data(), pfds.size(), RemainingMs(deadline));
      if (rc == 0) {
        const Stripe* s = active.front();
        return absl::DeadlineExceededError(absl::StrCat(
            "rank ", rank_, ": timed out ",
            s->is_send ? "sending to" : "receiving from", " rank ", s->peer));
      }
      if (rc < 0 && errno != EINTR) return ErrnoToStatus(errno, "poll");
    }
  }

 private:
  int rank_, size_;
  TcpOptions opts_;
  std::vector<std::vector<int>> fds_;  // [peer][stream]
  int abort_pipe_[2] = {-1, -1};
  std::atomic<bool> aborted_{false};
};

}  // namespace

StatusOr<std::unique_ptr<Transport>> ConnectTcpTransport(
    std::shared_ptr<Store> store, int rank, int size, const TcpOptions& opts) {
  if (rank < 0 || rank >= size || opts.streams < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad tcp transport rank ", rank, " of ", size));
  }
  auto t = std::make_unique<TcpTransport>(rank, size, opts);
  ASSIGN_OR_RETURN(std::string host, tcp::ResolveBindAddress(opts.bind));
  ASSIGN_OR_RETURN(auto listener, tcp::Listen(host, 0));
  const int lfd = listener.first;
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{lfd};
  RETURN_IF_ERROR(store->Set(absl::StrCat("tcp/addr/", rank),
                             absl::StrCat(host, ":", listener.second)));
  const int timeout_ms = static_cast<int>(opts.connect_timeout.count());
  // Lower ranks: connect, say who we are (rank, stream).
  for (int peer = 0; peer < rank; ++peer) {
    auto addr =
        store->Get(absl::StrCat("tcp/addr/", peer), opts.connect_timeout);
    if (!addr.ok()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank, ": rank ", peer, " never published its address"));
    }
    std::vector<std::string> hp = absl::StrSplit(*addr, ':');
    int port = 0;
    if (hp.size() != 2 || !absl::SimpleAtoi(hp[1], &port)) {
      return absl::DataLossError("bad address for rank " +
                                 std::to_string(peer));
    }
    for (int k = 0; k < opts.streams; ++k) {
      ASSIGN_OR_RETURN(int fd, tcp::Connect(hp[0], port, timeout_ms));
      int32_t hello[2] = {rank, k};
      RETURN_IF_ERROR(tcp::WriteAll(fd, hello, sizeof(hello), timeout_ms));
      tcp::SetNonBlocking(fd, true);
      t->fds()[peer][k] = fd;
    }
  }
  // Higher ranks connect to us. Connections wait for their 8-byte hello
  // side by side (each at most 5 s), so connections that never speak (a
  // port scanner, a slow-drip client) cannot hold up the real peers.
  struct Pending {
    int fd;
    Deadline until;
    int32_t hello[2];
    size_t have = 0;
  };
  std::vector<Pending> pending;
  struct PendingCloser {
    std::vector<Pending>* p;
    ~PendingCloser() {
      for (const Pending& x : *p) close(x.fd);
    }
  } pending_closer{&pending};
  // Ignores a connection that is not a peer: garbage, a stray process or a
  // duplicate. Said once per peer and reason (rate-limited: anyone who can
  // reach the port can repeat it).
  auto reject = [&](int fd, const std::string& why) {
    const std::string peer = tcp::PeerAddress(fd);
    IgnoredConnections().Warn(
        peer, "not a peer",
        "rank {}: ignoring a connection from {} that is not a rank of this "
        "group ({})",
        rank, peer, why);
    close(fd);
  };
  const int expected = (size - 1 - rank) * opts.streams;
  const Deadline end = SteadyClock::now() + opts.connect_timeout;
  for (int got = 0; got < expected;) {
    const Deadline now = SteadyClock::now();
    if (now >= end) {
      std::string missing;
      for (int peer = rank + 1; peer < size; ++peer) {
        if (t->fds()[peer][opts.streams - 1] < 0)
          absl::StrAppend(&missing, " ", peer);
      }
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank, ": ranks", missing, " did not connect"));
    }
    std::vector<pollfd> pfds = {{lfd, POLLIN, 0}};
    Deadline wake = end;
    for (const Pending& x : pending) {
      pfds.push_back({x.fd, POLLIN, 0});
      wake = std::min(wake, x.until);
    }
    if (poll(pfds.data(), pfds.size(), RemainingMs(wake)) < 0 &&
        errno != EINTR) {
      return ErrnoToStatus(errno, absl::StrCat("rank ", rank, ": poll"));
    }
    // Hellos that arrived (possibly in pieces), and those overdue.
    std::vector<Pending> still;
    for (size_t i = 0; i < pending.size(); ++i) {
      Pending x = pending[i];
      if ((pfds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        const ssize_t n = read(x.fd, reinterpret_cast<char*>(x.hello) + x.have,
                               sizeof(x.hello) - x.have);
        if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) {
          reject(x.fd, n == 0 ? "closed before its hello"
                              : std::string(std::strerror(errno)));
          continue;
        }
        if (n > 0) x.have += static_cast<size_t>(n);
      }
      if (x.have < sizeof(x.hello)) {
        if (SteadyClock::now() >= x.until) {
          reject(x.fd, "no hello within 5 s");
        } else {
          still.push_back(x);
        }
        continue;
      }
      const int32_t peer = x.hello[0], k = x.hello[1];
      if (peer <= rank || peer >= size || k < 0 || k >= opts.streams ||
          t->fds()[peer][k] >= 0) {
        reject(x.fd, absl::StrCat("hello: rank ", peer, " stream ", k, " of ",
                                  size, " ranks x ", opts.streams, " streams"));
        continue;
      }
      tcp::SetNoDelay(x.fd);
      t->fds()[peer][k] = x.fd;
      ++got;
    }
    pending = std::move(still);
    if ((pfds[0].revents & POLLIN) != 0) {
      int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        pending.push_back(Pending{
            fd, SteadyClock::now() + std::chrono::milliseconds(
                                         std::min(timeout_ms, 5000)),
            {0, 0}});
      }
    }
  }
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace strata::comm
