#include "topology/probe/peer_bandwidth.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/net.h"

namespace strata::probe {
namespace {

constexpr size_t kChunk = 1 << 20;

Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// 8-byte length header, then the payload; the sink answers one byte.
bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

Status ServePeerSink(int port, int connections, void (*on_bound)(int)) {
  ASSIGN_OR_RETURN(const int fd, net::ListenTcp("0.0.0.0", port, 4));
  auto bound = net::BoundPort(fd);
  if (!bound.ok()) {
    close(fd);
    return bound.status();
  }
  if (on_bound != nullptr) on_bound(*bound);
  std::vector<char> buf(kChunk);
  for (int c = 0; c < connections; ++c) {
    int conn = accept(fd, nullptr, nullptr);
    if (conn < 0) continue;
    int64_t n = 0;
    if (ReadAll(conn, reinterpret_cast<char*>(&n), sizeof(n)) && n >= 0) {
      while (n > 0) {
        ssize_t r = recv(conn, buf.data(), std::min<int64_t>(n, kChunk), 0);
        if (r <= 0) break;
        n -= r;
      }
      char ack = 1;
      if (n == 0) WriteAll(conn, &ack, 1);
    }
    close(conn);
  }
  close(fd);
  return absl::OkStatus();
}

StatusOr<double> MeasurePeerGbps(const std::string& host, int port,
                                 int64_t bytes) {
  auto ip = net::ResolveIpv4(host);
  if (!ip.ok()) {
    return absl::UnavailableError(absl::StrCat("peer ", ip.status().message()));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip->c_str(), &addr.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status s = Errno(absl::StrCat("connect to peer ", host, ":", port));
    close(fd);
    return s;
  }
  std::vector<char> buf(kChunk, 'x');
  const auto t0 = std::chrono::steady_clock::now();
  bool ok = WriteAll(fd, reinterpret_cast<const char*>(&bytes), sizeof(bytes));
  for (int64_t left = bytes; ok && left > 0; left -= kChunk) {
    ok = WriteAll(fd, buf.data(), std::min<int64_t>(left, kChunk));
  }
  char ack = 0;
  ok = ok && ReadAll(fd, &ack, 1) && ack == 1;
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  close(fd);
  if (!ok) {
    return absl::UnavailableError(
        absl::StrCat("peer ", host, ":", port, " closed before the end"));
  }
  return bytes * 8.0 / s / 1e9;
}

StatusOr<double> MeasurePeerGbps(const std::string& host_port) {
  auto hp = net::ParseHostPort(host_port);
  if (!hp.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--peer: ", hp.status().message()));
  }
  return MeasurePeerGbps(hp->host, hp->port);
}

}  // namespace strata::probe
