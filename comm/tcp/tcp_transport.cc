#include "comm/tcp/tcp_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "comm/tcp/socket.h"
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
  // Higher ranks connect to us.
  const int expected = (size - 1 - rank) * opts.streams;
  const Deadline end = SteadyClock::now() + opts.connect_timeout;
  for (int got = 0; got < expected;) {
    pollfd p{lfd, POLLIN, 0};
    if (poll(&p, 1, RemainingMs(end)) <= 0) {
      std::string missing;
      for (int peer = rank + 1; peer < size; ++peer) {
        if (t->fds()[peer][opts.streams - 1] < 0)
          absl::StrAppend(&missing, " ", peer);
      }
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank, ": ranks", missing, " did not connect"));
    }
    int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int32_t hello[2];
    // A connection that does not say hello quickly is not one of ours.
    Status st =
        tcp::ReadAll(fd, hello, sizeof(hello), std::min(timeout_ms, 5000));
    if (!st.ok() || hello[0] <= rank || hello[0] >= size || hello[1] < 0 ||
        hello[1] >= opts.streams || t->fds()[hello[0]][hello[1]] >= 0) {
      // Garbage, a stray process or a duplicate: ignore it, say so (rate-
      // limited: anyone who can reach the port can repeat it).
      const std::string peer = tcp::PeerAddress(fd);
      IgnoredConnections().Warn(
          peer, "not a peer",
          "rank {}: ignoring a connection from {} that is not a rank of this "
          "group ({})",
          rank, peer,
          st.ok() ? absl::StrCat("hello: rank ", hello[0], " stream ", hello[1],
                                 " of ", size, " ranks x ", opts.streams,
                                 " streams")
                  : std::string(st.message()));
      close(fd);
      continue;
    }
    tcp::SetNoDelay(fd);
    tcp::SetNonBlocking(fd, true);
    t->fds()[hello[0]][hello[1]] = fd;
    ++got;
  }
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace strata::comm
