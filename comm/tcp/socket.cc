#include "comm/tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/net.h"

namespace strata::comm::tcp {

StatusOr<std::string> ResolveBindAddress(const std::string& s) {
  if (s.empty()) return std::string("127.0.0.1");
  in_addr a;
  if (inet_pton(AF_INET, s.c_str(), &a) == 1) return s;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return ErrnoToStatus(errno, "getifaddrs");
  std::string found;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && s == i->ifa_name) {
      char buf[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr,
                buf, sizeof(buf));
      found = buf;
      break;
    }
  }
  freeifaddrs(list);
  if (found.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no IPv4 address or interface named '", s, "'"));
  }
  return found;
}

void SetNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

StatusOr<std::pair<int, int>> Listen(const std::string& addr, int port) {
  ASSIGN_OR_RETURN(const int fd, net::ListenTcp(addr, port, /*backlog=*/1024));
  auto bound = net::BoundPort(fd);
  if (!bound.ok()) {
    close(fd);
    return bound.status();
  }
  return std::make_pair(fd, *bound);
}

StatusOr<int> Connect(const std::string& host, int port, int timeout_ms) {
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError("bad IPv4 address '" + host + "'");
  }
  int delay_ms = 1;
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return ErrnoToStatus(errno, "socket");
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
      SetNoDelay(fd);
      return fd;
    }
    const int err = errno;
    close(fd);
    if (std::chrono::steady_clock::now() >= end) {
      return absl::DeadlineExceededError(absl::StrCat(
          "connect to ", host, ":", port, " failed: ", std::strerror(err)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    delay_ms = std::min(delay_ms * 2, 100);
  }
}

static Status WaitFd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int rc = poll(&p, 1, timeout_ms);
  if (rc == 0) return absl::DeadlineExceededError("socket timed out");
  if (rc < 0 && errno != EINTR) return ErrnoToStatus(errno, "poll");
  return absl::OkStatus();
}

Status WriteAll(int fd, const void* data, size_t n, int timeout_ms) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      RETURN_IF_ERROR(WaitFd(fd, POLLOUT, timeout_ms));
      continue;
    }
    return absl::UnavailableError(
        absl::StrCat("send failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

Status ReadAll(int fd, void* data, size_t n, int timeout_ms) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return absl::UnavailableError("connection closed by peer");
    if (errno == EAGAIN || errno == EINTR) {
      RETURN_IF_ERROR(WaitFd(fd, POLLIN, timeout_ms));
      continue;
    }
    return absl::UnavailableError(
        absl::StrCat("recv failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string PeerAddress(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  char text[INET_ADDRSTRLEN] = {};
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      addr.sin_family != AF_INET ||
      inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text)) == nullptr) {
    return "unknown peer";
  }
  return text;
}

}  // namespace strata::comm::tcp
